package fleet

import (
	"crypto/rand"
	"encoding/hex"
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
// store (data dir) that rented it, the fleet, the intent row written before
// the create call and a random nonce, so that a lost create response can be
// resolved by finding the label in a listing, and so that two data dirs
// renting on one account never take each other's instances for orphans of
// their own. The nonce keeps labels unique across a store rollback (a lost
// WAL, a restored backup): intent ids then start again from an old value,
// and without it a resume would create labels that running instances
// already carry. An empty nonce gives the older three-part label, which
// ParseLabel still reads.
// It panics on an invalid fleet name, store id or nonce; callers validate
// names at the edge, store ids come from store.ID and nonces from NewNonce.
func Label(storeID, fleet string, intentID int64, nonce string) string {
	if err := ValidateFleetName(fleet); err != nil {
		panic(err)
	}
	if !validStoreID(storeID) {
		panic(fmt.Sprintf("fleet: store id %q is not 8 hex digits", storeID))
	}
	l := labelPrefix + ":" + storeID + ":" + fleet + ":" + strconv.FormatInt(intentID, 10)
	if nonce == "" {
		return l
	}
	if !validNonce(nonce) {
		panic(fmt.Sprintf("fleet: label nonce %q is not 8 hex digits", nonce))
	}
	return l + ":" + nonce
}

// NewNonce draws a label nonce: 32 random bits, so two labels of one store,
// fleet and intent id collide once in about 4 billion rollbacks.
func NewNonce() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// LabelParts is what a vastfleet label says.
type LabelParts struct {
	Store  string
	Fleet  string
	Intent int64
	Nonce  string // "" in labels written before nonces
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
	var nonce string
	if len(parts) == 4 && validNonce(parts[3]) {
		nonce, parts = parts[3], parts[:3]
	}
	if len(parts) != 3 || !validStoreID(parts[0]) || ValidateFleetName(parts[1]) != nil {
		return LabelParts{}, false
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != parts[2] {
		return LabelParts{}, false
	}
	return LabelParts{Store: parts[0], Fleet: parts[1], Intent: id, Nonce: nonce}, true
}

func validStoreID(s string) bool { return isLowerHex8(s) }

func validNonce(s string) bool { return isLowerHex8(s) }

func isLowerHex8(s string) bool {
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
