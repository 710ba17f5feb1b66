package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// RentRequest is one rental.
type RentRequest struct {
	Fleet string
	// Offer is the offer to rent, as a search returned it: its id, machine,
	// GPUs and prices go into the store.
	Offer market.Offer
	// OfferID rents by id alone when Offer is zero; the instance's details
	// then come from the marketplace after the create.
	OfferID int64
	// Create is the create body; Rent sets its Label.
	Create     provider.CreateRequest
	Experiment string
	// EstHours and EstCost are the plan's estimate, kept for `cost`.
	EstHours *float64
	EstCost  *float64
	// ImageGB is the image's estimated size: what the pull is expected to
	// download, billed at the offer's inet_down_cost. 0: unknown.
	ImageGB float64
}

// ErrRentFailed wraps a create the marketplace refused: nothing was rented.
var ErrRentFailed = errors.New("rent failed")

// lateCheckDelay is how long Rent waits before its second look for a label
// after a lost create response: a rental the server accepted may show up in
// listings a little late.
const lateCheckDelay = 30 * time.Second

// Rent rents one offer without ever renting it twice: it writes an intent
// row first, creates the instance with the intent's label, and records the
// instance id. When the create's outcome is unknown it looks for the label
// instead of creating again. It never calls create more than once.
func (m *Manager) Rent(ctx context.Context, req RentRequest) (store.Instance, error) {
	if err := ValidateFleetName(req.Fleet); err != nil {
		return store.Instance{}, err
	}
	if req.Offer.ID == 0 {
		req.Offer.ID = req.OfferID
	}
	if req.Offer.ID <= 0 {
		return store.Instance{}, fmt.Errorf("rent: no offer id")
	}
	if err := m.ensureFleet(ctx, req.Fleet); err != nil {
		return store.Instance{}, err
	}
	body, err := json.Marshal(redacted(req.Create))
	if err != nil {
		return store.Instance{}, err
	}
	storeID, err := m.S.ID(ctx)
	if err != nil {
		return store.Instance{}, fmt.Errorf("rent offer %d: %w", req.Offer.ID, err)
	}
	nonce := m.nonce()
	intent, err := m.S.NewIntent(ctx, req.Fleet, req.Offer.ID, req.Offer.MachineID, body, m.now(),
		func(id int64) string { return Label(storeID, req.Fleet, id, nonce) })
	if err != nil {
		return store.Instance{}, fmt.Errorf("rent offer %d: write intent: %w", req.Offer.ID, err)
	}
	create := req.Create
	create.Label = intent.Label
	log := m.log().With("offer", req.Offer.ID, "intent", intent.ID, "label", intent.Label)

	created, err := m.P.CreateInstance(ctx, req.Offer.ID, create)
	// From here on the outcome is recorded even if the command is being
	// cancelled: an unrecorded rental bills until a reconcile finds it.
	ctx = context.WithoutCancel(ctx)
	if err == nil && created.NewContract > 0 {
		rec := recordFromOffer(req, intent, created.NewContract, m.now())
		if err := m.S.RecordCreated(ctx, intent.ID, rec, m.now()); err != nil {
			// The instance exists and carries the label: reconcile adopts it.
			return store.Instance{}, fmt.Errorf("rent offer %d: instance %d created but not recorded (reconcile will adopt it by label %s): %w",
				req.Offer.ID, created.NewContract, intent.Label, err)
		}
		log.Info("rented", "instance", created.NewContract)
		if req.Offer.MachineID == 0 {
			m.fillFromShow(ctx, created.NewContract)
		}
		return m.S.Instance(ctx, created.NewContract)
	}
	if err == nil {
		err = fmt.Errorf("%w: create answered without an instance id", provider.ErrMaybeCreated)
	}
	if provider.Classify(err).Refused { // nothing was rented
		if ferr := m.S.FailIntent(ctx, intent.ID, err.Error(), m.now()); ferr != nil {
			log.Warn("could not mark intent failed", "err", ferr)
		}
		return store.Instance{}, fmt.Errorf("%w: offer %d: %w", ErrRentFailed, req.Offer.ID, err)
	}
	log.Warn("create outcome unknown, looking the label up", "err", err)
	// The lookup outlives a cancelled command too, within a bound.
	lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return m.resolveLost(lctx, req, intent, err)
}

// resolveLost settles an intent whose create outcome is unknown, by label,
// from complete listings only. Absent from one complete listing, it looks
// once more after lateCheckDelay; absent from both, the intent is marked
// failed (a later reconcile still adopts the instance if it ever appears,
// since the label names this store's intent). A failed listing settles
// nothing: the intent stays pending for reconcile.
func (m *Manager) resolveLost(ctx context.Context, req RentRequest, intent store.Intent, createErr error) (store.Instance, error) {
	for look := 0; look < 2; look++ {
		if look > 0 {
			if err := m.sleep(ctx, lateCheckDelay); err != nil {
				return store.Instance{}, m.unresolved(req, intent, createErr, err)
			}
		}
		l, err := m.completeListing(ctx)
		if err != nil {
			return store.Instance{}, m.unresolved(req, intent, createErr, err)
		}
		if row, ok := byLabel(l)[intent.Label]; ok {
			m.warnClamped(row, m.now())
			rec := recordFromRow(row, intent, req.Fleet, m.now())
			rec.Experiment, rec.EstHours, rec.EstCost = req.Experiment, req.EstHours, req.EstCost
			if err := m.S.RecordCreated(ctx, intent.ID, rec, m.now()); err != nil {
				return store.Instance{}, fmt.Errorf("rent offer %d: instance %d found by label but not recorded: %w", req.Offer.ID, row.ID, err)
			}
			m.seen(ctx, row)
			m.log().Info("create response was lost; instance found by label", "instance", row.ID, "label", intent.Label)
			return m.S.Instance(ctx, row.ID)
		}
	}
	msg := fmt.Sprintf("create outcome unknown (%v); label %s absent from two complete listings", createErr, intent.Label)
	if err := m.S.FailIntent(ctx, intent.ID, msg, m.now()); err != nil {
		m.log().Warn("could not mark intent failed", "intent", intent.ID, "err", err)
	}
	return store.Instance{}, fmt.Errorf("%w: offer %d: %s", ErrRentFailed, req.Offer.ID, msg)
}

func (m *Manager) unresolved(req RentRequest, intent store.Intent, createErr, lookErr error) error {
	return fmt.Errorf("rent offer %d: %w: %v; could not look label %s up (%v): intent %d stays pending, and `reconcile` will adopt or abandon it",
		req.Offer.ID, provider.ErrMaybeCreated, createErr, intent.Label, lookErr, intent.ID)
}

// redacted drops env values and the onstart script from the request kept
// in the store: they may hold tokens. Env keys stay, to show what was set.
func redacted(c provider.CreateRequest) provider.CreateRequest {
	if len(c.Env) > 0 {
		env := make(map[string]string, len(c.Env))
		for k := range c.Env {
			env[k] = "<redacted>"
		}
		c.Env = env
	}
	if c.Onstart != "" {
		c.Onstart = "<redacted>"
	}
	return c
}

func recordFromOffer(req RentRequest, intent store.Intent, id int64, now time.Time) store.Instance {
	o := req.Offer
	// The rental's rates follow the create, not the search: storage for the
	// disk asked for, compute at the bid when there is one. WaitRunning and
	// Reconcile later take the marketplace's own figures.
	storage := o.StorageTotalCost
	if req.Create.Disk > 0 && o.StorageCost > 0 {
		storage = provider.StorageRate(o.StorageCost, req.Create.Disk)
	}
	compute := o.DPHBase
	if req.Create.Price != nil {
		compute = *req.Create.Price
	}
	return store.Instance{
		ID:         id,
		IntentID:   intent.ID,
		Fleet:      req.Fleet,
		OfferID:    o.ID,
		MachineID:  o.MachineID,
		GPUName:    o.GPUName,
		NumGPUs:    o.NumGPUs,
		CPUCores:   float64(o.CPUCores),
		RAMMB:      o.CPURAM,
		DPHTotal:   compute + storage,
		StorageDPH: storage,
		Label:      intent.InstanceLabel(),
		Wanted:     store.WantRunning,
		CreatedAt:  now,
		Experiment: req.Experiment,
		EstHours:   req.EstHours,
		EstCost:    req.EstCost,
		Bandwidth: store.Bandwidth{DownCost: o.InetDownCost, UpCost: o.InetUpCost, DownMbps: o.InetDown,
			PullGB: max(req.ImageGB, 0)},
	}
}

// recordFromRow builds a store record from a listing row (adoption).
func recordFromRow(row provider.Instance, intent store.Intent, fleet string, now time.Time) store.Instance {
	created, _ := startTime(row, now)
	return store.Instance{
		ID:         row.ID,
		IntentID:   intent.ID,
		Fleet:      fleet,
		OfferID:    intent.OfferID,
		MachineID:  row.MachineID,
		GPUName:    row.GPUName,
		NumGPUs:    row.NumGPUs,
		CPUCores:   float64(row.CPUCores),
		RAMMB:      row.CPURAM,
		DPHTotal:   row.DPHTotal,
		StorageDPH: row.StorageTotalCost,
		Label:      intent.InstanceLabel(),
		State:      row.Status(),
		Wanted:     store.WantRunning,
		CreatedAt:  created,
		SSHHost:    sshHost(row),
		SSHPort:    sshPort(row),
		Bandwidth:  store.Bandwidth{DownCost: row.InetDownCost, UpCost: row.InetUpCost, DownMbps: row.InetDown},
	}
}

// startTime is a listing row's creation time. A marketplace clock far off
// (or a bogus start_date) must not give negative uptime or a cost from
// year 1: such a time is clamped to now, and clamped says so.
func startTime(row provider.Instance, now time.Time) (created time.Time, clamped error) {
	if row.StartDate <= 0 {
		return now, nil
	}
	created = time.Unix(0, int64(row.StartDate*1e9)).UTC()
	if err := store.CheckCreatedAt(created, now); err != nil {
		return now, err
	}
	return created, nil
}

// warnClamped logs a listing row whose start_date was clamped.
func (m *Manager) warnClamped(row provider.Instance, now time.Time) {
	if _, err := startTime(row, now); err != nil {
		m.log().Warn("the marketplace's start_date cannot be right; using now", "instance", row.ID, "start_date", err)
	}
}

// ensureFleet creates the fleet row an intent refers to, if missing.
func (m *Manager) ensureFleet(ctx context.Context, name string) error {
	// Only whether it exists: every rent asks, and reading the row would
	// decode the spec, candidate list and all, once per instance.
	ok, err := m.S.FleetExists(ctx, name)
	if err != nil || ok {
		return err
	}
	if err := m.S.CreateFleet(ctx, store.Fleet{Name: name, CreatedAt: m.now()}); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// fillFromShow completes a record made without offer details from the
// marketplace's view of the instance; best effort (reconcile and
// WaitRunning refresh states, and rates, later).
func (m *Manager) fillFromShow(ctx context.Context, id int64) {
	row, err := m.P.ShowInstance(ctx, id)
	if err != nil {
		m.log().Warn("could not show new instance", "instance", id, "err", err)
		return
	}
	rec, err := m.S.Instance(ctx, id)
	if err != nil {
		return
	}
	rec.MachineID, rec.GPUName, rec.NumGPUs = row.MachineID, row.GPUName, row.NumGPUs
	rec.CPUCores, rec.RAMMB = float64(row.CPUCores), row.CPURAM
	if row.DPHTotal > 0 {
		rec.DPHTotal, rec.StorageDPH = row.DPHTotal, row.StorageTotalCost
	}
	if err := m.S.UpsertInstance(ctx, rec, m.now()); err != nil {
		m.log().Warn("could not record instance details", "instance", id, "err", err)
	}
}

// seen records a listing row's state and ssh address (best effort: the
// next reconcile records it again).
func (m *Manager) seen(ctx context.Context, row provider.Instance) {
	if err := m.S.UpdateSeen(ctx, row.ID, row.Status(), sshHost(row), sshPort(row), provider.SSHURL(row), m.now()); err != nil {
		m.log().Warn("could not record instance state", "instance", row.ID, "err", err)
	} else if err := m.recordBandwidth(ctx, m.now(), row); err != nil {
		m.log().Warn("could not record instance bandwidth", "instance", row.ID, "err", err)
	}
}
