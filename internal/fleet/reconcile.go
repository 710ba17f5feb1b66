package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// ReconcileOptions tunes Reconcile.
type ReconcileOptions struct {
	// DestroyOrphans destroys instances whose label names this store but
	// none of its intents, or an intent that already has its instance.
	DestroyOrphans bool
	// DestroyForeign also destroys instances labelled by another vastfleet
	// store: another data dir on this account, or this machine's own before
	// its database was lost. Off unless asked: they may be a colleague's.
	DestroyForeign bool
	// Adopt, when set, picks orphans to track from now on (see adopt): the
	// instances of a store that was lost, whose labels name this data
	// dir's former store or no intent this store remembers. Adopted
	// orphans are neither reported as orphans nor destroyed.
	Adopt func(Orphan) bool
	// LookOnly sends the marketplace nothing but reads: a store that wants
	// an instance destroyed and still sees it listed leaves the destroy to
	// a writer. For reconciling a snapshot that is shown, never kept.
	LookOnly bool
	// SelfStops is when each instance's own agent will have stopped or
	// destroyed it by its dead-man switch (DeadManAt): a listing that
	// shows such an instance stopped where vastfleet wanted it running,
	// or no longer lists it where vastfleet asked for no destroy, dates
	// the change there, when that lies after the last listing that
	// showed it as before. Nil: Manager.SelfStops, if set. Without it a
	// stop seen after a long unwatched gap is dated mid-gap, a
	// disappearance at the listing: off by up to the whole gap.
	SelfStops map[int64]time.Time
}

// DeadManAt is when an agent's dead-man switch stops or destroys its
// instance: once the coordinator has acknowledged no heartbeat for after,
// which is the coordinator's last heartbeat from it (heard) plus after,
// on the coordinator's clock.
func DeadManAt(heard time.Time, after time.Duration) time.Time {
	if heard.IsZero() || after <= 0 {
		return time.Time{}
	}
	return heard.Add(after)
}

// selfStops is opts.SelfStops, else the manager's.
func (m *Manager) selfStops(ctx context.Context, opts ReconcileOptions) map[int64]time.Time {
	if opts.SelfStops != nil || m.SelfStops == nil {
		return opts.SelfStops
	}
	hints, err := m.SelfStops(ctx)
	if err != nil {
		m.log().Warn("reading when the agents' dead-man switches fired; stops they made are dated by listings only", "err", err)
		return nil
	}
	return hints
}

// inGap: at lies after the last listing that showed an instance as it
// was (last; zero: none known) and no later than now. A dead-man moment
// outside it was not what changed the instance: its switch has not fired
// yet, or a listing saw the instance as before after it.
func inGap(at, last, now time.Time) bool {
	return !at.IsZero() && at.After(last) && !at.After(now)
}

// selfStopped reports whether a listing's row shows the agent's own stop
// of an instance vastfleet wanted running: it billed compute as last
// known, and now bills storage only.
func selfStopped(known store.Instance, row provider.Instance) bool {
	if known.Wanted != store.WantRunning || !known.GoneAt.IsZero() {
		return false
	}
	was, _ := provider.Bills(known.State)
	return was && stoppedState(row.Status())
}

// Change kinds a Reconcile reports.
const (
	ChangeState     = "state"     // a known instance's state changed
	ChangeAdopted   = "adopted"   // created under our intent but never recorded
	ChangeGone      = "gone"      // no longer listed (past the grace period)
	ChangeAbandoned = "abandoned" // a pending intent whose label never appeared
	ChangeDestroyed = "orphan-destroyed"
	ChangeRevived   = "revived" // marked gone earlier, listed again
)

// Change is one thing Reconcile changed in the store or the marketplace.
type Change struct {
	Kind     string `json:"kind"`
	Instance int64  `json:"id"` // 0 for an abandoned intent
	Intent   int64  `json:"intent_id"`
	Detail   string `json:"detail"`
}

// Orphan is a listed instance whose label names vastfleet but no intent
// this store knows.
type Orphan struct {
	Instance provider.Instance `json:"instance"`
	Reason   string            `json:"reason"`
	// Foreign: the label names another vastfleet store.
	Foreign bool `json:"foreign"`
}

// Report is what one Reconcile saw and did.
type Report struct {
	Listed    int      `json:"listed"`    // rows in the complete listing
	Unmanaged int      `json:"unmanaged"` // rows without a vastfleet label (rented by hand)
	Changes   []Change `json:"changes"`
	Orphans   []Orphan `json:"orphans"`
	// Interruptible counts this store's instances the listing shows as
	// interruptible (bids) and vastfleet keeps: what a bid watcher
	// watches (WatchBids).
	Interruptible int `json:"interruptible"`
	// Redestroyed are instances the store wants destroyed that were still
	// listed: their destroy was sent again (idempotent, not a store change).
	Redestroyed []int64 `json:"redestroyed"`
	// Quarantined are listed rows the client could not read: kept as
	// "unknown", never counted gone, adopted or destroyed as orphans.
	Quarantined []int64 `json:"quarantined"`
	// Errors are per-instance failures that did not stop the reconcile.
	Errors []error `json:"-"`
}

// MarshalJSON writes the errors as their messages.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	msgs := make([]string, len(r.Errors))
	for i, e := range r.Errors {
		msgs[i] = e.Error()
	}
	return json.Marshal(struct {
		plain
		Errors []string `json:"errors"`
	}{plain(r), msgs})
}

// seeQuarantined records a known instance whose row the client could not
// read: "unknown", with the last address it had, and destroyed again when
// the store wants it destroyed (its id is all a destroy needs).
func (m *Manager) seeQuarantined(ctx context.Context, rep *Report, known store.Instance, row provider.Instance, now time.Time, opts ReconcileOptions) {
	if known.State != provider.StateUnknown || !known.GoneAt.IsZero() {
		rep.Changes = append(rep.Changes, Change{Kind: ChangeState, Instance: row.ID, Intent: known.IntentID,
			Detail: fmt.Sprintf("%s → unknown (row unreadable: %s)", stateName(known.State), row.Quarantine)})
	}
	if err := m.S.UpdateSeen(ctx, row.ID, provider.StateUnknown, known.SSHHost, known.SSHPort, "", now); err != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("instance %d: %w", row.ID, err))
	}
	if known.Wanted == store.WantDestroy && !opts.LookOnly {
		if err := m.P.DestroyInstance(ctx, row.ID); err != nil && !errors.Is(err, provider.ErrNotFound) {
			rep.Errors = append(rep.Errors, fmt.Errorf("re-destroy instance %d: %w", row.ID, err))
		}
		rep.Redestroyed = append(rep.Redestroyed, row.ID)
	}
}

// Reconcile makes the store agree with one complete listing of the account.
// On a failed or incomplete listing it changes nothing and returns the error:
// such a listing is no proof that anything is gone. Run twice in a row, the
// second run reports no changes.
func (m *Manager) Reconcile(ctx context.Context, opts ReconcileOptions) (Report, error) {
	var rep Report
	if err := m.checkAccount(ctx); err != nil {
		return rep, fmt.Errorf("reconcile: nothing changed: %w", err)
	}
	l, asked, err := m.completeListingAt(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: nothing changed: %w", err)
	}
	if len(l.Instances) == 0 {
		// An empty listing while the store holds live instances is the one
		// a broken server most plausibly sends: act on it only when a second
		// listing agrees.
		if live, err := m.S.LiveInstances(ctx); err == nil && len(live) > 0 {
			if err := m.sleep(ctx, m.pollEvery()); err != nil {
				return rep, err
			}
			if l, asked, err = m.completeListingAt(ctx); err != nil {
				return rep, fmt.Errorf("reconcile: nothing changed: %w", err)
			}
		}
	}
	storeID, err := m.S.ID(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: nothing changed: %w", err)
	}
	now := m.now()
	rep.Listed = len(l.Instances)
	listed := byID(l)
	hints := m.selfStops(ctx, opts)

	rows := append([]provider.Instance(nil), l.Instances...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	var seenRows []provider.Instance // known rows whose state was recorded
	for _, row := range rows {
		label, ok := ParseLabel(row.LabelText())
		known, kerr := m.S.Instance(ctx, row.ID)
		if kerr == nil && !sameInstance(known, row) {
			// Our id, someone else's instance: never touched as ours.
			kerr = store.ErrNotFound
		}
		if row.Quarantined() {
			// Listed but unreadable: it exists, and that is all we know.
			rep.Quarantined = append(rep.Quarantined, row.ID)
			if kerr == nil {
				m.seeQuarantined(ctx, &rep, known, row, now, opts)
			}
			continue
		}
		switch {
		case kerr == nil:
			switch {
			case !known.GoneAt.IsZero():
				// Marked gone earlier, listed again: a listing beats our
				// belief, and UpdateSeen makes it live again.
				rep.Changes = append(rep.Changes, Change{Kind: ChangeRevived, Instance: row.ID, Intent: known.IntentID,
					Detail: "listed again after being marked gone"})
			case known.State != row.Status():
				rep.Changes = append(rep.Changes, Change{Kind: ChangeState, Instance: row.ID, Intent: known.IntentID,
					Detail: fmt.Sprintf("%s → %s", stateName(known.State), stateName(row.Status()))})
			}
			if known.GoneAt.IsZero() {
				if err := m.refreshRates(ctx, row); err != nil {
					rep.Errors = append(rep.Errors, fmt.Errorf("instance %d: %w", row.ID, err))
				}
			}
			seen := m.S.UpdateSeen
			if at, ok := hints[row.ID]; ok && inGap(at, known.LastSeenAt, now) && selfStopped(known, row) {
				seen = func(ctx context.Context, id int64, state, host string, port int, url string, now time.Time) error {
					return m.S.UpdateSeenAt(ctx, id, state, host, port, url, at, now)
				}
			}
			if err := seen(ctx, row.ID, row.Status(), sshHost(row), sshPort(row), provider.SSHURL(row), now); err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("instance %d: %w", row.ID, err))
			} else {
				seenRows = append(seenRows, row)
			}
			if row.IsBid && known.Wanted != store.WantDestroy {
				rep.Interruptible++
			}
			if known.Wanted == store.WantDestroy && !opts.LookOnly {
				if err := m.P.DestroyInstance(ctx, row.ID); err != nil && !errors.Is(err, provider.ErrNotFound) {
					rep.Errors = append(rep.Errors, fmt.Errorf("re-destroy instance %d: %w", row.ID, err))
				}
				rep.Redestroyed = append(rep.Redestroyed, row.ID)
			}
			continue
		case !errors.Is(kerr, store.ErrNotFound):
			rep.Errors = append(rep.Errors, fmt.Errorf("instance %d: %w", row.ID, kerr))
			continue
		}
		if !ok {
			rep.Unmanaged++
			continue
		}
		if label.Store != storeID {
			rep.Orphans = append(rep.Orphans, Orphan{Instance: row, Foreign: true,
				Reason: fmt.Sprintf("labelled by another vastfleet data dir (store %s, fleet %s)", label.Store, label.Fleet)})
			continue
		}
		intent, ierr := m.IntentOf(ctx, row, label)
		if ierr != nil {
			if ierr != nil && !errors.Is(ierr, store.ErrNotFound) {
				rep.Errors = append(rep.Errors, fmt.Errorf("instance %d: %w", row.ID, ierr))
				continue
			}
			rep.Orphans = append(rep.Orphans, Orphan{Instance: row, Reason: "label names vastfleet but no intent of this store"})
			continue
		}
		if intent.InstanceID != 0 && intent.InstanceID != row.ID {
			// A second rental under one intent: this code never creates twice,
			// so it is another writer's; do not adopt it over the first.
			rep.Orphans = append(rep.Orphans, Orphan{Instance: row,
				Reason: fmt.Sprintf("intent %d already recorded instance %d", intent.ID, intent.InstanceID)})
			continue
		}
		// Created under our intent, never recorded (crash, lost response, or
		// an intent given up on while the instance was still on its way).
		if err := m.AdoptIntent(ctx, intent, row, now); err != nil {
			rep.Errors = append(rep.Errors, err)
			continue
		}
		rep.Changes = append(rep.Changes, Change{Kind: ChangeAdopted, Instance: row.ID, Intent: intent.ID,
			Detail: fmt.Sprintf("intent %d (%s), offer %d", intent.ID, intent.State, intent.OfferID)})
	}
	// One transaction for every row's bandwidth figures, dated when the
	// listing was asked for.
	if asked.After(now) {
		asked = now
	}
	if err := m.recordBandwidth(ctx, asked, seenRows...); err != nil {
		rep.Errors = append(rep.Errors, err)
	}

	if opts.Adopt != nil {
		kept := rep.Orphans[:0]
		for _, o := range rep.Orphans {
			if !opts.Adopt(o) {
				kept = append(kept, o)
				continue
			}
			c, err := m.adopt(ctx, o)
			if err != nil {
				rep.Errors = append(rep.Errors, err)
				kept = append(kept, o)
				continue
			}
			rep.Changes = append(rep.Changes, c)
		}
		rep.Orphans = kept
	}

	if (opts.DestroyOrphans || opts.DestroyForeign) && !opts.LookOnly {
		for _, o := range rep.Orphans {
			if o.Foreign && !opts.DestroyForeign || !o.Foreign && !opts.DestroyOrphans {
				continue
			}
			if err := m.P.DestroyInstance(ctx, o.Instance.ID); err != nil && !errors.Is(err, provider.ErrNotFound) {
				rep.Errors = append(rep.Errors, fmt.Errorf("destroy orphan %d: %w", o.Instance.ID, err))
				continue
			}
			rep.Changes = append(rep.Changes, Change{Kind: ChangeDestroyed, Instance: o.Instance.ID,
				Detail: o.Reason + "; destroy sent, the next reconcile confirms it"})
		}
	}

	live, err := m.S.LiveInstances(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	for _, in := range live {
		if _, ok := listed[in.ID]; ok {
			continue
		}
		if m.young(in.CreatedAt, now) {
			continue // too young: its absence means nothing yet
		}
		gone := goneAt(in, time.Time{}, now)
		if at, ok := hints[in.ID]; ok && inGap(at, in.LastSeenAt, now) && in.DestroyRequestedAt.IsZero() {
			gone = at // its agent destroyed it
		}
		if err := m.S.MarkGone(ctx, in.ID, gone); err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("mark %d gone: %w", in.ID, err))
			continue
		}
		rep.Changes = append(rep.Changes, Change{Kind: ChangeGone, Instance: in.ID, Intent: in.IntentID,
			Detail: "absent from a complete listing"})
	}

	pending, err := m.S.PendingIntents(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	labels := byLabel(l)
	batched := byBatch(l)
	for _, it := range pending {
		_, ok := labels[it.Label]
		if it.BatchLabel != "" {
			_, ok = batched[batchKey{it.BatchLabel, it.MachineID}]
		}
		if ok || m.young(it.CreatedAt, now) {
			continue
		}
		if err := m.S.AbandonIntent(ctx, it.ID, "label absent from a complete listing after the grace period", now); err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("abandon intent %d: %w", it.ID, err))
			continue
		}
		rep.Changes = append(rep.Changes, Change{Kind: ChangeAbandoned, Intent: it.ID,
			Detail: fmt.Sprintf("offer %d, label %s never listed", it.OfferID, it.Label)})
	}
	return rep, nil
}

func stateName(s string) string {
	if s == "" {
		return "provisioning"
	}
	return s
}

// metaAccount is the store meta key naming the marketplace account whose
// instances this store tracks.
const metaAccount = "vast_account_id"

// ErrWrongAccount: the key belongs to another account than the one this
// store's instances were rented with; its listing proves nothing about them.
var ErrWrongAccount = errors.New("API key belongs to another account")

// checkAccount pins the store to the first account it reconciles with, so
// that a listing made with another account's key (which would not show our
// instances) is never read as "all gone".
func (m *Manager) checkAccount(ctx context.Context) error {
	u, err := m.P.CurrentUser(ctx)
	if err != nil {
		return fmt.Errorf("who is the account: %w", err)
	}
	id := strconv.FormatInt(u.ID, 10)
	have, err := m.S.GetMeta(ctx, metaAccount)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return m.S.SetMeta(ctx, metaAccount, id)
	case err != nil:
		return err
	case have != id:
		return fmt.Errorf("%w: the key is account %s, this store tracks account %s", ErrWrongAccount, id, have)
	}
	return nil
}

// String renders the report for people, one line per change.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "reconciled %d listed instances (%d not vastfleet's)\n", r.Listed, r.Unmanaged)
	for _, c := range r.Changes {
		switch {
		case c.Instance != 0:
			fmt.Fprintf(&b, "  %-16s instance %d: %s\n", c.Kind, c.Instance, c.Detail)
		default:
			fmt.Fprintf(&b, "  %-16s intent %d: %s\n", c.Kind, c.Intent, c.Detail)
		}
	}
	for _, id := range r.Redestroyed {
		fmt.Fprintf(&b, "  %-16s instance %d: still listed, destroy sent again\n", "redestroy", id)
	}
	for _, o := range r.Orphans {
		kind, hint := "orphan", "--destroy-orphans destroys it"
		if o.Foreign {
			kind, hint = "foreign", "--destroy-foreign destroys it, if no other data dir wants it"
		}
		fmt.Fprintf(&b, "  %-16s instance %d (label %q): %s; %s\n", kind, o.Instance.ID, o.Instance.LabelText(), o.Reason, hint)
	}
	for _, err := range r.Errors {
		fmt.Fprintf(&b, "  %-16s %v\n", "error", err)
	}
	return b.String()
}
