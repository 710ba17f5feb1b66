// Package bill holds vastfleet's ledger up against the marketplace's own
// bill: per instance and per kind (compute, storage, bandwidth), the two
// figures, their difference, and what explains it.
//
// The two ledgers are independent: vastfleet prices the state timeline it
// observed (fleet.InstanceCostOf), the marketplace charges what it ran.
// A difference is named for its likeliest cause, from the stretches each
// side billed and the rates they imply.
package bill

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Cent is the tolerance of a reconciliation: an instance whose two
// figures differ by less agrees.
const Cent = 0.01

// Explanations of a line's difference.
const (
	// Rounding: the two agree within a cent.
	Rounding = "rounding"
	// Stretch: one side billed a stretch of time the other did not (an
	// instance charged before vastfleet recorded it, or after vastfleet
	// counted it gone, or the reverse).
	Stretch = "stretch"
	// RateChange: the same stretch billed at another rate.
	RateChange = "rate_change"
	// UnknownInstance: a charge for an instance this data dir does not
	// know.
	UnknownInstance = "unknown_instance"
	// NotCharged: vastfleet counted a cost the marketplace has not
	// charged (yet).
	NotCharged = "not_charged"
	// BandwidthEstimate: vastfleet's bandwidth is its estimate; the
	// marketplace never reported what it charged.
	BandwidthEstimate = "bandwidth_estimate"
	// BandwidthLag: vastfleet's bandwidth is as of its last listing.
	BandwidthLag = "bandwidth_lag"
	// UnknownKind: a kind of charge vastfleet does not count.
	UnknownKind = "unknown_kind"
)

// slack is how far the two sides' stretches may differ before a
// difference is put down to a stretch rather than a rate: the second
// granularity of the bill's dates.
const slack = 2 * time.Second

// Line is one kind of charge of one instance.
type Line struct {
	Kind        string  `json:"kind"`
	Ledger      float64 `json:"ledger"`
	Charged     float64 `json:"charged"`
	Difference  float64 `json:"difference"` // charged − ledger
	Explanation string  `json:"explanation"`
	Detail      string  `json:"detail,omitempty"`
}

// Instance is one instance's lines.
type Instance struct {
	ID         int64   `json:"id"`
	Fleet      string  `json:"fleet,omitempty"`
	Known      bool    `json:"known"`
	Live       bool    `json:"live"`
	Lines      []Line  `json:"lines"`
	Ledger     float64 `json:"ledger"`
	Charged    float64 `json:"charged"`
	Difference float64 `json:"difference"`
	// Agrees: the instance's two totals are within a cent.
	Agrees bool `json:"agrees"`
}

// Total sums the instances.
type Total struct {
	Ledger     float64 `json:"ledger"`
	Charged    float64 `json:"charged"`
	Difference float64 `json:"difference"`
}

// Report is a reconciliation.
type Report struct {
	At        time.Time  `json:"at"`
	Fleet     string     `json:"fleet,omitempty"`
	From      time.Time  `json:"from"` // the first day of charges read
	Instances []Instance `json:"instances"`
	Total     Total      `json:"total"`
	// Disagree counts the instances whose totals differ by a cent or more.
	Disagree int `json:"disagree"`
}

// ErrNoInstances: the fleet asked for has no instances in the data dir.
var ErrNoInstances = errors.New("no instances in this data dir")

// ErrNoCharges: the marketplace serves no bill to reconcile against.
var ErrNoCharges = errors.New("this marketplace serves no charges to reconcile against")

// Reconcile reads fleet's ledger (every instance of the data dir when
// fleet is "") and the marketplace's charges since the first of them
// was created, and compares them. Charges for instances the data dir does
// not know are shown only when fleet is "" (a fleet's scope cannot claim
// them). Any failure to read the bill whole is an error: never a bill of
// $0.
func Reconcile(ctx context.Context, m *fleet.Manager, fleetName string) (Report, error) {
	ch, ok := m.P.(provider.Charger)
	if !ok {
		return Report{}, ErrNoCharges
	}
	rows, err := m.S.Instances(ctx, store.InstanceFilter{IncludeGone: true})
	if err != nil {
		return Report{}, fmt.Errorf("reconcile: %w", err)
	}
	known := map[int64]bool{}
	var scope []store.Instance
	var from time.Time
	for _, r := range rows {
		known[r.ID] = true
		if fleetName != "" && r.Fleet != fleetName {
			continue
		}
		scope = append(scope, r)
		if from.IsZero() || r.CreatedAt.Before(from) {
			from = r.CreatedAt
		}
	}
	if fleetName != "" && len(scope) == 0 {
		return Report{}, fmt.Errorf("reconcile: fleet %q: %w", fleetName, ErrNoInstances)
	}
	now := m.Clock.Now()
	if from.IsZero() {
		from = now.Add(-7 * 24 * time.Hour) // the CLI's default week
	}
	user, err := m.P.CurrentUser(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("reconcile: reading the account: %w", err)
	}
	charges, err := ch.Charges(ctx, provider.ChargeQuery{From: from, To: now, Account: user.ID})
	if err != nil {
		return Report{}, fmt.Errorf("reconcile: %w (nothing is compared: a bill not read whole is not a bill of $0)", err)
	}
	// The ledger is priced as of the bill: a live instance up to the last
	// moment the marketplace charged it (when that is before now), so that
	// the two sides cover the same time.
	now = m.Clock.Now()
	billedTo := map[int64]time.Time{}
	for _, c := range charges {
		for _, l := range c.Lines {
			billedTo[c.InstanceID] = maxTime(billedTo[c.InstanceID], l.End)
		}
		billedTo[c.InstanceID] = maxTime(billedTo[c.InstanceID], c.End)
	}
	ledger := make([]fleet.InstanceCost, 0, len(scope))
	inScope := map[int64]bool{}
	for _, r := range scope {
		inScope[r.ID] = true
		asOf := now
		if t := billedTo[r.ID]; r.Live() && !t.IsZero() && t.Before(now) {
			asOf = t
		}
		c, err := m.CostOf(ctx, r, asOf)
		if err != nil {
			return Report{}, fmt.Errorf("reconcile: %w", err)
		}
		ledger = append(ledger, c)
	}
	if fleetName != "" {
		charges = slices.DeleteFunc(charges, func(c provider.Charge) bool { return !inScope[c.InstanceID] })
	}
	rep := Compare(ledger, charges, known)
	rep.At, rep.Fleet, rep.From = now, fleetName, from.UTC().Truncate(24*time.Hour)
	return rep, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// charged is one instance's charges summed by kind over its days.
type charged struct {
	amount map[string]float64
	span   map[string]fleet.Span
	kinds  []string // in the order first seen
}

// Compare holds ledger (vastfleet's cost per instance) up against
// charges. known is every instance the data dir knows, in any fleet: a
// charge for one of those outside ledger is left out, one for an
// instance not in known is shown as unknown.
func Compare(ledger []fleet.InstanceCost, charges []provider.Charge, known map[int64]bool) Report {
	by := map[int64]*charged{}
	var order []int64
	for _, c := range charges {
		b := by[c.InstanceID]
		if b == nil {
			b = &charged{amount: map[string]float64{}, span: map[string]fleet.Span{}}
			by[c.InstanceID] = b
			order = append(order, c.InstanceID)
		}
		for _, l := range c.Lines {
			if _, ok := b.amount[l.Kind]; !ok {
				b.kinds = append(b.kinds, l.Kind)
			}
			b.amount[l.Kind] += l.Amount
			sp := b.span[l.Kind]
			if !l.Start.IsZero() && (sp.From.IsZero() || l.Start.Before(sp.From)) {
				sp.From = l.Start
			}
			if l.End.After(sp.To) {
				sp.To = l.End
			}
			b.span[l.Kind] = sp
		}
	}
	rep := Report{Instances: []Instance{}}
	inLedger := map[int64]bool{}
	for _, c := range ledger {
		inLedger[c.InstanceID] = true
		rep.add(compareOne(c, by[c.InstanceID]))
	}
	for _, id := range order {
		if inLedger[id] || known[id] {
			continue
		}
		rep.add(unknownOne(id, by[id]))
	}
	slices.SortStableFunc(rep.Instances, func(a, b Instance) int {
		switch {
		case a.Known != b.Known:
			if a.Known {
				return -1
			}
			return 1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return rep
}

func (r *Report) add(in Instance) {
	for _, l := range in.Lines {
		in.Ledger += l.Ledger
		in.Charged += l.Charged
	}
	in.Difference = in.Charged - in.Ledger
	in.Agrees = math.Abs(in.Difference) < Cent
	if !in.Agrees {
		r.Disagree++
	}
	r.Instances = append(r.Instances, in)
	r.Total.Ledger += in.Ledger
	r.Total.Charged += in.Charged
	r.Total.Difference = r.Total.Charged - r.Total.Ledger
}

// compareOne lines one known instance up against its charges (b nil:
// none).
func compareOne(c fleet.InstanceCost, b *charged) Instance {
	in := Instance{ID: c.InstanceID, Fleet: c.Fleet, Known: true, Live: c.Live}
	if b == nil {
		b = &charged{amount: map[string]float64{}, span: map[string]fleet.Span{}}
	}
	for _, kind := range []string{provider.ChargeCompute, provider.ChargeStorage, provider.ChargeBandwidth} {
		l := Line{Kind: kind, Charged: b.amount[kind]}
		var span fleet.Span
		var billed time.Duration
		switch kind {
		case provider.ChargeCompute:
			l.Ledger, span, billed = c.Compute, c.ComputeSpan, c.Running
		case provider.ChargeStorage:
			l.Ledger, span, billed = c.Storage, c.StorageSpan, c.Existed
		default:
			l.Ledger = c.Bandwidth
		}
		l.Difference = l.Charged - l.Ledger
		_, wasCharged := b.amount[kind]
		l.Explanation, l.Detail = explain(kind, l, span, billed, b.span[kind], wasCharged, c.BandwidthEstimated)
		in.Lines = append(in.Lines, l)
	}
	for _, kind := range b.kinds {
		if kind == provider.ChargeCompute || kind == provider.ChargeStorage || kind == provider.ChargeBandwidth {
			continue
		}
		in.Lines = append(in.Lines, Line{Kind: kind, Charged: b.amount[kind], Difference: b.amount[kind], Explanation: UnknownKind,
			Detail: fmt.Sprintf("the marketplace charged %q, which vastfleet does not count", kind)})
	}
	return in
}

// unknownOne is a charged instance the data dir does not know.
func unknownOne(id int64, b *charged) Instance {
	in := Instance{ID: id}
	for _, kind := range b.kinds {
		in.Lines = append(in.Lines, Line{Kind: kind, Charged: b.amount[kind], Difference: b.amount[kind], Explanation: UnknownInstance,
			Detail: "a charge for an instance this data dir does not know (another tool's, or one rented outside vastfleet)"})
	}
	return in
}

// explain names a line's difference.
func explain(kind string, l Line, span fleet.Span, billed time.Duration, cspan fleet.Span, wasCharged, bwEstimated bool) (string, string) {
	if math.Abs(l.Difference) < Cent {
		return Rounding, ""
	}
	if kind == provider.ChargeBandwidth {
		if bwEstimated {
			return BandwidthEstimate, "the marketplace never reported this instance's bandwidth in a listing; vastfleet's figure is the estimated image pull"
		}
		return BandwidthLag, "vastfleet's bandwidth is as of the last listing that reported it"
	}
	if !wasCharged {
		return NotCharged, fmt.Sprintf("vastfleet counted %s from %s to %s; the marketplace charged none", hours(billed), stamp(span.From), stamp(span.To))
	}
	if span.From.IsZero() || billed <= 0 {
		return Stretch, fmt.Sprintf("charged from %s to %s; vastfleet counted no %s", stamp(cspan.From), stamp(cspan.To), kind)
	}
	// The time one side billed outside the other's stretch, priced at
	// vastfleet's rate: a stretch when it accounts for most of the
	// difference, a rate otherwise.
	rate := l.Ledger / billed.Hours()
	var extra time.Duration
	if !cspan.From.IsZero() {
		extra = span.From.Sub(cspan.From) + cspan.To.Sub(span.To)
	}
	if byStretch := extra.Hours() * rate; extra.Abs() > slack && math.Signbit(byStretch) == math.Signbit(l.Difference) && math.Abs(byStretch) >= math.Abs(l.Difference)/2 {
		return Stretch, fmt.Sprintf("charged from %s to %s; vastfleet counted from %s to %s", stamp(cspan.From), stamp(cspan.To), stamp(span.From), stamp(span.To))
	}
	h := billed.Hours()
	return RateChange, fmt.Sprintf("over the same stretch: charged $%.4f/h, vastfleet counted $%.4f/h for %s", l.Charged/h, l.Ledger/h, hours(billed))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("01-02 15:04:05")
}

func hours(d time.Duration) string { return d.Round(time.Second).String() }
