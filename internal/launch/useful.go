package launch

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/store"
)

// UsefulScorer is the `--by useful` ranking for a launch of spec: its
// image (the pull and the load time), its deadline (what "ready in time"
// means and how long a failed host is paid for) and what this data dir's
// store knows of each machine (the bad-host list, expired entries as the
// host's record). st may be nil (no store yet: no records).
func UsefulScorer(ctx context.Context, st *store.Store, spec Spec, now time.Time) (*market.Useful, error) {
	spec = spec.WithDefaults()
	deadline := spec.BootTimeout
	if spec.Deadline > 0 {
		deadline = min(deadline, spec.Deadline)
	}
	u := &market.Useful{
		ImageGB:  spec.ImageGB,
		Load:     func(o *market.Offer) time.Duration { return plan.LoadTime(spec.ImageGB, o) },
		Deadline: deadline,
	}
	if st == nil {
		return u, nil
	}
	// Every entry ever made: one still in force bans the machine, an
	// expired one is a failure on its record.
	hs, err := st.BadHosts(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	if len(hs) == 0 {
		return u, nil
	}
	rec := make(map[int64]market.HostRecord, len(hs))
	for _, h := range hs {
		rec[h.MachineID] = market.HostRecord{Bad: h.Until.After(now), Failures: 1}
	}
	u.Record = func(id int64) market.HostRecord { return rec[id] }
	return u, nil
}
