package provider

import (
	"context"
	"errors"
	"time"
)

// Charger is a marketplace that serves its own bill per instance (vast's
// GET /api/v0/charges/, which `vastai show invoices-v1 --charges` reads).
// Not every marketplace does: callers ask with a type assertion, and a
// marketplace without it has nothing to reconcile against.
type Charger interface {
	// Charges returns every instance charge of the account whose day lies
	// in [q.From, q.To], all pages of it. It fails, and returns nothing,
	// when an answer does not parse (ErrChargesUnreadable), when the pages
	// do not add up to the total the marketplace announced
	// (ErrChargesPartial), or when a charge names another account
	// (ErrChargesOtherAccount): a bill that could not be read whole is
	// never a bill of $0.
	Charges(ctx context.Context, q ChargeQuery) ([]Charge, error)
}

// ChargeQuery bounds the charges asked for by their day.
type ChargeQuery struct {
	From, To time.Time
	// Account is the account's id (User.ID) the charges must belong to; 0
	// leaves the check out.
	Account int64
}

// Charge kinds, vastfleet's names for a charge's items.
const (
	ChargeCompute   = "compute"
	ChargeStorage   = "storage"
	ChargeBandwidth = "bandwidth"
)

// Charge is what the marketplace charged one instance over one day.
type Charge struct {
	InstanceID int64
	Day        time.Time // the start of its (UTC) day
	Start, End time.Time // the stretch charged
	Amount     float64   // $; the sum of Lines
	Lines      []ChargeLine
}

// ChargeLine is one kind of charge within a Charge.
type ChargeLine struct {
	// Kind is ChargeCompute, ChargeStorage, ChargeBandwidth, or the
	// marketplace's own name for a kind vastfleet does not know.
	Kind       string
	Amount     float64 // $
	Start, End time.Time
}

// The ways a charges answer can fail to be a bill.
var (
	ErrChargesUnreadable   = errors.New("the marketplace's charges answer could not be read")
	ErrChargesPartial      = errors.New("the marketplace's charges answer is incomplete")
	ErrChargesOtherAccount = errors.New("the marketplace's charges are for another account")
)
