// Package launchbench compares launch strategies on one simulated market:
// start all and wait, the manual park-and-release recipe, and vastfleet's
// park + backfill + quorum. `vastfleet bench launch` prints its table.
package launchbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/launch/launchsim"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/sim"
)

// Config is one benchmark: the same market and failure profile for
// every strategy.
type Config struct {
	Seed     int64
	Count    int
	Deadline time.Duration
	// Faults default to launchsim.Faults().
	Faults *sim.Faults
	// Profile is the name Faults go by in the table.
	Profile string
	// Offers is the market size (default sim.DefaultOffers, as the CLI's).
	Offers int
	// Dir holds the stores (default: a temporary directory, removed).
	Dir string
}

// Row is one strategy's result.
type Row struct {
	// Profile names the fault profile the row ran under ("" when the
	// caller passed its own faults without a name).
	Profile         string  `json:"profile,omitempty"`
	Strategy        string  `json:"strategy"`
	Asked           int     `json:"asked"`
	ReadyAtDeadline int     `json:"ready_at_deadline"` // running when the strategy's launch ended
	ShareReady      float64 `json:"share_ready"`
	// BootSpend is what waiting for the fleet cost: the simulator ledger's
	// time-billed charges (compute + storage) from the first rent to the
	// end of the launch (the fleet complete, or the strategy giving up);
	// stragglers cleaned up after that bill storage only and are left out.
	BootSpend float64 `json:"boot_spend"`
	// Compute and Storage make up BootSpend. Bandwidth is the image pulls
	// (billed per byte as they arrive, so every rental pays for what it
	// downloaded, replacements and hedged spares included); Total adds it.
	Compute   float64 `json:"compute"`
	Storage   float64 `json:"storage"`
	Bandwidth float64 `json:"bandwidth"`
	Total     float64 `json:"total"`
	// TotalPerReady is Total over the instances ready at the end: what one
	// usable instance cost to get, the fair comparison between strategies
	// that end with fleets of different sizes (0 when none is ready).
	TotalPerReady float64 `json:"total_per_ready"`
	APICalls      int64   `json:"api_calls"`
	SimMinutes    float64 `json:"sim_minutes"` // marketplace time from the first call to the end
	Rented        int     `json:"rented"`
}

// Run runs the three strategies on fresh copies of one simulated market
// (same seed, same faults, same ranked candidates), each over the real
// client and a loopback HTTP server with a virtual clock.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	if cfg.Count <= 0 {
		cfg.Count = 300
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 10 * time.Minute
	}
	if cfg.Offers <= 0 {
		cfg.Offers = sim.DefaultOffers
	}
	faults := launchsim.Faults()
	if cfg.Faults == nil && cfg.Profile == "" {
		cfg.Profile = BenchProfile
	}
	if cfg.Faults != nil {
		faults = *cfg.Faults
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "vastfleet-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var rows []Row
	for i, strat := range []string{launch.StrategyStartAllWait, launch.StrategyManualPark, launch.StrategyVastfleet} {
		sub := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return nil, err
		}
		row, err := benchOne(ctx, cfg, faults, strat, sub)
		if err != nil {
			return rows, fmt.Errorf("bench %s: %w", strat, err)
		}
		row.Profile = cfg.Profile
		rows = append(rows, row)
	}
	return rows, nil
}

// BenchProfile names launchsim.Faults(), the benchmark's own profile.
const BenchProfile = "bench"

// RunProfiles runs the three strategies under each named simulator fault
// profile ("realistic", "harsh"...), one after the other, so one table shows
// how each strategy holds up as the market gets worse.
func RunProfiles(ctx context.Context, cfg Config, profiles []string) ([]Row, error) {
	var rows []Row
	for _, name := range profiles {
		faults := launchsim.Faults()
		if name != BenchProfile {
			f, err := sim.Profile(name)
			if err != nil {
				return rows, fmt.Errorf("%w, or %s (the launch issue's: 30%% slow, 10%% never boot)", err, BenchProfile)
			}
			faults = f
		}
		c := cfg
		c.Faults, c.Profile = &faults, name
		if cfg.Dir != "" {
			c.Dir = filepath.Join(cfg.Dir, name) // each profile's stores apart
		}
		r, err := Run(ctx, c)
		rows = append(rows, r...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

func benchOne(ctx context.Context, cfg Config, faults sim.Faults, strat, dir string) (Row, error) {
	e, err := launchsim.New(ctx, cfg.Seed, cfg.Offers, faults, dir)
	if err != nil {
		return Row{}, err
	}
	defer e.Close()
	spec := launch.BenchSpec(strat, cfg.Count, cfg.Deadline)
	start := e.Clock.Now()
	// The candidates are found as the CLI finds them with no query: the
	// default filter, swept over the real client, ranked by vCPU per $/hr.
	q, err := launch.DefaultQuery(spec.Create.Disk)
	if err != nil {
		return Row{}, err
	}
	by, err := market.ScoreBy(launch.DefaultBy)
	if err != nil {
		return Row{}, err
	}
	cands, _, err := launch.Candidates(ctx, e.M.P, q, by)
	if err != nil {
		return Row{}, err
	}
	calls := e.Calls()
	sum, err := launch.Run(ctx, e.M, spec, cands, nil)
	if err != nil {
		return Row{}, err
	}
	row := Row{Strategy: strat, Asked: cfg.Count, ReadyAtDeadline: sum.Ready, APICalls: e.Calls() - calls,
		SimMinutes: sum.EndedAt.Sub(start).Minutes(), Rented: sum.Rented}
	for _, le := range e.Mkt.Ledger() {
		amt := clip(le, sum.EndedAt)
		switch le.Kind {
		case "compute":
			row.Compute += amt
		case "storage":
			row.Storage += amt
		default:
			row.Bandwidth += amt
		}
	}
	row.BootSpend = row.Compute + row.Storage
	row.Total = row.BootSpend + row.Bandwidth
	if row.ReadyAtDeadline > 0 {
		row.TotalPerReady = row.Total / float64(row.ReadyAtDeadline)
	}
	row.ShareReady = float64(row.ReadyAtDeadline) / float64(row.Asked)
	return row, nil
}

// clip is the part of a ledger entry billed up to end (entries are
// uniform over their span; a one-off charge counts when it is not later).
func clip(le sim.LedgerEntry, end time.Time) float64 {
	if !le.To.After(le.From) {
		if le.From.After(end) {
			return 0
		}
		return le.Amount
	}
	if !le.To.After(end) {
		return le.Amount
	}
	if !end.After(le.From) {
		return 0
	}
	return le.Amount * float64(end.Sub(le.From)) / float64(le.To.Sub(le.From))
}

// Table renders rows as an aligned table.
func Table(rows []Row) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "profile\tstrategy\tasked\tready\tshare ready\tboot-phase spend\tcompute\tstorage\timage pulls\ttotal\ttotal per ready\tAPI calls\tsim minutes\trented\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%.1f%%\t$%.2f\t$%.2f\t$%.2f\t$%.2f\t$%.2f\t$%.4f\t%d\t%.1f\t%d\t\n", r.Profile, r.Strategy, r.Asked, r.ReadyAtDeadline,
			100*r.ShareReady, r.BootSpend, r.Compute, r.Storage, r.Bandwidth, r.Total, r.TotalPerReady, r.APICalls, r.SimMinutes, r.Rented)
	}
	w.Flush()
	return b.String()
}
