package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// What vastfleet wants an instance to be.
const (
	WantRunning = "running"
	WantParked  = "parked"
	WantDestroy = "destroy"
)

// StateGone is the to-state of the event MarkGone writes.
const StateGone = "gone"

// Instance is one rented marketplace instance as vastfleet last saw it.
// Zero times mean "not set" (NULL); State is the last seen actual_status
// ("" while provisioning). An instance is live until MarkGone.
type Instance struct {
	ID         int64 // the marketplace instance id
	IntentID   int64 // 0 when adopted or imported
	Fleet      string
	OfferID    int64
	MachineID  int64
	GPUName    string
	NumGPUs    int
	CPUCores   float64
	RAMMB      float64
	DPHTotal   float64
	StorageDPH float64
	Label      string
	State      string
	Wanted     string

	CreatedAt          time.Time
	LastSeenAt         time.Time
	RunningSince       time.Time
	DestroyRequestedAt time.Time
	GoneAt             time.Time

	SSHHost string
	SSHPort int
	SSHURL  string

	Experiment string
	EstHours   *float64
	EstCost    *float64

	Bandwidth Bandwidth
}

// Bandwidth is what vastfleet knows about an instance's bandwidth bill:
// the host's prices and speed and the image size (for the estimate), and
// the marketplace's own charge as last reported.
type Bandwidth struct {
	DownCost float64 // $/GB in (inet_down_cost)
	UpCost   float64 // $/GB out (inet_up_cost)
	DownMbps float64 // the host's inet_down
	PullGB   float64 // the image size the pull was estimated at; 0: unknown
	// Billed is the marketplace's bandwidth charge so far ($) as of
	// BilledAt; nil when it never reported one.
	Billed   *float64
	BilledAt time.Time
}

// Live reports whether the instance may still exist (and bill).
func (i Instance) Live() bool { return i.GoneAt.IsZero() }

// Event is one observed state change of an instance.
type Event struct {
	InstanceID int64
	From, To   string
	At         time.Time
}

// RateChange is a change of an instance's $/hour while it lived: compute
// and storage together (DPHTotal includes storage, as on the marketplace).
type RateChange struct {
	InstanceID                   int64
	At                           time.Time
	FromDPHTotal, ToDPHTotal     float64
	FromStorageDPH, ToStorageDPH float64
}

// InstanceFilter selects instances: Fleet "" means every fleet.
type InstanceFilter struct {
	Fleet       string
	IncludeGone bool
}

const instanceCols = `id, intent_id, fleet, offer_id, machine_id, gpu_name, num_gpus, cpu_cores, ram_mb, dph_total,
	storage_dph, label, state, wanted, created_at, last_seen_at, running_since, destroy_requested_at, gone_at,
	ssh_host, ssh_port, ssh_url, experiment, est_hours, est_cost,
	inet_down_cost, inet_up_cost, inet_down_mbps, pull_gb, bandwidth_billed, bandwidth_billed_at`

func scanInstance(sc rowScanner) (Instance, error) {
	var i Instance
	var intent sql.NullInt64
	var created, seen string
	var running, destroyReq, gone sql.NullString
	var estH, estC, billed sql.NullFloat64
	var billedAt sql.NullString
	bw := &i.Bandwidth
	err := sc.Scan(&i.ID, &intent, &i.Fleet, &i.OfferID, &i.MachineID, &i.GPUName, &i.NumGPUs, &i.CPUCores, &i.RAMMB,
		&i.DPHTotal, &i.StorageDPH, &i.Label, &i.State, &i.Wanted, &created, &seen, &running, &destroyReq, &gone,
		&i.SSHHost, &i.SSHPort, &i.SSHURL, &i.Experiment, &estH, &estC,
		&bw.DownCost, &bw.UpCost, &bw.DownMbps, &bw.PullGB, &billed, &billedAt)
	if err != nil {
		return Instance{}, err
	}
	i.IntentID = intent.Int64
	i.EstHours, i.EstCost = floatPtr(estH), floatPtr(estC)
	bw.Billed = floatPtr(billed)
	if bw.BilledAt, err = parseNullTime(billedAt); err != nil {
		return Instance{}, err
	}
	if i.CreatedAt, err = parseTime(created); err != nil {
		return Instance{}, err
	}
	if i.LastSeenAt, err = parseTime(seen); err != nil {
		return Instance{}, err
	}
	if i.RunningSince, err = parseNullTime(running); err != nil {
		return Instance{}, err
	}
	if i.DestroyRequestedAt, err = parseNullTime(destroyReq); err != nil {
		return Instance{}, err
	}
	if i.GoneAt, err = parseNullTime(gone); err != nil {
		return Instance{}, err
	}
	return i, nil
}

func getInstance(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id int64) (Instance, error) {
	i, err := scanInstance(q.QueryRowContext(ctx, "SELECT "+instanceCols+" FROM instances WHERE id = ?", id))
	return oneRow(i, err, "instance %d", id)
}

func addEvent(ctx context.Context, tx *sql.Tx, id int64, from, to string, at time.Time) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO state_events(instance_id, from_state, to_state, at) VALUES (?, ?, ?, ?)",
		id, from, to, fmtTime(at))
	return err
}

// upsertInstance inserts i or, when the id exists, refreshes what the
// marketplace reports about it. Lifecycle columns that have their own
// methods (wanted, destroy_requested_at, gone_at) and the first created_at
// are kept on update; intent link, label, fleet, experiment, ids, resources
// and estimates are never erased by a zero value. A state change writes an
// event.
func upsertInstance(ctx context.Context, tx *sql.Tx, i Instance, now time.Time) error {
	if i.ID <= 0 {
		return fmt.Errorf("instance: bad id %d", i.ID)
	}
	if i.Wanted == "" {
		i.Wanted = WantRunning
	}
	if i.CreatedAt.IsZero() {
		i.CreatedAt = now
	}
	var intent any
	if i.IntentID != 0 {
		intent = i.IntentID
	}
	old, err := getInstance(ctx, tx, i.ID)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	var running any
	if i.State == "running" {
		if exists && old.State == "running" && !old.RunningSince.IsZero() {
			running = fmtTime(old.RunningSince)
		} else {
			running = fmtTime(now)
		}
	}
	bw := &i.Bandwidth
	if !exists {
		_, err = tx.ExecContext(ctx, `INSERT INTO instances(id, intent_id, fleet, offer_id, machine_id, gpu_name, num_gpus,
			cpu_cores, ram_mb, dph_total, storage_dph, label, state, wanted, created_at, last_seen_at, running_since,
			ssh_host, ssh_port, ssh_url, experiment, est_hours, est_cost,
			inet_down_cost, inet_up_cost, inet_down_mbps, pull_gb, bandwidth_billed, bandwidth_billed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			i.ID, intent, i.Fleet, i.OfferID, i.MachineID, i.GPUName, i.NumGPUs, i.CPUCores, i.RAMMB, i.DPHTotal,
			i.StorageDPH, i.Label, i.State, i.Wanted, fmtTime(i.CreatedAt), fmtTime(now), running,
			i.SSHHost, i.SSHPort, i.SSHURL, i.Experiment, nullFloat(i.EstHours), nullFloat(i.EstCost),
			bw.DownCost, bw.UpCost, bw.DownMbps, bw.PullGB, nullFloat(bw.Billed), fmtNullTime(bw.BilledAt))
		if err != nil {
			return fmt.Errorf("instance %d: %w", i.ID, err)
		}
		if i.State != "" {
			return addEvent(ctx, tx, i.ID, "", i.State, now)
		}
		return nil
	}
	if i.IntentID == 0 {
		i.IntentID = old.IntentID
	}
	if i.IntentID != 0 {
		intent = i.IntentID
	}
	if i.Label == "" {
		i.Label = old.Label
	}
	// Zero means "not reported" (a listing lacks the offer, a file lacks
	// the machine): keep what we knew.
	keepStr := func(v *string, o string) {
		if *v == "" {
			*v = o
		}
	}
	keepNum := func(v *float64, o float64) {
		if *v == 0 {
			*v = o
		}
	}
	keepStr(&i.Fleet, old.Fleet)
	keepStr(&i.Experiment, old.Experiment)
	keepNum(&i.CPUCores, old.CPUCores)
	keepNum(&i.RAMMB, old.RAMMB)
	keepNum(&i.StorageDPH, old.StorageDPH)
	if i.OfferID == 0 {
		i.OfferID = old.OfferID
	}
	if i.MachineID == 0 {
		i.MachineID = old.MachineID
	}
	if i.EstHours == nil {
		i.EstHours = old.EstHours
	}
	if i.EstCost == nil {
		i.EstCost = old.EstCost
	}
	keepNum(&bw.DownCost, old.Bandwidth.DownCost)
	keepNum(&bw.UpCost, old.Bandwidth.UpCost)
	keepNum(&bw.DownMbps, old.Bandwidth.DownMbps)
	keepNum(&bw.PullGB, old.Bandwidth.PullGB)
	if bw.Billed == nil {
		bw.Billed, bw.BilledAt = old.Bandwidth.Billed, old.Bandwidth.BilledAt
	}
	_, err = tx.ExecContext(ctx, `UPDATE instances SET intent_id = ?, fleet = ?, offer_id = ?, machine_id = ?, gpu_name = ?,
		num_gpus = ?, cpu_cores = ?, ram_mb = ?, dph_total = ?, storage_dph = ?, label = ?, state = ?, last_seen_at = ?,
		running_since = ?, ssh_host = ?, ssh_port = ?, ssh_url = ?, experiment = ?, est_hours = ?, est_cost = ?,
		inet_down_cost = ?, inet_up_cost = ?, inet_down_mbps = ?, pull_gb = ?, bandwidth_billed = ?, bandwidth_billed_at = ?
		WHERE id = ?`,
		intent, i.Fleet, i.OfferID, i.MachineID, i.GPUName, i.NumGPUs, i.CPUCores, i.RAMMB, i.DPHTotal, i.StorageDPH,
		i.Label, i.State, fmtTime(now), running, i.SSHHost, i.SSHPort, i.SSHURL, i.Experiment,
		nullFloat(i.EstHours), nullFloat(i.EstCost),
		bw.DownCost, bw.UpCost, bw.DownMbps, bw.PullGB, nullFloat(bw.Billed), fmtNullTime(bw.BilledAt), i.ID)
	if err != nil {
		return fmt.Errorf("instance %d: %w", i.ID, err)
	}
	if old.State != i.State {
		return addEvent(ctx, tx, i.ID, old.State, i.State, now)
	}
	return nil
}

// UpsertInstance records an instance that has no intent of ours (adopted
// from a listing, or imported), or refreshes an existing row.
func (s *Store) UpsertInstance(ctx context.Context, i Instance, now time.Time) error {
	if err := s.tx(ctx, func(tx *sql.Tx) error { return upsertInstance(ctx, tx, i, now) }); err != nil {
		return fmt.Errorf("store: upsert %w", err)
	}
	return nil
}

// RecordCreated marks intent intentID created and records its instance, in
// one transaction. Fleet, offer, machine and label default to the intent's.
// Replaying it with the same instance is harmless.
func (s *Store) RecordCreated(ctx context.Context, intentID int64, i Instance, now time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		in, err := resolveIntent(ctx, tx, intentID, i.ID, now)
		if err != nil {
			return err
		}
		i.IntentID = intentID
		if i.Fleet == "" {
			i.Fleet = in.Fleet
		}
		if i.OfferID == 0 {
			i.OfferID = in.OfferID
		}
		if i.MachineID == 0 {
			i.MachineID = in.MachineID
		}
		if i.Label == "" {
			i.Label = in.Label
		}
		return upsertInstance(ctx, tx, i, now)
	})
	if err != nil {
		return fmt.Errorf("store: record created: %w", err)
	}
	return nil
}

// watchedGap is the longest gap between two listings that counts as
// watching: the polls of launch and wait are well inside it.
const watchedGap = time.Minute

// ChangedAt dates a state change that a listing at now shows and the one at
// lastSeen did not. While the tool was watching, the middle of that window:
// dating it at now would bill every boot half a poll short on average, and
// at the midpoint the errors of a fleet cancel instead of adding up. After
// a longer gap the change is most often the tool's own stop or start just
// made, so now.
func ChangedAt(lastSeen, now time.Time) time.Time {
	gap := now.Sub(lastSeen)
	if lastSeen.IsZero() || gap <= 0 || gap > watchedGap {
		return now
	}
	return lastSeen.Add(gap / 2)
}

// WithinWindow is at kept within the window (last, now] in which a change
// happened: after the last listing that showed the old state (a zero last
// puts no floor), no later than now.
func WithinWindow(at, last, now time.Time) time.Time {
	if at.After(now) {
		return now
	}
	if !last.IsZero() && !at.After(last) {
		return last
	}
	return at
}

// UpdateSeen records what a listing showed: actual_status, ssh host and
// port. A state change appends an event; entering "running" sets
// RunningSince, leaving it clears it. An instance marked gone that shows up
// again is live again (a listing beats our belief), with an event from
// "gone".
func (s *Store) UpdateSeen(ctx context.Context, id int64, state, sshHost string, sshPort int, sshURL string, now time.Time) error {
	return s.UpdateSeenAfter(ctx, id, state, sshHost, sshPort, sshURL, time.Time{}, now)
}

// UpdateSeenAfter is UpdateSeen for a watcher that lists the fleet every
// poll and writes only changes: prev is its previous listing, which still
// showed the old state, so a change is dated within (prev, now].
func (s *Store) UpdateSeenAfter(ctx context.Context, id int64, state, sshHost string, sshPort int, sshURL string, prev, now time.Time) error {
	return s.updateSeen(ctx, id, state, sshHost, sshPort, sshURL, prev, time.Time{}, now)
}

// UpdateSeenAt is UpdateSeen for a change whose moment the caller knows
// better than the window between listings: what an instance's own agent
// did at a known time (its dead-man switch). The change is dated at, kept
// within the window: after the last listing that showed the old state,
// and no later than now.
func (s *Store) UpdateSeenAt(ctx context.Context, id int64, state, sshHost string, sshPort int, sshURL string, at, now time.Time) error {
	return s.updateSeen(ctx, id, state, sshHost, sshPort, sshURL, time.Time{}, at, now)
}

func (s *Store) updateSeen(ctx context.Context, id int64, state, sshHost string, sshPort int, sshURL string, prev, at, now time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		old, err := getInstance(ctx, tx, id)
		if err != nil {
			return err
		}
		from := old.State
		if !old.GoneAt.IsZero() {
			from = StateGone
		}
		changed := now
		if from != state && old.GoneAt.IsZero() {
			last := old.LastSeenAt
			if prev.After(last) {
				last = prev
			}
			changed = ChangedAt(last, now)
			if (state == "running" || old.Wanted == WantRunning) && !last.IsZero() && now.After(last) {
				// A change the tool did not just make itself, whatever the
				// gap: into running (a boot, a resume after an outbid, a
				// start through scheduling or loading), or away from what
				// it wants running (an outbid, a host's failure). The
				// middle of the window, whose errors cancel over a fleet;
				// ChangedAt's "now" after a long gap is for the tool's own
				// stops.
				changed = last.Add(now.Sub(last) / 2)
			}
			if !at.IsZero() {
				changed = WithinWindow(at, last, now)
			}
		}
		running := fmtNullTime(old.RunningSince)
		if state != "running" {
			running = nil
		} else if old.State != "running" || old.RunningSince.IsZero() || !old.GoneAt.IsZero() {
			running = fmtTime(changed)
		}
		// The address is derived by the caller (provider.SSHURL, its one
		// home); a row seen without one keeps the last known.
		url := old.SSHURL
		if sshURL != "" {
			url = sshURL
		}
		_, err = tx.ExecContext(ctx, `UPDATE instances SET state = ?, ssh_host = ?, ssh_port = ?, ssh_url = ?,
			last_seen_at = ?, running_since = ?, gone_at = NULL WHERE id = ?`,
			state, sshHost, sshPort, url, fmtTime(now), running, id)
		if err != nil {
			return err
		}
		if from != state {
			return addEvent(ctx, tx, id, from, state, changed)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: update seen: %w", err)
	}
	return nil
}

// RequestDestroy records that vastfleet wants the instance destroyed. The
// first request time is kept. The row stays live until MarkGone.
func (s *Store) RequestDestroy(ctx context.Context, id int64, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE instances SET wanted = ?,
		destroy_requested_at = COALESCE(destroy_requested_at, ?) WHERE id = ?`, WantDestroy, fmtTime(now), id)
	if err != nil {
		return fmt.Errorf("store: request destroy of instance %d: %w", id, err)
	}
	return mustAffect(res, fmt.Sprintf("instance %d", id))
}

// SetWanted sets what vastfleet wants the instance to be (running, parked,
// destroy); use RequestDestroy for destroy so its time is kept.
func (s *Store) SetWanted(ctx context.Context, id int64, wanted string) error {
	if wanted != WantRunning && wanted != WantParked && wanted != WantDestroy {
		return fmt.Errorf("store: instance %d: bad wanted state %q", id, wanted)
	}
	res, err := s.db.ExecContext(ctx, "UPDATE instances SET wanted = ? WHERE id = ?", wanted, id)
	if err != nil {
		return fmt.Errorf("store: instance %d: %w", id, err)
	}
	return mustAffect(res, fmt.Sprintf("instance %d", id))
}

// MarkGone records that a complete listing no longer shows the instance. It
// is the only way a row leaves the live set. Marking twice keeps the first
// time.
func (s *Store) MarkGone(ctx context.Context, id int64, now time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		old, err := getInstance(ctx, tx, id)
		if err != nil {
			return err
		}
		if !old.GoneAt.IsZero() {
			return nil
		}
		if _, err := tx.ExecContext(ctx, "UPDATE instances SET gone_at = ?, running_since = NULL WHERE id = ?", fmtTime(now), id); err != nil {
			return err
		}
		return addEvent(ctx, tx, id, old.State, StateGone, now)
	})
	if err != nil {
		return fmt.Errorf("store: mark gone: %w", err)
	}
	return nil
}

// BandwidthReport is one instance's bandwidth figures from a listing row.
type BandwidthReport struct {
	ID       int64
	DownCost float64 // $/GB
	UpCost   float64 // $/GB
	DownMbps float64
	Billed   float64 // $ charged so far
}

// Reported is b after a listing reported r while the instance was in
// state. The charge only rises (the marketplace's counters are
// cumulative). A loading instance whose counter stood still since the last
// report has finished its pull: PullGB becomes what it really pulled, so
// that nothing more is expected of it.
func (b Bandwidth) Reported(r BandwidthReport, state string, at time.Time) Bandwidth {
	nb := b
	billed := r.Billed
	if b.Billed != nil && *b.Billed > billed {
		billed = *b.Billed
	}
	if state == "loading" && b.Billed != nil && billed == *b.Billed && billed > 0 && r.DownCost > 0 {
		nb.PullGB = billed / r.DownCost
	}
	nb.Billed, nb.BilledAt = &billed, at
	nb.DownCost, nb.UpCost = r.DownCost, r.UpCost
	if r.DownMbps > 0 {
		nb.DownMbps = r.DownMbps
	}
	return nb
}

// RecordBandwidth stores what listing rows reported about bandwidth, in
// one transaction (a launch reports hundreds per poll). Rows for unknown
// instances are skipped; a report only raises the charge (the marketplace's
// counters are cumulative), and an unchanged one writes nothing.
func (s *Store) RecordBandwidth(ctx context.Context, reports []BandwidthReport, now time.Time) error {
	if len(reports) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		// One report per instance of a listing: the two statements are
		// prepared once for all of them, not parsed again per instance.
		sel, err := tx.PrepareContext(ctx, "SELECT "+instanceCols+" FROM instances WHERE id = ?")
		if err != nil {
			return err
		}
		defer sel.Close()
		upd, err := tx.PrepareContext(ctx, `UPDATE instances SET inet_down_cost = ?, inet_up_cost = ?, inet_down_mbps = ?,
				pull_gb = ?, bandwidth_billed = ?, bandwidth_billed_at = ? WHERE id = ?`)
		if err != nil {
			return err
		}
		defer upd.Close()
		for _, r := range reports {
			old, err := scanInstance(sel.QueryRowContext(ctx, r.ID))
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("instance %d: %w", r.ID, err)
			}
			ob := old.Bandwidth
			nb := ob.Reported(r, old.State, now)
			if ob.Billed != nil && *ob.Billed == *nb.Billed && ob.DownCost == nb.DownCost && ob.UpCost == nb.UpCost &&
				ob.DownMbps == nb.DownMbps && ob.PullGB == nb.PullGB && old.State != "loading" {
				continue // nothing new; while loading the report time itself matters
			}
			if _, err := upd.ExecContext(ctx, nb.DownCost, nb.UpCost, nb.DownMbps, nb.PullGB, *nb.Billed, fmtTime(nb.BilledAt), r.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: record bandwidth: %w", err)
	}
	return nil
}

// SetEstimate stores the expected hours and cost of an instance.
func (s *Store) SetEstimate(ctx context.Context, id int64, hours, cost float64) error {
	res, err := s.db.ExecContext(ctx, "UPDATE instances SET est_hours = ?, est_cost = ? WHERE id = ?", hours, cost, id)
	if err != nil {
		return fmt.Errorf("store: set estimate of instance %d: %w", id, err)
	}
	return mustAffect(res, fmt.Sprintf("instance %d", id))
}

// Instance returns one instance, gone or not, or ErrNotFound.
func (s *Store) Instance(ctx context.Context, id int64) (Instance, error) {
	i, err := getInstance(ctx, s.db, id)
	if err != nil {
		return Instance{}, fmt.Errorf("store: %w", err)
	}
	return i, nil
}

// LastListed is the newest time any instance, gone ones included, was
// seen in a listing: the moment the store's picture of the account is
// from (zero when it has none).
func (s *Store) LastListed(ctx context.Context) (time.Time, error) {
	recs, err := s.Instances(ctx, InstanceFilter{IncludeGone: true})
	if err != nil {
		return time.Time{}, err
	}
	var asOf time.Time
	for _, r := range recs {
		if r.LastSeenAt.After(asOf) {
			asOf = r.LastSeenAt
		}
	}
	return asOf, nil
}

// Instances returns the instances matching f, in id order.
func (s *Store) Instances(ctx context.Context, f InstanceFilter) ([]Instance, error) {
	where := "WHERE 1=1"
	var args []any
	if f.Fleet != "" {
		where += " AND fleet = ?"
		args = append(args, f.Fleet)
	}
	if !f.IncludeGone {
		where += " AND gone_at IS NULL"
	}
	out, err := queryAll(ctx, s.db, scanInstance, "SELECT "+instanceCols+" FROM instances "+where+" ORDER BY id", args...)
	if err != nil {
		return nil, fmt.Errorf("store: instances: %w", err)
	}
	return out, nil
}

// LiveInstances returns every instance not marked gone, of every fleet:
// the set that may be billing.
func (s *Store) LiveInstances(ctx context.Context) ([]Instance, error) {
	return s.Instances(ctx, InstanceFilter{})
}

// ChangeRates records that instance id bills dphTotal (storage included)
// and storageDPH from at on, keeping the old rates for the time before: a
// raised bid is not billed backwards. A storageDPH of 0 keeps the old one.
// Rates equal to the recorded ones change nothing.
func (s *Store) ChangeRates(ctx context.Context, id int64, dphTotal, storageDPH float64, at time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		old, err := getInstance(ctx, tx, id)
		if err != nil {
			return err
		}
		if storageDPH == 0 {
			storageDPH = old.StorageDPH
		}
		if old.DPHTotal == dphTotal && old.StorageDPH == storageDPH {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rate_changes(instance_id, at, from_dph_total, from_storage_dph,
			to_dph_total, to_storage_dph) VALUES (?, ?, ?, ?, ?, ?)`,
			id, fmtTime(at), old.DPHTotal, old.StorageDPH, dphTotal, storageDPH); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE instances SET dph_total = ?, storage_dph = ? WHERE id = ?", dphTotal, storageDPH, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: rates of instance %d: %w", id, err)
	}
	return nil
}

// RateChanges lists instance id's rate changes, oldest first.
func (s *Store) RateChanges(ctx context.Context, id int64) ([]RateChange, error) {
	out, err := queryAll(ctx, s.db, func(sc rowScanner) (RateChange, error) {
		rc := RateChange{InstanceID: id}
		var at string
		err := sc.Scan(&at, &rc.FromDPHTotal, &rc.FromStorageDPH, &rc.ToDPHTotal, &rc.ToStorageDPH)
		if err == nil {
			rc.At, err = parseTime(at)
		}
		return rc, err
	}, `SELECT at, from_dph_total, from_storage_dph, to_dph_total, to_storage_dph
		FROM rate_changes WHERE instance_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("store: rate changes of instance %d: %w", id, err)
	}
	return out, nil
}

// Events returns an instance's state changes in the order they were seen.
func (s *Store) Events(ctx context.Context, instanceID int64) ([]Event, error) {
	out, err := queryAll(ctx, s.db, func(sc rowScanner) (Event, error) {
		var e Event
		var at string
		err := sc.Scan(&e.InstanceID, &e.From, &e.To, &at)
		if err == nil {
			e.At, err = parseTime(at)
		}
		return e, err
	}, "SELECT instance_id, from_state, to_state, at FROM state_events WHERE instance_id = ? ORDER BY seq", instanceID)
	if err != nil {
		return nil, fmt.Errorf("store: events of instance %d: %w", instanceID, err)
	}
	return out, nil
}
