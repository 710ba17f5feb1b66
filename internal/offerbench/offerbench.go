// Package offerbench ranks offers by what the user's own benchmark
// measures on them: it rents one instance of each of the most promising
// machine types, runs the probe command on each over SSH, divides the
// measured rate by the instance's $/hr and ranks by that. A listing's
// cores can be a share of a shared machine, or a lie; a measurement of
// the user's workload is neither.
//
// Every instance is rented through the fleet manager (recorded before
// the create, labelled with its fleet) and destroyed before Run returns,
// on a failed probe, an error or Ctrl+C alike.
package offerbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

const (
	// DefaultTop and MaxTop bound how many machine types are probed:
	// each is an instance billed while it boots and runs the probe.
	DefaultTop = 5
	MaxTop     = 20
	// DefaultTimeout bounds one probe, connection included.
	DefaultTimeout = 2 * time.Minute
	// cleanupTimeout bounds the destroys at the end, which run even after
	// Ctrl+C: long enough for a slow marketplace to confirm them.
	cleanupTimeout = 10 * time.Minute
)

// Probe outcomes.
const (
	StatusOK         = "ok"
	StatusFailed     = "failed"      // exited non-zero, or printed no rate
	StatusTimeout    = "timeout"     // still running at the probe timeout
	StatusRentFailed = "rent failed" // the marketplace refused the create
	StatusBootFailed = "boot failed" // never ran, or had no SSH route
)

// Config is one probe run.
type Config struct {
	// Probe is the command run with sh on each instance. Its contract: the
	// first word of its last non-empty output line (stdout and stderr
	// together) is a number, units per second, positive and finite.
	Probe string
	// Top is how many machine types are probed (1..MaxTop).
	Top int
	// Timeout bounds each probe in wall time (0: DefaultTimeout).
	Timeout time.Duration
	// BootTimeout bounds each instance's wait for running (market time).
	BootTimeout time.Duration
	// Parallel is how many probes run at once (0: all). On a simulator
	// whose machines share one computer's cores, 1 keeps the probes from
	// measuring each other.
	Parallel int
	Fleet    string
	Create   provider.CreateRequest
	// Log takes progress notes; nil discards them.
	Log io.Writer
}

// Deps is what a run reaches the marketplace and the instances through.
type Deps struct {
	Manager *fleet.Manager
	Ops     *nodes.Ops
}

// Row is one probed machine type.
type Row struct {
	// Rank is the place by measured units per dollar (1 is best); 0 when
	// the probe did not pass.
	Rank       int     `json:"rank"`
	OfferID    int64   `json:"offer_id"`
	InstanceID int64   `json:"instance_id,omitempty"`
	MachineID  int64   `json:"machine_id"`
	Type       string  `json:"type"`
	Model      string  `json:"model"` // the GPUs, "no GPU" for none
	CPU        string  `json:"cpu"`
	VCPU       float64 `json:"vcpu"`
	DPH        float64 `json:"dph"`
	// UnitsPerS is what the probe printed; UnitsPerDollar is an hour's
	// units over the hour's price.
	UnitsPerS      float64 `json:"units_per_s,omitempty"`
	UnitsPerDollar float64 `json:"units_per_dollar,omitempty"`
	// ListingRank is the offer's place among the probed by the listing's
	// $/vCPU (1: the most advertised vCPUs per dollar).
	ListingRank int     `json:"listing_rank"`
	Status      string  `json:"status"`
	Error       string  `json:"error,omitempty"`
	DurationS   float64 `json:"duration_s,omitempty"`
}

// Passed reports whether the probe measured a rate.
func (r Row) Passed() bool { return r.Status == StatusOK }

// Result is a run's rows, best first (failed ones last), and the ranking
// to save.
type Result struct {
	Fleet string `json:"fleet"`
	Rows  []Row  `json:"rows"`
	// Ranking is the passed offers by measured units per dollar, each
	// offer's score that figure: the form `search --save` writes and
	// `search --from` and `launch --from` read.
	Ranking []market.Ranked `json:"-"`
	// ListingPick is the probed offer the listing's $/vCPU puts first, and
	// ListingPickShare its measured units per dollar over the best measured
	// (nil when its probe did not pass, or none did).
	ListingPick      int64    `json:"listing_pick"`
	ListingPickShare *float64 `json:"listing_pick_share,omitempty"`
	// Destroyed is every instance the run rented, destroyed at its end.
	Destroyed []int64 `json:"destroyed"`
}

// TypeKey is what makes two offers one machine type: the GPU model and
// the CPU model. Offers of one machine share it, so a machine is never
// probed twice.
func TypeKey(o *market.Offer) string {
	gpu := o.GPUName
	if gpu == "" || o.NumGPUs == 0 {
		gpu = "no GPU"
	}
	cpu := o.CPUName
	if cpu == "" {
		cpu = "unknown CPU"
	}
	return gpu + " / " + cpu
}

// Pick is the first offer of each of the top machine types, in the
// ranking's order.
func Pick(ranked []market.Ranked, top int) []market.Ranked {
	var out []market.Ranked
	for _, alts := range pickTypes(ranked, top, 1) {
		out = append(out, alts[0])
	}
	return out
}

// rentTries is how many offers of one type a run tries to rent: an offer
// another renter took between the search and the create is replaced by
// the type's next.
const rentTries = 3

// pickTypes is the first n offers of each of the top machine types.
func pickTypes(ranked []market.Ranked, top, n int) [][]market.Ranked {
	at := map[string]int{}
	var out [][]market.Ranked
	for _, r := range ranked {
		if r.DPHTotal <= 0 {
			continue
		}
		k := TypeKey(&r.Offer)
		i, ok := at[k]
		switch {
		case !ok && len(out) < top:
			at[k] = len(out)
			out = append(out, []market.Ranked{r})
		case ok && len(out[i]) < n:
			out[i] = append(out[i], r)
		}
	}
	return out
}

// Run probes the top machine types of cands (ranked best first) and ranks
// them by measured units per dollar. Whatever happens, every instance the
// fleet holds at the end is destroyed before Run returns; a destroy that
// fails is part of the error.
func Run(ctx context.Context, d Deps, cands []market.Ranked, cfg Config) (res Result, err error) {
	if strings.TrimSpace(cfg.Probe) == "" {
		return res, errors.New("no probe command")
	}
	if cfg.Top < 1 || cfg.Top > MaxTop {
		return res, fmt.Errorf("top %d: must be 1..%d", cfg.Top, MaxTop)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	types := pickTypes(cands, cfg.Top, rentTries)
	picks := make([]market.Ranked, len(types))
	for i, alts := range types {
		picks[i] = alts[0]
	}
	if len(picks) == 0 {
		return res, errors.New("no offers to probe: the query matched none with a price")
	}
	res.Fleet = cfg.Fleet
	rows := make([]Row, len(picks))
	for i, p := range picks {
		rows[i] = Row{OfferID: p.ID, MachineID: p.MachineID, Type: TypeKey(&p.Offer), Model: model(&p.Offer), CPU: p.CPUName,
			VCPU: p.CPUCoresEffective, DPH: p.DPHTotal}
	}
	defer func() {
		destroyed, derr := cleanup(ctx, d.Manager, cfg.Fleet, logw)
		res.Destroyed = destroyed
		if derr != nil {
			err = errors.Join(err, derr)
		}
	}()

	// Rent all first: the machines boot in parallel while Run waits on
	// each in turn.
	for i := range picks {
		for _, p := range types[i] {
			rec, err := d.Manager.Rent(ctx, fleet.RentRequest{Fleet: cfg.Fleet, Offer: p.Offer, Create: cfg.Create, Experiment: "bench offers"})
			if err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				rows[i].Status, rows[i].Error = StatusRentFailed, err.Error()
				continue
			}
			picks[i] = p
			rows[i] = Row{OfferID: p.ID, InstanceID: rec.ID, MachineID: p.MachineID, Type: rows[i].Type, Model: model(&p.Offer),
				CPU: p.CPUName, VCPU: p.CPUCoresEffective, DPH: p.DPHTotal}
			fmt.Fprintf(logw, "rented offer %d (%s) as instance %d\n", p.ID, rows[i].Type, rec.ID)
			break
		}
	}
	var ns []nodes.Node
	var at []int // rows[at[k]] is ns[k]
	for i := range rows {
		if rows[i].InstanceID == 0 {
			continue
		}
		n, err := node(ctx, d.Manager, cfg, rows[i].InstanceID)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			rows[i].Status, rows[i].Error = StatusBootFailed, err.Error()
			continue
		}
		// Names are unique: each node's output file is named after it.
		n.Name, n.Rank = fmt.Sprintf("%s-node-%d", cfg.Fleet, len(ns)), len(ns)
		ns = append(ns, n)
		at = append(at, i)
	}
	if len(ns) > 0 {
		errs, err := reach(ctx, d, ns)
		if err != nil {
			return res, err
		}
		var reached []nodes.Node
		var reachedAt []int
		for k, e := range errs {
			if e != "" {
				rows[at[k]].Status, rows[at[k]].Error = StatusBootFailed, "never accepted SSH: "+e
				continue
			}
			reached, reachedAt = append(reached, ns[k]), append(reachedAt, at[k])
		}
		ns, at = reached, reachedAt
	}
	if len(ns) > 0 {
		fmt.Fprintf(logw, "probing %d instances (%s each at most)\n", len(ns), cfg.Timeout)
		if err := probe(ctx, d.Ops, cfg, ns, at, rows); err != nil {
			return res, err
		}
	}
	res.Rows, res.Ranking, res.ListingPick, res.ListingPickShare = rank(rows, picks)
	return res, nil
}

// node waits for an instance to run and resolves its SSH route.
func node(ctx context.Context, m *fleet.Manager, cfg Config, id int64) (nodes.Node, error) {
	if _, err := m.WaitRunning(ctx, id, fleet.WaitOptions{Timeout: cfg.BootTimeout}); err != nil {
		return nodes.Node{}, err
	}
	ns, err := nodes.Select(ctx, m.S, m.P, nodes.Selection{IDs: []int64{id}})
	if err != nil {
		return nodes.Node{}, err
	}
	return ns[0], nil
}

// reachFor is how long a running instance may refuse the fleet key: vast's
// gateway refuses keys for a while after an instance runs ("try again
// after a few seconds"), and a probe must not fail for that.
const (
	reachFor   = 2 * time.Minute
	reachEvery = 5 * time.Second
)

// reach runs `true` on the nodes until each accepts SSH, or reachFor
// passes on the marketplace's clock (the simulator's refusals last in
// its time). It returns the last error of each node, "" once reached.
func reach(ctx context.Context, d Deps, ns []nodes.Node) ([]string, error) {
	errs := make([]string, len(ns))
	pending := make([]int, len(ns))
	for i := range pending {
		pending[i] = i
	}
	clock := d.Manager.Clock
	deadline := clock.Now().Add(reachFor)
	for {
		sub := make([]nodes.Node, len(pending))
		for k, i := range pending {
			sub[k] = ns[i]
		}
		rows, err := d.Ops.Exec(ctx, sub, nodes.ExecOptions{Command: "true", Parallel: len(sub), Timeout: 30 * time.Second, Quiet: true})
		if err != nil {
			return nil, err
		}
		var next []int
		for k, r := range rows {
			errs[pending[k]] = r.Error
			if r.Error != "" {
				next = append(next, pending[k])
			}
		}
		pending = next
		if len(pending) == 0 || !clock.Now().Before(deadline) {
			return errs, nil
		}
		if err := clock.Sleep(ctx, reachEvery); err != nil {
			return nil, err
		}
	}
}

// probe runs the command on the nodes and fills in their rows.
func probe(ctx context.Context, ops *nodes.Ops, cfg Config, ns []nodes.Node, at []int, rows []Row) error {
	dir, err := os.MkdirTemp("", "vastfleet-probe-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	par := cfg.Parallel
	if par <= 0 {
		par = len(ns)
	}
	out, err := ops.Exec(ctx, ns, nodes.ExecOptions{Command: cfg.Probe, Parallel: par, Timeout: cfg.Timeout, OutDir: dir})
	if err != nil {
		return err
	}
	for k, r := range out {
		row := &rows[at[k]]
		row.DurationS = r.DurationS
		b, _ := os.ReadFile(filepath.Join(dir, ns[k].Name+".log"))
		switch {
		case r.Error != "" && time.Duration(r.DurationS*float64(time.Second)) >= cfg.Timeout:
			row.Status, row.Error = StatusTimeout, fmt.Sprintf("no result within %s", cfg.Timeout)
		case r.Failed():
			row.Status, row.Error = StatusFailed, exitError(r, b)
		default:
			v, err := ParseRate(b)
			if err != nil {
				row.Status, row.Error = StatusFailed, err.Error()
				continue
			}
			row.Status, row.UnitsPerS, row.UnitsPerDollar = StatusOK, v, v*3600/row.DPH
		}
	}
	return nil
}

func exitError(r nodes.ExecRow, out []byte) string {
	msg := r.Error
	if msg == "" {
		msg = fmt.Sprintf("exit %d", r.ExitCode)
	}
	if last := lastLine(out); last != "" {
		msg += ": " + last
	}
	return msg
}

// ParseRate reads a probe's output by the contract: the first word of the
// last non-empty line is units per second, a positive finite number.
func ParseRate(out []byte) (float64, error) {
	last := lastLine(out)
	if last == "" {
		return 0, errors.New("printed nothing: the last line must be a number, units per second")
	}
	word := strings.Fields(last)[0]
	v, err := strconv.ParseFloat(word, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("last line %q: want a positive number of units per second first", trim(last))
	}
	return v, nil
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n\r\t "), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// rank orders the rows by measured units per dollar (the failed last, in
// the listing's order), gives each its place by the listing's $/vCPU,
// and builds the ranking of the passed.
func rank(rows []Row, picks []market.Ranked) ([]Row, []market.Ranked, int64, *float64) {
	offers := map[int64]market.Offer{}
	for _, p := range picks {
		offers[p.ID] = p.Offer
	}
	byListing := make([]int, len(rows))
	for i := range byListing {
		byListing[i] = i
	}
	slices.SortStableFunc(byListing, func(a, b int) int {
		return cmpDesc(vcpuPerDollar(rows[a]), vcpuPerDollar(rows[b]))
	})
	for place, i := range byListing {
		rows[i].ListingRank = place + 1
	}
	listingPick := rows[byListing[0]]
	slices.SortStableFunc(rows, func(a, b Row) int {
		if a.Passed() != b.Passed() {
			if a.Passed() {
				return -1
			}
			return 1
		}
		return cmpDesc(a.UnitsPerDollar, b.UnitsPerDollar)
	})
	var ranking []market.Ranked
	for i := range rows {
		if !rows[i].Passed() {
			continue
		}
		rows[i].Rank = i + 1
		ranking = append(ranking, market.Ranked{Offer: offers[rows[i].OfferID], Score: rows[i].UnitsPerDollar})
	}
	var share *float64
	if listingPick.Passed() && rows[0].Passed() {
		s := listingPick.UnitsPerDollar / rows[0].UnitsPerDollar
		share = &s
	}
	return rows, ranking, listingPick.OfferID, share
}

func vcpuPerDollar(r Row) float64 {
	if r.DPH <= 0 {
		return 0
	}
	return r.VCPU / r.DPH
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func model(o *market.Offer) string {
	if o.NumGPUs > 0 && o.GPUName != "" {
		return fmt.Sprintf("%d× %s", o.NumGPUs, o.GPUName)
	}
	return "no GPU"
}

// cleanup destroys every live instance of the fleet, those a create
// interrupted by Ctrl+C left unrecorded too (a reconcile adopts them by
// their label first). It runs on a context of its own: after Ctrl+C it
// is the one thing left to do.
func cleanup(ctx context.Context, m *fleet.Manager, fleetName string, logw io.Writer) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("reconcile before destroying: %w", err))
	}
	recs, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	var ids []int64
	for _, r := range recs {
		if r.GoneAt.IsZero() {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil, errors.Join(errs...)
	}
	fmt.Fprintf(logw, "destroying %d probe instances\n", len(ids))
	if err := m.Destroy(ctx, ids); err != nil {
		errs = append(errs, fmt.Errorf("destroying the probe instances %v (`vastfleet cleanup %s` retries): %w", ids, fleetName, err))
	}
	return ids, errors.Join(errs...)
}

// Rerank orders a launch's candidates by what the probes measured: each
// offer of a machine type whose probe passed scores that type's units
// per second × 3600 over the offer's own $/hr, best first; offers of
// types no probe reached follow in their listing order; offers of types
// whose probe failed are left out (their figure is unknown, or the
// user's benchmark does not run there). A type's figure is one
// machine's: another machine of the type may be short, which the boot
// probe's hardware check catches at launch.
func Rerank(cands []market.Ranked, res Result) []market.Ranked {
	passed, failed := map[string]float64{}, map[string]bool{}
	for _, r := range res.Rows {
		if r.Passed() {
			passed[r.Type] = r.UnitsPerS
		} else {
			failed[r.Type] = true
		}
	}
	var measured, rest []market.Ranked
	for _, c := range cands {
		k := TypeKey(&c.Offer)
		ups, ok := passed[k]
		switch {
		case ok && c.DPHTotal > 0:
			c.Score = ups * 3600 / c.DPHTotal
			measured = append(measured, c)
		case !failed[k] && !ok:
			rest = append(rest, c)
		}
	}
	slices.SortStableFunc(measured, func(a, b market.Ranked) int { return cmpDesc(a.Score, b.Score) })
	return append(measured, rest...)
}
