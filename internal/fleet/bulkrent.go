package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

// BulkRentRequest rents several offers with one create body in one call.
type BulkRentRequest struct {
	Fleet string
	// Offers are on distinct machines, at most provider.BulkChunk of them:
	// an instance of the batch is told from the others by its machine.
	Offers []market.Offer
	// Create is the body every offer is rented with; RentMany sets its
	// Label.
	Create  provider.CreateRequest
	ImageGB float64
}

// BulkRent is what became of one offer of a bulk rent: its instance, or
// Err. An Err wrapping ErrRentFailed rented nothing; any other leaves the
// intent pending for reconcile.
type BulkRent struct {
	Offer    market.Offer
	Instance store.Instance
	Err      error
}

// ErrNoBulkCreate: the marketplace client has no bulk create.
var ErrNoBulkCreate = errors.New("the marketplace has no bulk create")

// RentMany rents req.Offers with one bulk create, never renting an offer
// twice. It writes an intent per offer first, all under one batch label,
// creates, and then finds the instances by listing that label: vast does
// not document what a bulk create answers per offer. An offer absent from
// the listing (two listings when the call's outcome is unknown) was not
// rented. It returns one outcome per offer, in order; err is set only when
// nothing was sent.
func (m *Manager) RentMany(ctx context.Context, req BulkRentRequest) ([]BulkRent, error) {
	bc, ok := m.P.(provider.BulkCreator)
	if !ok {
		return nil, ErrNoBulkCreate
	}
	if err := ValidateFleetName(req.Fleet); err != nil {
		return nil, err
	}
	if len(req.Offers) == 0 || len(req.Offers) > provider.BulkChunk {
		return nil, fmt.Errorf("rent many: %d offers; one bulk create takes 1 to %d", len(req.Offers), provider.BulkChunk)
	}
	if err := m.ensureFleet(ctx, req.Fleet); err != nil {
		return nil, err
	}
	body, err := json.Marshal(redacted(req.Create))
	if err != nil {
		return nil, err
	}
	storeID, err := m.S.ID(ctx)
	if err != nil {
		return nil, fmt.Errorf("rent many: %w", err)
	}
	nonce, batchNonce := m.nonce(), m.nonce()
	for batchNonce == nonce {
		batchNonce = m.nonce()
	}
	offers := make([]store.IntentOffer, len(req.Offers))
	ids := make([]int64, len(req.Offers))
	for i, o := range req.Offers {
		offers[i], ids[i] = store.IntentOffer{OfferID: o.ID, MachineID: o.MachineID}, o.ID
	}
	intents, err := m.S.NewIntentBatch(ctx, req.Fleet, offers, body, m.now(),
		func(id int64) string { return Label(storeID, req.Fleet, id, nonce) },
		func(first int64) string { return Label(storeID, req.Fleet, first, batchNonce) })
	if err != nil {
		return nil, fmt.Errorf("rent many: write intents: %w", err)
	}
	batch := intents[0].BatchLabel
	create := req.Create
	create.Label = batch
	log := m.log().With("offers", len(ids), "label", batch)

	createErr := bc.CreateInstances(ctx, ids, create)
	// From here on outcomes are recorded even if the command is being
	// cancelled: an unrecorded rental bills until a reconcile finds it.
	ctx = context.WithoutCancel(ctx)
	out := make([]BulkRent, len(req.Offers))
	for i, o := range req.Offers {
		out[i].Offer = o
	}
	if createErr != nil && provider.Classify(createErr).Refused {
		for i, it := range intents {
			if err := m.S.FailIntent(ctx, it.ID, createErr.Error(), m.now()); err != nil {
				log.Warn("could not mark intent failed", "intent", it.ID, "err", err)
			}
			out[i].Err = fmt.Errorf("%w: offer %d: %w", ErrRentFailed, it.OfferID, createErr)
		}
		return out, nil
	}
	looks := 1
	if createErr != nil {
		log.Warn("bulk create outcome unknown, looking the label up", "err", createErr)
		looks = 2
	}
	settled := make([]bool, len(intents))
	for look := 0; look < looks; look++ {
		if look > 0 {
			if err := m.sleep(ctx, lateCheckDelay); err != nil {
				break
			}
		}
		l, err := m.completeListing(ctx)
		if err != nil {
			for i, it := range intents {
				if !settled[i] {
					out[i].Err = fmt.Errorf("rent offer %d: %w: could not list label %s (%v): intent %d stays pending, and `reconcile` will adopt or abandon it",
						it.OfferID, provider.ErrMaybeCreated, batch, err, it.ID)
				}
			}
			return out, nil
		}
		rows := byBatch(l)
		for i, it := range intents {
			row, ok := rows[batchKey{batch, it.MachineID}]
			if settled[i] || !ok {
				continue
			}
			settled[i] = true
			m.warnClamped(row, m.now())
			rec := recordFromOffer(RentRequest{Fleet: req.Fleet, Offer: req.Offers[i], Create: req.Create, ImageGB: req.ImageGB}, it, row.ID, m.now())
			if err := m.S.RecordCreated(ctx, it.ID, rec, m.now()); err != nil {
				out[i].Err = fmt.Errorf("rent offer %d: instance %d created but not recorded (reconcile will adopt it by label %s): %w", it.OfferID, row.ID, batch, err)
				continue
			}
			m.seen(ctx, row)
			out[i].Instance, out[i].Err = m.S.Instance(ctx, row.ID)
		}
	}
	rented := 0
	for i, it := range intents {
		if settled[i] {
			rented++
			continue
		}
		msg := fmt.Sprintf("not rented by the bulk create of label %s (the offer was taken or gone)", batch)
		if createErr != nil {
			msg = fmt.Sprintf("bulk create outcome unknown (%v); not listed under label %s", createErr, batch)
		}
		if err := m.S.FailIntent(ctx, it.ID, msg, m.now()); err != nil {
			log.Warn("could not mark intent failed", "intent", it.ID, "err", err)
		}
		out[i].Err = fmt.Errorf("%w: offer %d: %s", ErrRentFailed, it.OfferID, msg)
	}
	log.Info("bulk rented", "rented", rented)
	return out, nil
}
