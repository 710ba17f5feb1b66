package launch

// The runner's eyes: each complete listing is applied to the nodes, and
// their state changes (booted, parked, released, failed) are acted on.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
	"golang.org/x/sync/errgroup"
)

// observe applies one complete listing: states into the store (on change
// only: the store fsyncs every commit), spend, adoption of our rentals the
// store did not record, and gone instances.
func (r *runner) observe(ctx context.Context, l provider.Listing, now time.Time) []int64 {
	prev := r.lastTick
	dt := now.Sub(r.lastTick)
	if dt > 0 {
		for _, n := range r.nodes {
			r.spent += n.rate() * dt.Hours()
		}
	}
	r.lastTick = now
	r.listingGap = dt
	listed := make(map[int64]provider.Instance, len(l.Instances))
	var redo []int64
	for _, row := range l.Instances {
		listed[row.ID] = row
		if _, ok := r.nodes[row.ID]; ok {
			continue
		}
		if sent, ok := r.destroying[row.ID]; ok {
			if now.Sub(sent) > 2*r.spec.PollEvery+30*time.Second {
				redo = append(redo, row.ID) // the last destroy gave up
			}
			continue
		}
		label, ok := fleet.ParseLabel(row.LabelText())
		if !ok || label.Fleet != r.spec.Fleet || label.Store != r.storeID(ctx) {
			continue
		}
		r.adopt(ctx, row, label, now)
	}
	for id := range r.destroying {
		if _, ok := listed[id]; !ok {
			// Gone where the destroy that took went out, when that is
			// known already (the background destroy confirms it too),
			// not at this listing: up to a tick of storage and pull.
			gone := now
			if at, ok := r.f.DestroySent(id); ok && at.Before(now) {
				gone = at
			}
			if err := r.f.MarkGone(ctx, id, gone); err == nil || errors.Is(err, store.ErrNotFound) {
				delete(r.destroying, id)
				delete(r.goingDPH, id)
				if p := r.pulls[id]; p != nil && p.GoneAt.IsZero() {
					p.GoneAt = gone
				}
			}
		}
	}
	var seenRows []provider.Instance
	for _, n := range r.sorted() {
		row, ok := listed[n.id]
		if !ok {
			if now.Sub(n.rentedAt) < r.grace() {
				continue // marketplaces list new rentals late
			}
			// A complete listing without it, past the grace period: gone.
			_ = r.f.MarkGone(ctx, n.id, now)
			if p := r.pulls[n.id]; p != nil {
				p.GoneAt = now
			}
			r.forget(n)
			r.failed++
			r.emit(Event{Event: EvFailed, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, Msg: "vanished from the listing"})
			continue
		}
		n.seen = true
		st := row.Status()
		host, port, _ := provider.SSHAddr(row)
		if row.Quarantined() {
			host, port = n.sshHost, n.sshPort // an unreadable row: keep the last address
		}
		n.intended, n.statusMsg = row.IntendedStatus, row.StatusMsg
		if st != n.state || host != n.sshHost || port != n.sshPort {
			if err := r.f.UpdateSeenAfter(ctx, n.id, st, host, port, provider.SSHURL(row), prev, now); err != nil {
				r.emit(Event{Event: EvWarn, At: now, InstanceID: n.id, Msg: err.Error()})
			}
			n.state, n.sshHost, n.sshPort = st, host, port
		}
		if n.phase == phBooting {
			switch {
			case st != provider.StateRunning:
				n.loadSeenAt, n.runSeenAt = now, time.Time{}
			case n.runSeenAt.IsZero():
				n.runSeenAt = now
			}
		}
		seenRows = append(seenRows, row)
		if p := r.pulls[n.id]; p != nil {
			if rep := fleet.BandwidthReports(row); len(rep) == 1 {
				p.Bandwidth = p.Bandwidth.Reported(rep[0], st, now)
			}
			p.State = st
		}
	}
	// One transaction for the whole listing's bandwidth figures.
	if err := r.f.RecordBandwidth(ctx, fleet.BandwidthReports(seenRows...), now); err != nil {
		r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
	}
	return redo
}

// storeID is the id of the store this launch records into; rentals
// labelled with another store's id are never adopted.
func (r *runner) storeID(ctx context.Context) string {
	if r.store == "" {
		if id, err := r.f.StoreID(ctx); err == nil {
			r.store = id
		}
	}
	return r.store
}

func (r *runner) grace() time.Duration {
	return r.f.Grace()
}

// adopt records a listed instance whose label names this fleet but that
// this run does not track: a rental whose response was lost, or made by a
// process killed before it could record it.
func (r *runner) adopt(ctx context.Context, row provider.Instance, label fleet.LabelParts, now time.Time) {
	in, err := r.f.Instance(ctx, row.ID)
	if err == nil && r.inflight[in.OfferID].ID != 0 {
		return // its rent is still running and will report it
	}
	if errors.Is(err, store.ErrNotFound) {
		it, ierr := r.f.IntentOf(ctx, row, label)
		if ierr != nil {
			return // not this store's: reconcile reports it as an orphan
		}
		if r.inflight[it.OfferID].ID != 0 {
			return
		}
		if err := r.f.AdoptIntent(ctx, it, row, now); err != nil {
			r.emit(Event{Event: EvWarn, At: now, InstanceID: row.ID, Msg: err.Error()})
			return
		}
		if in, err = r.f.Instance(ctx, row.ID); err != nil {
			return
		}
		r.rentsOK++
	} else if err != nil {
		return
	}
	if !in.GoneAt.IsZero() {
		host, port, _ := provider.SSHAddr(row)
		_ = r.f.UpdateSeen(ctx, row.ID, row.Status(), host, port, provider.SSHURL(row), now)
	}
	if in.Wanted == store.WantDestroy {
		r.destroying[row.ID] = time.Time{}
		return
	}
	n := r.track(in)
	r.emit(Event{Event: EvRented, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, Msg: "adopted by label"})
}

func (r *runner) forget(n *node) {
	delete(r.nodes, n.id)
	if r.machines[n.machineID]--; r.machines[n.machineID] <= 0 {
		delete(r.machines, n.machineID)
	}
}

// fail handles an instance that will not serve: with backfill it is
// destroyed now (and replaced by fill); without, it is left until the end,
// as the manual recipe does. Its machine is remembered either way.
func (r *runner) fail(ctx context.Context, n *node, reason string, now time.Time) []int64 {
	if n.doomed {
		return nil
	}
	switch n.phase {
	case phBooting:
		r.bootFailed++
	case phReleasing:
		r.releaseLost++
		r.parkedMinutes += n.parkedFor()
	}
	r.markBad(ctx, n, reason, now)
	return r.giveUp(n, reason, now)
}

// markBad puts the node's machine on the bad-host list, with why.
func (r *runner) markBad(ctx context.Context, n *node, reason string, now time.Time) {
	if err := r.f.MarkBadHost(ctx, store.BadHost{MachineID: n.machineID, Reason: reason, FailedAt: now, Until: now.Add(r.spec.BadHostTTL)}); err != nil {
		r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
	}
}

// giveUp counts a node as failed and skips its machine for the rest of
// this launch; with backfill it is destroyed now (and replaced by fill),
// without it is left until the end.
func (r *runner) giveUp(n *node, reason string, now time.Time) []int64 {
	if n.doomed {
		return nil
	}
	r.failed++
	r.bad[n.machineID] = true
	r.emit(Event{Event: EvFailed, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: n.state, Msg: reason})
	if !r.spec.Backfill {
		n.doomed = true
		return nil
	}
	n.dropping = true
	return []int64{n.id}
}

// transitions moves every node on from what the listing showed; it stops
// (parks) newly running instances and returns the nodes to destroy.
func (r *runner) transitions(ctx context.Context, now time.Time) []int64 {
	r.gateChecks(ctx)
	var out []int64
	var stop, start []*node
	var rebid []bidChange
	for _, n := range r.sorted() {
		if n.doomed || n.dropping || !n.seen {
			continue
		}
		st := n.state
		if st == provider.StateUnknown {
			if n.unknownSince.IsZero() {
				n.unknownSince = now
			}
		} else {
			n.unknownSince = time.Time{}
		}
		if r.spec.Bid != nil {
			if act, ok := r.outbidCheck(n, now); ok {
				if act.drop {
					// Its machine is skipped for this launch only: a
					// rival holds it, and the host is not at fault.
					out = append(out, r.giveUp(n, fmt.Sprintf("outbid at $%.4f/hr", n.bid), now)...)
				} else if act.price > 0 {
					rebid = append(rebid, bidChange{n, act.price})
				}
				continue
			}
		}
		switch {
		case st == provider.StateExited:
			out = append(out, r.fail(ctx, n, "container exited", now)...)
			continue
		case st == provider.StateOffline:
			out = append(out, r.fail(ctx, n, "host went offline", now)...)
			continue
		case st == provider.StateUnknown && now.Sub(n.unknownSince) >= UnknownFor:
			out = append(out, r.fail(ctx, n, "no host heartbeat for "+UnknownFor.String(), now)...)
			continue
		}
		switch n.phase {
		case phBooting:
			if st == provider.StateRunning {
				if ok, drop := r.gate(ctx, n, now); !ok {
					out = append(out, drop...)
					continue
				}
				r.bootOK++
				r.timeGates(n, now)
				r.emit(Event{Event: EvReady, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, State: st,
					Msg: "booted in " + now.Sub(n.rentedAt).Round(time.Second).String()})
				// Past the deadline (a resume after it) the release is
				// due: a stop now would only risk the GPUs.
				switch {
				case !r.spec.Park || r.released || !r.deadline.IsZero() && !now.Before(r.deadline):
					n.phase = phReady
				case !r.parkPays(n, now):
					n.phase = phReady
					r.keptRunning++
					r.emit(Event{Event: EvReady, At: now, InstanceID: n.id, State: st,
						Msg: fmt.Sprintf("kept running: at $%.3f/hr, parking risks more than it saves", n.offer.DPHTotal)})
				default:
					n.phase = phParking
					r.parkedOK++
					stop = append(stop, n)
				}
			} else if now.Sub(n.rentedAt) > r.spec.BootTimeout {
				out = append(out, r.fail(ctx, n, "still "+stateName(st)+" after the "+r.spec.BootTimeout.String()+" boot timeout", now)...)
			}
		case phParking:
			switch {
			case st == provider.StateStopped:
				n.phase = phParked
				r.emit(Event{Event: EvParked, At: now, InstanceID: n.id, State: st})
			case now.Sub(n.stopSentAt) >= 2*r.spec.PollEvery:
				stop = append(stop, n) // the stop did not take (or was never sent before a crash)
			}
		case phReleasing:
			switch {
			case st == provider.StateRunning:
				n.phase = phReady
				r.parkedMinutes += n.parkedFor()
				if !n.releasedAt.Before(r.since) {
					r.releaseDur = append(r.releaseDur, now.Sub(n.releasedAt))
				}
				r.emit(Event{Event: EvRunning, At: now, InstanceID: n.id, State: st})
			case scheduling(n) && now.Sub(n.startSentAt) >= SchedulingFor:
				// Waiting for GPUs another renter holds: it may wait for
				// ever, so it is replaced now rather than at the timeout.
				out = append(out, r.fail(ctx, n, "scheduling "+now.Sub(n.startSentAt).Round(time.Second).String()+" after the release: its GPUs were taken", now)...)
			case now.Sub(n.releasedAt) > r.spec.ReleaseTimeout:
				out = append(out, r.fail(ctx, n, "not running "+r.spec.ReleaseTimeout.String()+" after the release (its GPUs were probably taken)", now)...)
			case st == provider.StateStopped && !scheduling(n) &&
				(!n.startOK || n.intended != provider.StateRunning && now.Sub(n.startSentAt) >= 2*r.spec.PollEvery):
				start = append(start, n) // the start failed, or did not take
			}
		}
	}
	r.sendStop(ctx, stop, now)
	r.sendStart(ctx, start, now)
	r.changeBids(ctx, rebid, now)
	return out
}

// sendStop parks nodes: in bulk calls where the marketplace takes them
// (vast allows about one single stop a second), else one by one.
func (r *runner) sendStop(ctx context.Context, ns []*node, now time.Time) {
	if len(ns) > 1 {
		ids := make([]int64, len(ns))
		for i, n := range ns {
			ids[i] = n.id
			n.stopSentAt = now
		}
		if errs, ok := r.f.ParkAll(ctx, ids); ok {
			for _, n := range ns {
				if err := errs[n.id]; err != nil {
					r.emit(Event{Event: EvWarn, At: now, InstanceID: n.id, Msg: err.Error()})
				} else {
					n.parkRecorded()
				}
			}
			return
		}
	}
	r.parallel(ctx, ns, func(ctx context.Context, n *node) error {
		n.stopSentAt = now
		err := r.f.Park(ctx, n.id)
		if err == nil {
			n.parkRecorded()
		}
		return err
	})
}

// parkRecorded: the manager has recorded the node's stop in the store
// (fleet.Manager.Park), so the node's state follows, as the store's
// does. A node parked and released in one tick (the release comes as the
// last ones boot) is never listed stopped: without this, the listing that
// shows it running again looks like no change, and the store keeps it
// stopped, billing no compute, until someone lists the account again.
func (n *node) parkRecorded() {
	if compute, _ := provider.Bills(n.state); compute {
		n.state = provider.StateStopped
	}
}

// SchedulingFor is how long a released instance may show "Scheduling"
// (waiting for its GPUs) before it is replaced: vast's own help calls
// anything past about 30 seconds resources that are not available.
const SchedulingFor = 30 * time.Second

// scheduling: the listing shows the node waiting for its GPUs after a
// start. Vast says so only in status_msg; actual_status stays "stopped".
func scheduling(n *node) bool {
	return n.state == provider.StateStopped && strings.HasPrefix(strings.ToLower(strings.TrimSpace(n.statusMsg)), "scheduling")
}

func stateName(s string) string {
	if s == "" {
		return "provisioning"
	}
	return s
}

// parallel runs fn for each node with at most Workers at once; failures are
// reported as warnings (the next tick retries what needs retrying).
func (r *runner) parallel(ctx context.Context, ns []*node, fn func(context.Context, *node) error) {
	if len(ns) == 0 {
		return
	}
	var g errgroup.Group
	g.SetLimit(r.spec.Workers)
	// The calling loop waits; the workers are the busy ones.
	r.busy(-1)
	defer r.busy(1)
	for _, n := range ns {
		g.Go(func() error {
			r.busy(1)
			defer r.busy(-1)
			if err := fn(ctx, n); err != nil && ctx.Err() == nil {
				r.emit(Event{Event: EvWarn, At: r.now(), InstanceID: n.id, Msg: err.Error()})
			}
			return nil
		})
	}
	_ = g.Wait()
}

func (r *runner) sorted() []*node {
	out := make([]*node, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}
