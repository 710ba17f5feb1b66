// Package fleet is the instance lifecycle that never leaks a billing
// instance: rent behind an intent row and an idempotency label, reconcile the
// store with complete listings only, destroy confirmed by a listing, wait for
// running, and cost from the recorded state timeline.
package fleet

import (
	"context"
	"fmt"
	"github.com/vastfleet/vastfleet/internal/clock"
	"log/slog"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// Defaults used when a Manager field is zero.
const (
	DefaultGrace     = 10 * time.Minute
	DefaultPollEvery = 10 * time.Second
	// SlowLoading is when WaitRunning tells the user that loading is slow.
	SlowLoading = 5 * time.Minute
)

// Manager drives instances through their lifecycle. One Manager per process;
// the CLI holds the data-dir lock while it runs.
type Manager struct {
	P provider.Provider
	S *store.Store
	// Clock is the one source of time, read and waited on: the
	// marketplace's (for the simulator, its clock, so that costs match
	// its ledger and waits pass in its time).
	Clock clock.Clock
	Log   *slog.Logger
	// Grace is how long a new instance's (or a pending intent's) absence from
	// a listing means nothing: marketplaces list new rentals late.
	Grace time.Duration
	// PollEvery spaces listing and show polls.
	PollEvery time.Duration
	// ListTries bounds how many listings one lookup or confirmation makes
	// (default 5).
	ListTries int
	// Nonce draws the random part of each rental's label (default
	// NewNonce); tests may pass a fixed sequence.
	Nonce func() string
	// SelfStops, when set, says when instances' own agents will have
	// stopped or destroyed them by their dead-man switches (see
	// ReconcileOptions.SelfStops); every Reconcile that is given none
	// reads it.
	SelfStops func(ctx context.Context) (map[int64]time.Time, error)

	// destroyed is when this process's destroys that the marketplace took
	// were sent, by instance (DestroySent).
	destroyedMu sync.Mutex
	destroyed   map[int64]time.Time
}

// DestroySent is when the first destroy of instance id that the
// marketplace took was sent by this manager, if one was: where its
// billing ended. A caller that sees the instance gone from a listing
// before Destroy has confirmed it (a launch's tick, while the destroy
// runs in the background) dates it there rather than at the listing.
func (m *Manager) DestroySent(id int64) (time.Time, bool) {
	m.destroyedMu.Lock()
	defer m.destroyedMu.Unlock()
	t, ok := m.destroyed[id]
	return t, ok
}

func (m *Manager) destroySent(id int64, at time.Time) {
	m.destroyedMu.Lock()
	defer m.destroyedMu.Unlock()
	if m.destroyed == nil {
		m.destroyed = map[int64]time.Time{}
	}
	if _, ok := m.destroyed[id]; !ok {
		m.destroyed[id] = at
	}
}

func (m *Manager) nonce() string {
	if m.Nonce != nil {
		return m.Nonce()
	}
	return NewNonce()
}

// young reports whether a record made at created may simply not be listed
// yet. One made "after" the marketplace's now is not young: the
// marketplace's clock is behind the record (a reset simulator, an imported
// file), and a complete listing without it is proof that it is gone, not
// a ghost to keep showing as running.
func (m *Manager) young(created, now time.Time) bool {
	age := now.Sub(created)
	return age >= 0 && age < m.grace()
}

func (m *Manager) grace() time.Duration {
	if m.Grace > 0 {
		return m.Grace
	}
	return DefaultGrace
}

func (m *Manager) pollEvery() time.Duration {
	if m.PollEvery > 0 {
		return m.PollEvery
	}
	return DefaultPollEvery
}

func (m *Manager) listTries() int {
	if m.ListTries > 0 {
		return m.ListTries
	}
	return 5
}

func (m *Manager) log() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (m *Manager) now() time.Time { return m.Clock.Now() }

func (m *Manager) sleep(ctx context.Context, d time.Duration) error { return m.Clock.Sleep(ctx, d) }

// completeListing returns one complete listing, retrying transient failures
// (an incomplete listing included) a bounded number of times with backoff.
// An auth failure is returned at once: it proves nothing about instances.
func (m *Manager) completeListing(ctx context.Context) (provider.Listing, error) {
	l, _, err := m.completeListingAt(ctx)
	return l, err
}

// completeListingAt is completeListing, and when the request that brought
// the listing went out. Its figures (bandwidth billed so far) are the
// market's as of about then: the answer can come seconds later on a
// loaded machine, and a figure dated at the answer leaves out what was
// pulled in between.
func (m *Manager) completeListingAt(ctx context.Context) (provider.Listing, time.Time, error) {
	var lastErr error
	wait := m.pollEvery()
	for try := 0; try < m.listTries(); try++ {
		if try > 0 {
			if err := m.sleep(ctx, wait); err != nil {
				return provider.Listing{}, time.Time{}, err
			}
			wait *= 2
		}
		asked := m.now()
		l, err := m.P.ListInstances(ctx)
		if err == nil {
			if l.Total != len(l.Instances) {
				// The provider promises this never happens; do not act on it.
				lastErr = fmt.Errorf("%w: %d rows for a total of %d", provider.ErrIncompleteListing, len(l.Instances), l.Total)
				continue
			}
			return l, asked, nil
		}
		lastErr = err
		if !provider.Classify(err).Transient {
			break
		}
	}
	return provider.Listing{}, time.Time{}, fmt.Errorf("no complete instance listing: %w", lastErr)
}

// byLabel indexes a listing's rows by label.
func byLabel(l provider.Listing) map[string]provider.Instance {
	out := make(map[string]provider.Instance, len(l.Instances))
	for _, in := range l.Instances {
		if lab := in.LabelText(); lab != "" {
			out[lab] = in
		}
	}
	return out
}

// batchKey names an instance of a bulk create: its label and machine.
type batchKey struct {
	label   string
	machine int64
}

// byBatch indexes a listing's labelled rows by label and machine.
func byBatch(l provider.Listing) map[batchKey]provider.Instance {
	out := make(map[batchKey]provider.Instance, len(l.Instances))
	for _, in := range l.Instances {
		if lab := in.LabelText(); lab != "" {
			out[batchKey{lab, in.MachineID}] = in
		}
	}
	return out
}

// IntentOf is the intent of this store that rented row, whose label parsed
// as label: the intent the label names, or, for an instance of a bulk
// create, the intent of that create on the row's machine. It fails with
// store.ErrNotFound when the label names no such intent of label's fleet.
func (m *Manager) IntentOf(ctx context.Context, row provider.Instance, label LabelParts) (store.Intent, error) {
	it, err := m.S.IntentForInstance(ctx, row.LabelText(), row.MachineID)
	if err != nil {
		return store.Intent{}, err
	}
	mine := it.ID == label.Intent || (it.BatchLabel != "" && it.BatchLabel == row.LabelText())
	if !mine || it.Fleet != label.Fleet {
		return store.Intent{}, fmt.Errorf("instance %d: label %q: %w", row.ID, row.LabelText(), store.ErrNotFound)
	}
	return it, nil
}

func byID(l provider.Listing) map[int64]provider.Instance {
	out := make(map[int64]provider.Instance, len(l.Instances))
	for _, in := range l.Instances {
		out[in.ID] = in
	}
	return out
}

// refreshRates takes the marketplace's own $/h figures for a rental when
// they differ from what the store holds (the store starts from the offer).
// A rate the store knew is changed from when the listing showed the
// change (a bid changed with the official CLI is not billed backwards); an
// unknown one (an adopted instance) is taken for the whole life.
func (m *Manager) refreshRates(ctx context.Context, row provider.Instance) error {
	if row.DPHTotal <= 0 {
		return nil
	}
	rec, err := m.S.Instance(ctx, row.ID)
	if err != nil {
		return err
	}
	if rec.DPHTotal == row.DPHTotal && (rec.StorageDPH == row.StorageTotalCost || row.StorageTotalCost == 0) {
		return nil
	}
	now := m.now()
	if rec.DPHTotal > 0 {
		return m.S.ChangeRates(ctx, row.ID, row.DPHTotal, row.StorageTotalCost, store.ChangedAt(rec.LastSeenAt, now))
	}
	rec.DPHTotal, rec.StorageDPH = row.DPHTotal, row.StorageTotalCost
	return m.S.UpsertInstance(ctx, rec, now)
}

// sshHost and sshPort are the instance's SSH address, derived as the vastai
// CLI does (direct port when mapped, else the proxy; see provider.SSHAddr).
func sshHost(row provider.Instance) string {
	h, _, ok := provider.SSHAddr(row)
	if !ok {
		return ""
	}
	return h
}

func sshPort(row provider.Instance) int {
	_, p, ok := provider.SSHAddr(row)
	if !ok {
		return 0
	}
	return p
}

// BandwidthReports are the bandwidth figures of the listing rows that
// carry them (a marketplace that does not report bandwidth gives none, and
// cost keeps the estimate).
func BandwidthReports(rows ...provider.Instance) []store.BandwidthReport {
	var out []store.BandwidthReport
	for _, row := range rows {
		if !provider.BandwidthReported(row) {
			continue
		}
		out = append(out, store.BandwidthReport{ID: row.ID, DownCost: row.InetDownCost, UpCost: row.InetUpCost,
			DownMbps: row.InetDown, Billed: provider.BandwidthCharged(row)})
	}
	return out
}

// recordBandwidth stores the rows' bandwidth figures; call it after the
// rows' states are recorded (a loading instance's report time matters).
func (m *Manager) recordBandwidth(ctx context.Context, now time.Time, rows ...provider.Instance) error {
	return m.S.RecordBandwidth(ctx, BandwidthReports(rows...), now)
}
