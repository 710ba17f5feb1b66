package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// InstanceCost is what one instance has cost so far, from its recorded
// state timeline and the marketplace's billing rules: compute
// (dph_total − storage) for every second it was running, storage for every
// second it existed and was not offline, from creation until gone (or now),
// and bandwidth (see BandwidthOf).
type InstanceCost struct {
	InstanceID int64         `json:"id"`
	Fleet      string        `json:"fleet"`
	Experiment string        `json:"experiment"`
	State      string        `json:"state"`
	Live       bool          `json:"live"`
	Running    time.Duration `json:"running_seconds"` // billed compute time
	Existed    time.Duration `json:"existed_seconds"` // billed storage time (offline excluded)
	Compute    float64       `json:"compute"`         // $
	Storage    float64       `json:"storage"`         // $
	Bandwidth  float64       `json:"bandwidth"`       // $
	// BandwidthEstimated: the marketplace never reported this instance's
	// bandwidth charge, so Bandwidth is the estimated image pull.
	BandwidthEstimated bool `json:"bandwidth_estimated"`
	// Total is Compute + Storage + Bandwidth.
	Total     float64  `json:"total"`
	Estimated *float64 `json:"estimated"` // the plan's estimate, when one exists
	// ComputeSpan and StorageSpan are the first and last moment billed
	// for compute and for storage (zero when none was): what a bill's
	// stretches are compared with.
	ComputeSpan, StorageSpan Span `json:"-"`
}

// Span is a stretch of time, From to To.
type Span struct{ From, To time.Time }

// widen makes s cover [from, to].
func (s *Span) widen(from, to time.Time) {
	if s.From.IsZero() || from.Before(s.From) {
		s.From = from
	}
	if to.After(s.To) {
		s.To = to
	}
}

// FleetCost sums a fleet's instances.
type FleetCost struct {
	Fleet     string  `json:"fleet"`
	N         int     `json:"instances"`
	Compute   float64 `json:"compute"`
	Storage   float64 `json:"storage"`
	Bandwidth float64 `json:"bandwidth"`
	Total     float64 `json:"total"`
	// Estimated sums the estimates of the instances that have one; EstOf
	// is those instances' actual total, the figure to compare it with.
	Estimated *float64 `json:"estimated"`
	EstOf     float64  `json:"estimated_of"`
	DPH       float64  `json:"dph_total"` // current $/h of the live instances
}

// CostReport is the answer of Cost.
type CostReport struct {
	At time.Time `json:"at"`
	// Clock names the time At is in: "wall", or "market" on a simulated
	// market.
	Clock     string         `json:"clock"`
	Instances []InstanceCost `json:"instances"`
	Fleets    []FleetCost    `json:"fleets"`
	Compute   float64        `json:"compute"`
	Storage   float64        `json:"storage"`
	Bandwidth float64        `json:"bandwidth"`
	Total     float64        `json:"total"`
	Estimated *float64       `json:"estimated"`    // sum of the estimates that exist
	EstOf     float64        `json:"estimated_of"` // actual total of the instances that have an estimate
}

// Cost computes what instances have cost, per instance and per fleet;
// fleet "" means every fleet. Gone instances are included.
func (m *Manager) Cost(ctx context.Context, fleet string) (CostReport, error) {
	now := m.now()
	rep := CostReport{At: now, Clock: clock.Kind(m.Clock)}
	ins, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: fleet, IncludeGone: true})
	if err != nil {
		return rep, fmt.Errorf("cost: %w", err)
	}
	byFleet := map[string]*FleetCost{}
	for _, in := range ins {
		c, err := m.CostOf(ctx, in, now)
		if err != nil {
			return rep, fmt.Errorf("cost: %w", err)
		}
		rep.Instances = append(rep.Instances, c)
		f := byFleet[in.Fleet]
		if f == nil {
			f = &FleetCost{Fleet: in.Fleet}
			byFleet[in.Fleet] = f
		}
		f.N++
		f.Compute += c.Compute
		f.Storage += c.Storage
		f.Bandwidth += c.Bandwidth
		f.Total += c.Total
		if c.Estimated != nil {
			f.Estimated = addPtr(f.Estimated, *c.Estimated)
			f.EstOf += c.Total
			rep.Estimated = addPtr(rep.Estimated, *c.Estimated)
			rep.EstOf += c.Total
		}
		if c.Live {
			if c.State == provider.StateRunning {
				f.DPH += in.DPHTotal
			} else if c.State != provider.StateOffline {
				f.DPH += in.StorageDPH
			}
		}
		rep.Compute += c.Compute
		rep.Storage += c.Storage
		rep.Bandwidth += c.Bandwidth
		rep.Total += c.Total
	}
	for _, f := range byFleet {
		rep.Fleets = append(rep.Fleets, *f)
	}
	sort.Slice(rep.Fleets, func(i, j int) bool { return rep.Fleets[i].Fleet < rep.Fleets[j].Fleet })
	return rep, nil
}

// InstanceCostOf prices one instance from its state changes and rate
// changes up to now (or its gone time). The state before the first event
// is that event's from-state ("" = provisioning, which bills storage
// only); the rates before the first rate change are that change's
// from-rates, and after the last one the instance's recorded rates.
func InstanceCostOf(in store.Instance, evs []store.Event, rates []store.RateChange, now time.Time) InstanceCost {
	c := InstanceCost{InstanceID: in.ID, Fleet: in.Fleet, Experiment: in.Experiment, State: in.State,
		Live: in.GoneAt.IsZero(), Estimated: in.EstCost}
	end := now
	if !in.GoneAt.IsZero() {
		end = in.GoneAt
	}
	state := in.State
	if len(evs) > 0 {
		state = evs[0].From
	}
	dph, storageDPH := in.DPHTotal, in.StorageDPH
	if len(rates) > 0 {
		dph, storageDPH = rates[0].FromDPHTotal, rates[0].FromStorageDPH
	}
	at := in.CreatedAt
	add := func(until time.Time) {
		if until.After(end) {
			until = end
		}
		if !until.After(at) {
			return
		}
		d := until.Sub(at)
		if state != store.StateGone {
			compute, storage := provider.Bills(state)
			if compute {
				c.Running += d
				c.Compute += d.Hours() * (dph - storageDPH)
				c.ComputeSpan.widen(at, until)
			}
			if storage {
				c.Existed += d
				c.Storage += d.Hours() * storageDPH
				c.StorageSpan.widen(at, until)
			}
		}
		at = until
	}
	for i, j := 0, 0; i < len(evs) || j < len(rates); {
		// The earlier of the next state change and the next rate change;
		// a state change first on a tie, as it was seen by a listing that
		// showed the old rate.
		if j == len(rates) || (i < len(evs) && !evs[i].At.After(rates[j].At)) {
			e := evs[i]
			add(e.At)
			if e.At.After(at) {
				at = e.At
			}
			state = e.To
			i++
			continue
		}
		r := rates[j]
		add(r.At)
		dph, storageDPH = r.ToDPHTotal, r.ToStorageDPH
		if j == len(rates)-1 {
			dph, storageDPH = in.DPHTotal, in.StorageDPH
		}
		j++
	}
	add(end)
	c.Bandwidth, c.BandwidthEstimated = BandwidthOf(in, now)
	c.Total = c.Compute + c.Storage + c.Bandwidth
	return c
}

// BandwidthOf is an instance's bandwidth charge up to now (or its end):
// the marketplace's own figure where a listing reported one, else the
// estimate, the whole image pull at the host's inet_down_cost
// (estimated = true).
//
// A report is as old as the last listing; an instance still loading then
// kept pulling until it was destroyed (or until now), at the host's
// inet_down, up to the estimated image size: that part is added, so that an
// instance destroyed mid-pull is not undercounted.
func BandwidthOf(in store.Instance, now time.Time) (amount float64, estimated bool) {
	bw := in.Bandwidth
	est := market.TransferCost(bw.PullGB, 0, bw.DownCost, bw.UpCost)
	if bw.Billed == nil {
		// Never reported: the whole pull, or what the host's inet_down
		// could have pulled while the instance lived, if less (one
		// destroyed mid-pull did not pull the rest).
		if bw.DownMbps > 0 && bw.PullGB > 0 && !in.CreatedAt.IsZero() {
			end := pullEnd(in, now)
			if pulled := end.Sub(in.CreatedAt).Seconds() / market.PullSeconds(1, bw.DownMbps); pulled < bw.PullGB {
				return market.TransferCost(max(pulled, 0), 0, bw.DownCost, bw.UpCost), true
			}
		}
		return est, true
	}
	amount = *bw.Billed
	if in.State != provider.StateLoading || bw.DownMbps <= 0 || bw.PullGB <= 0 || amount >= est {
		return amount, false
	}
	end := pullEnd(in, now)
	if !end.After(bw.BilledAt) {
		return amount, false
	}
	// At the host's advertised inet_down, or at the pace the reports
	// showed since the rental began if slower: a throttled host pulls at
	// a fraction of what it advertises (seen: 150 Mb/s on a 2 Gb/s offer,
	// where 2 s at the advertised speed came to $0.009, 13 times what it
	// pulled).
	gbPerSecond := 1 / market.PullSeconds(1, bw.DownMbps)
	if since := bw.BilledAt.Sub(in.CreatedAt).Seconds(); !in.CreatedAt.IsZero() && since > 0 && bw.DownCost > 0 {
		gbPerSecond = min(gbPerSecond, amount/bw.DownCost/since)
	}
	more := market.TransferCost(end.Sub(bw.BilledAt).Seconds()*gbPerSecond, 0, bw.DownCost, 0)
	return min(est, amount+more), false
}

// pullEnd is when an instance's pull stopped at the latest: its end, as
// compute and storage end there (gone: when its destroy took, the
// request's send time where this data dir destroyed it); for one still
// listed whose destroy was asked for, that request; else now. Ending a
// gone instance's pull at the request instead left out what it pulled
// until the destroy went out (a launch's surplus, destroyed in the
// background: 1.4 s of pulling, $0.0005 on a fast host).
func pullEnd(in store.Instance, now time.Time) time.Time {
	end := in.GoneAt
	if end.IsZero() {
		end = in.DestroyRequestedAt
	}
	if end.IsZero() || end.After(now) {
		return now
	}
	return end
}

func addPtr(p *float64, v float64) *float64 {
	if p != nil {
		v += *p
	}
	return &v
}

// InstanceCost prices one instance from its recorded timeline.
func (m *Manager) InstanceCost(ctx context.Context, id int64) (InstanceCost, error) {
	in, err := m.S.Instance(ctx, id)
	if err != nil {
		return InstanceCost{}, err
	}
	return m.CostOf(ctx, in, m.now())
}

// CostOf prices instance in, as recorded, at now: from its state changes
// and its rate changes.
func (m *Manager) CostOf(ctx context.Context, in store.Instance, now time.Time) (InstanceCost, error) {
	evs, err := m.S.Events(ctx, in.ID)
	if err != nil {
		return InstanceCost{}, err
	}
	rates, err := m.S.RateChanges(ctx, in.ID)
	if err != nil {
		return InstanceCost{}, err
	}
	return InstanceCostOf(in, evs, rates, now), nil
}

// MarshalJSON writes the durations as seconds.
func (c InstanceCost) MarshalJSON() ([]byte, error) {
	type plain InstanceCost
	return json.Marshal(struct {
		plain
		Running float64 `json:"running_seconds"`
		Existed float64 `json:"existed_seconds"`
	}{plain(c), c.Running.Seconds(), c.Existed.Seconds()})
}
