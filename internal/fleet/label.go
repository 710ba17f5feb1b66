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
// fleet and the intent row written before the create call, so that a lost
// create response can be resolved by finding the label in a listing.
// It panics on an invalid fleet name; callers validate names at the edge.
func Label(fleet string, intentID int64) string {
	if err := ValidateFleetName(fleet); err != nil {
		panic(err)
	}
	return labelPrefix + ":" + fleet + ":" + strconv.FormatInt(intentID, 10)
}

// ParseLabel is the inverse of Label. ok is false for any label vastfleet
// did not write (hand-made rentals, other tools).
func ParseLabel(s string) (fleet string, intentID int64, ok bool) {
	if len(s) > maxLabel {
		return "", 0, false
	}
	rest, found := strings.CutPrefix(s, labelPrefix+":")
	if !found {
		return "", 0, false
	}
	fleet, idText, found := strings.Cut(rest, ":")
	if !found || ValidateFleetName(fleet) != nil {
		return "", 0, false
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != idText {
		return "", 0, false
	}
	return fleet, id, true
}
