package launch

// The runner's eyes: each complete listing is applied to the nodes and
// recorded (states, addresses, bandwidth, gone instances, adoptions);
// the planner (transitions.go, decide.go) then moves them on, and the
// runner sends what it planned (sendStop here, sendStart in decide.go).

import (
	"context"
	"errors"
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
	r.accrue(now)
	listed := make(map[int64]provider.Instance, len(l.Instances))
	var redo []int64
	for _, row := range l.Instances {
		listed[row.ID] = row
		if r.unknownRow(ctx, row, now) {
			redo = append(redo, row.ID) // the last destroy gave up
		}
	}
	r.confirmGone(ctx, listed, now)
	var seenRows []provider.Instance
	for _, n := range r.sorted() {
		row, ok := listed[n.id]
		if !ok {
			r.unlisted(ctx, n, now)
			continue
		}
		r.seen(ctx, n, row, prev, now)
		seenRows = append(seenRows, row)
	}
	// One transaction for the whole listing's bandwidth figures.
	if err := r.f.RecordBandwidth(ctx, fleet.BandwidthReports(seenRows...), now); err != nil {
		r.emit(Event{Event: EvWarn, At: now, Msg: err.Error()})
	}
	return redo
}

// accrue adds what the nodes billed since the last listing to the spend.
func (r *runner) accrue(now time.Time) {
	dt := now.Sub(r.lastTick)
	if dt > 0 {
		for _, n := range r.nodes {
			r.spent += n.rate() * dt.Hours()
		}
	}
	r.lastTick = now
	r.listingGap = dt
}

// unknownRow looks at a listed row that is no node of this run: one
// being destroyed whose destroy gave up (true: send it again), or this
// fleet's rental that this run does not track (adopted).
func (r *runner) unknownRow(ctx context.Context, row provider.Instance, now time.Time) bool {
	if _, ok := r.nodes[row.ID]; ok || r.others[row.ID] {
		return false
	}
	if sent, ok := r.destroying[row.ID]; ok {
		return now.Sub(sent) > 2*r.spec.PollEvery+30*time.Second
	}
	label, ok := fleet.ParseLabel(row.LabelText())
	if ok && label.Fleet == r.spec.Fleet && label.Store == r.storeID(ctx) {
		r.adopt(ctx, row, label, now)
	}
	return false
}

// confirmGone records the instances being destroyed that the listing no
// longer shows.
func (r *runner) confirmGone(ctx context.Context, listed map[int64]provider.Instance, now time.Time) {
	for id := range r.destroying {
		if _, ok := listed[id]; ok {
			continue
		}
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

// unlisted handles a node a complete listing does not show: gone, past
// the grace period (marketplaces list new rentals late).
func (r *runner) unlisted(ctx context.Context, n *node, now time.Time) {
	if now.Sub(n.rentedAt) < r.grace() {
		return
	}
	_ = r.f.MarkGone(ctx, n.id, now)
	if p := r.pulls[n.id]; p != nil {
		p.GoneAt = now
	}
	r.forget(n)
	r.failed++
	r.emit(Event{Event: EvFailed, At: now, InstanceID: n.id, OfferID: n.offerID, MachineID: n.machineID, Msg: "vanished from the listing"})
}

// seen takes a node's listed row in: its state and address (recorded on
// change only: the store fsyncs every commit), when its boot was seen,
// and its bandwidth.
func (r *runner) seen(ctx context.Context, n *node, row provider.Instance, prev, now time.Time) {
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
	if p := r.pulls[n.id]; p != nil {
		if rep := fleet.BandwidthReports(row); len(rep) == 1 {
			p.Bandwidth = p.Bandwidth.Reported(rep[0], st, now)
		}
		p.State = st
	}
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

func (m *model) forget(n *node) {
	delete(m.nodes, n.id)
	if m.machines[n.machineID]--; m.machines[n.machineID] <= 0 {
		delete(m.machines, n.machineID)
	}
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

func (m *model) sorted() []*node {
	out := make([]*node, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}
