package fleet

import (
	"fmt"
	"strconv"
	"strings"
)

// labelPrefix marks every instance vastfleet rents. Reconcile ignores
// instances without it: the account may hold rentals made by hand.
const labelPrefix = "vastfleet"

// maxLabel is the marketplace's cap on a create-time label.
const maxLabel = 256

// ValidateFleetName reports whether name can be a fleet name: 1–64 characters
// of [a-z0-9-_]. The set excludes ':' so that a label parses back unambiguously.
func ValidateFleetName(name string) error {
	if len(name) == 0 || len(name) > 64 {
		return fmt.Errorf("fleet name %q: must be 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("fleet name %q: only a-z, 0-9, '-' and '_' are allowed", name)
		}
	}
	return nil
}

// Label is the idempotency label of one rental: it names vastfleet, the
// store (data dir) that rented it, the fleet and the intent row written
// before the create call, so that a lost create response can be resolved by
// finding the label in a listing, and so that two data dirs renting on one
// account never take each other's instances for orphans of their own.
// It panics on an invalid fleet name or store id; callers validate names
// at the edge and store ids come from store.ID.
func Label(storeID, fleet string, intentID int64) string {
	if err := ValidateFleetName(fleet); err != nil {
		panic(err)
	}
	if !validStoreID(storeID) {
		panic(fmt.Sprintf("fleet: store id %q is not 8 hex digits", storeID))
	}
	return labelPrefix + ":" + storeID + ":" + fleet + ":" + strconv.FormatInt(intentID, 10)
}

// LabelParts is what a vastfleet label says.
type LabelParts struct {
	Store  string
	Fleet  string
	Intent int64
}

// ParseLabel is the inverse of Label. ok is false for any label vastfleet
// did not write (hand-made rentals, other tools).
func ParseLabel(s string) (LabelParts, bool) {
	if len(s) > maxLabel {
		return LabelParts{}, false
	}
	rest, found := strings.CutPrefix(s, labelPrefix+":")
	if !found {
		return LabelParts{}, false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 || !validStoreID(parts[0]) || ValidateFleetName(parts[1]) != nil {
		return LabelParts{}, false
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != parts[2] {
		return LabelParts{}, false
	}
	return LabelParts{Store: parts[0], Fleet: parts[1], Intent: id}, true
}

func validStoreID(s string) bool {
	if len(s) != 8 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
