package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/store"
)

func instanceCommands(f *factory) []*cobra.Command {
	return []*cobra.Command{
		newRentCmd(f, nil), newLsCmd(f, nil),
		newStateCmd(f, "stop", "Stop instances (storage keeps billing; only destroy ends all charges)", nil),
		newStateCmd(f, "start", "Start stopped instances again", nil),
		newDestroyCmd(f, nil), newReconcileCmd(f, nil), newCostCmd(f, nil), newExportCmd(f, nil), newImportCmd(f, nil),
		newLaunchCmd(f, nil), newCleanupCmd(f, nil), newHostsCmd(f, nil), newLogsCmd(f, nil), newSSHURLCmd(f, nil), newSCPURLCmd(f, nil), newBalanceCmd(f, nil),
		newSSHCmd(f, nil), newExecCmd(f, nil), newSyncCmd(f, nil), newSetupCmd(f, nil), newCollectCmd(f, nil), newReapCmd(f, nil),
		newUpCmd(f, nil), newStatusCmd(f, nil), newDownCmd(f, nil), newDemoCmd(f, nil), newHashworkCmd(f, nil), newHashcheckCmd(f),
	}
}

// manager wires the lifecycle manager to the marketplace, the store and the
// marketplace's clock. Writers hold the data dir's lock.
func (f *factory) manager(ctx context.Context, holder string) (*fleet.Manager, error) {
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	st, err := f.Store(ctx, true, holder)
	if err != nil {
		return nil, err
	}
	return &fleet.Manager{P: p, S: st, Clock: f.Clock(), Log: f.log}, nil
}

// keepMarketMoving makes a paced virtual clock run on by itself once the
// launch that waited on it is over, so that the market's time passes for
// the agents, billing and the coordinator as it would on a scaled clock.
func (f *factory) keepMarketMoving() {
	v := f.virtual
	if v == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v.Sleep(ctx, time.Second) == nil {
		}
	}()
	f.closers = append(f.closers, func() error { cancel(); <-done; return nil })
}

// refreshed returns the writer's manager after reconciling the store with
// the marketplace (reap acts on what it shows). Commands that only look
// use observed, which needs no lock.
func (f *factory) refreshed(ctx context.Context, holder string) (*fleet.Manager, error) {
	m, err := f.manager(ctx, holder)
	if err != nil {
		return nil, err
	}
	return f.reconciled(ctx, m, fleet.ReconcileOptions{}), nil
}

// reconciled brings m's store up to the marketplace's listing and keeps
// the orphans it found to show: never dropped, each one bills. A failed
// reconcile leaves the store as it was, and the command shows that.
func (f *factory) reconciled(ctx context.Context, m *fleet.Manager, opts fleet.ReconcileOptions) *fleet.Manager {
	rep, err := m.Reconcile(ctx, opts)
	if err != nil {
		fmt.Fprintf(f.io.ErrOut, "warning: could not refresh from the marketplace (%v); showing the last known state\n", err)
		return m
	}
	f.orphans = rep.Orphans
	f.warnOrphans(rep.Orphans)
	return m
}

func holderName(args ...string) string { return "vastfleet " + strings.Join(args, " ") }

type rentOptions struct {
	// OfferID is the offer to rent (the positional OFFER_ID).
	OfferID int64
	Image   string
	Disk    float64
	Env     string
	Onstart string
	Label   string
	Fleet   string
	Direct  bool
	Bid     float64
	Timeout time.Duration
	NoWait  bool
	JSONFlags
}

// newRentCmd parses into rentOptions and hands them to runF (tests) or
// rentRun.
func newRentCmd(f *factory, runF func(context.Context, *rentOptions) error) *cobra.Command {
	opts := &rentOptions{}
	cmd := &cobra.Command{
		Use:   "rent OFFER_ID",
		Short: "Rent one offer and wait until the instance runs",
		Long: `Rent one offer. vastfleet records an intent before the call and labels the
instance with it, so a lost response or a crash never leaves an instance it does
not know about. It waits until the instance is running (and says so when loading
takes over 5 minutes), then prints its ssh address.`,
		Example: `  vastfleet rent 12345 --image pytorch/pytorch:latest --disk 40`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("offer id %q: want a positive number from `vastfleet search`", args[0])
			}
			opts.OfferID = id
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return rentRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Image, "image", launch.DefaultImage, "docker image")
	fl.Float64Var(&opts.Disk, "disk", launch.DefaultDisk, "disk GB")
	fl.StringVar(&opts.Env, "env", "", "environment: 'KEY=V;KEY2=V2' (TCP_PORTS=8000 and UDP_PORTS=9000 open those ports), or the vastai CLI's Docker flags '-e KEY=V -p 8000:8000'")
	fl.StringVar(&opts.Onstart, "onstart", "", "command to run when the instance starts")
	fl.StringVar(&opts.Label, "label", "", "experiment name recorded with the instance")
	fl.StringVar(&opts.Fleet, "fleet", "default", "fleet the instance belongs to")
	fl.BoolVar(&opts.Direct, "direct", false, "direct SSH (ports on the host) instead of the marketplace's proxy")
	fl.Float64Var(&opts.Bid, "bid", 0, "interruptible: bid $/hr per machine (0: on-demand)")
	fl.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "give up waiting for running after this long (marketplace time)")
	fl.BoolVar(&opts.NoWait, "no-wait", false, "return once the rental is recorded")
	addJSONFlags(fl, &opts.JSONFlags, "print the instance as JSON")
	limitFlags(fl, bounds{"disk", ">0", "100000"}, bounds{"bid", "0", "1000"}, bounds{"timeout", "0", "720h"})
	return cmd
}

func (o *rentOptions) createRequest() (provider.CreateRequest, error) {
	env, err := launch.ParseEnv(o.Env)
	if err != nil {
		return provider.CreateRequest{}, usagef("--env: %v", err)
	}
	if o.Disk < 8 {
		return provider.CreateRequest{}, usagef("--disk %v: the marketplace's minimum is 8 GB", o.Disk)
	}
	req := launch.Create(o.Image, o.Disk)
	req.Env, req.Onstart = env, o.Onstart
	if o.Direct {
		req.Runtype = "ssh_direc ssh_proxy"
	}
	if o.Bid < 0 {
		return provider.CreateRequest{}, usagef("--bid %v: must be positive", o.Bid)
	}
	if o.Bid > 0 {
		bid := o.Bid
		req.Price = &bid
	}
	return req, nil
}

// rentRun is `rent` once its flags are parsed.
func rentRun(ctx context.Context, f *factory, opts *rentOptions) error {
	offerID := opts.OfferID
	req, err := opts.createRequest()
	if err != nil {
		return err
	}
	if err := fleet.ValidateFleetName(opts.Fleet); err != nil {
		return usageError{err}
	}
	m, err := f.manager(ctx, holderName("rent", strconv.FormatInt(offerID, 10)))
	if err != nil {
		return err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before renting: %w", err)
	}
	f.registerFleetKey(ctx, m.P)
	rec, err := m.Rent(ctx, fleet.RentRequest{Fleet: opts.Fleet, OfferID: offerID, Create: req, Experiment: opts.Label})
	if err != nil {
		return err
	}
	fmt.Fprintf(f.io.ErrOut, "rented offer %d as instance %d\n", offerID, rec.ID)
	if !opts.NoWait {
		rec, err = waitRunning(ctx, f, m, rec.ID, opts.Timeout)
		if err != nil {
			return err
		}
	}
	views, err := instanceViews(ctx, m, []store.Instance{rec}, f.Clock().Now())
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), views[0])
	}
	return printInstances(f, views)
}

func waitRunning(ctx context.Context, f *factory, m *fleet.Manager, id int64, timeout time.Duration) (store.Instance, error) {
	rec, err := m.WaitRunning(ctx, id, fleet.WaitOptions{
		Timeout: timeout,
		OnSlow: func(elapsed time.Duration) {
			fmt.Fprintf(f.io.ErrOut, "instance %d is still loading after %s: large images on slow hosts can take long; Ctrl+C stops waiting (the instance stays and keeps billing storage; `vastfleet destroy %d` ends it)\n",
				id, elapsed.Round(time.Second), id)
		},
	})
	if err != nil {
		return rec, fmt.Errorf("%w\ninstance %d still exists and bills at least storage: `vastfleet destroy %d` ends it, `vastfleet ls` shows it", err, id, id)
	}
	return rec, nil
}

type lsOptions struct {
	Fleet string
	All   bool
	JSONFlags
}

// newLsCmd parses into lsOptions and hands them to runF (tests) or lsRun.
func newLsCmd(f *factory, runF func(context.Context, *lsOptions) error) *cobra.Command {
	opts := &lsOptions{}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List instances vastfleet tracks, refreshed from the marketplace",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return lsRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Fleet, "fleet", "", "only this fleet")
	cmd.Flags().BoolVar(&opts.All, "all", false, "include destroyed instances")
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// lsRun is `ls` once its flags are parsed.
func lsRun(ctx context.Context, f *factory, opts *lsOptions) error {
	m, err := f.observed(ctx)
	if err != nil {
		return err
	}
	recs, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: opts.Fleet, IncludeGone: opts.All})
	if err != nil {
		return err
	}
	views, err := instanceViews(ctx, m, recs, f.Clock().Now())
	if err != nil {
		return err
	}
	orphans := f.orphanViews(f.orphans)
	if opts.JSON {
		rows := make([]any, 0, len(views)+len(orphans))
		for _, v := range views {
			rows = append(rows, v)
		}
		for _, o := range orphans {
			rows = append(rows, o)
		}
		return writeJSON(opts.out(f.io.Out), rows)
	}
	if len(views) > 0 || len(orphans) == 0 {
		if err := printInstances(f, views); err != nil {
			return err
		}
	}
	return printOrphans(f.io.Out, orphans)
}

// instanceJSON is `ls --json`'s row: the marketplace's names where they
// exist (id, dph_total, ssh_url, ...) plus vastfleet's own.
type instanceJSON struct {
	ID          int64    `json:"id"`
	OfferID     int64    `json:"offer_id"`
	MachineID   int64    `json:"machine_id"`
	GPUName     string   `json:"gpu_name"`
	NumGPUs     int      `json:"num_gpus"`
	CPUCores    float64  `json:"cpu_cores_effective"`
	RAMMB       float64  `json:"cpu_ram"`
	DPHTotal    float64  `json:"dph_total"`
	State       string   `json:"state"`
	Wanted      string   `json:"wanted"`
	CreatedAt   string   `json:"created_at"`
	UptimeSec   float64  `json:"uptime_seconds"`
	CostSoFar   float64  `json:"cost_so_far"`
	SSHURL      string   `json:"ssh_url"`
	Fleet       string   `json:"fleet"`
	Experiment  string   `json:"experiment"`
	Label       string   `json:"label"`
	EstHours    *float64 `json:"estimated_hours"`
	EstCost     *float64 `json:"estimated_cost"`
	Gone        bool     `json:"gone"`
	DestroyWait bool     `json:"destroy_requested"`
	// Note is the latest thing vastfleet did to the instance unasked
	// (reaped after its agent fell silent), with its time.
	Note string `json:"note,omitempty"`
	// Next is what the fleet's teardown ladder does to it next, and when.
	Next *fleet.Step `json:"next,omitempty"`
}

// instanceViews prices each instance from its whole recorded timeline, the
// one cost rule `cost` uses too.
func instanceViews(ctx context.Context, m *fleet.Manager, recs []store.Instance, now time.Time) ([]instanceJSON, error) {
	views := make([]instanceJSON, 0, len(recs))
	ladders := map[string]fleet.Ladder{}
	for _, r := range recs {
		c, err := m.CostOf(ctx, r, now)
		if err != nil {
			return nil, err
		}
		v := instanceView(r, c.Total, now)
		l, ok := ladders[r.Fleet]
		if !ok && r.Fleet != "" {
			if l, err = fleet.FleetLadder(ctx, m.S, r.Fleet); err != nil {
				return nil, err
			}
			ladders[r.Fleet] = l
		}
		if st, err := m.NextStep(ctx, r, l); err != nil {
			return nil, err
		} else if st.Action != "" {
			v.Next = &st
		}
		notes, err := m.S.Notes(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if len(notes) > 0 {
			n := notes[len(notes)-1]
			v.Note = n.At.UTC().Format(time.RFC3339) + " " + n.Text
		}
		views = append(views, v)
	}
	return views, nil
}

func instanceView(r store.Instance, cost float64, now time.Time) instanceJSON {
	end := now
	if !r.Live() {
		end = r.GoneAt
	}
	return instanceJSON{
		ID: r.ID, OfferID: r.OfferID, MachineID: r.MachineID, GPUName: r.GPUName, NumGPUs: r.NumGPUs,
		CPUCores: r.CPUCores, RAMMB: r.RAMMB, DPHTotal: r.DPHTotal, State: r.State, Wanted: r.Wanted,
		CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339), UptimeSec: max(0, end.Sub(r.CreatedAt).Seconds()),
		CostSoFar: cost, SSHURL: r.SSHURL, Fleet: r.Fleet, Experiment: r.Experiment,
		Label: r.Label, EstHours: r.EstHours, EstCost: r.EstCost, Gone: !r.Live(), DestroyWait: !r.DestroyRequestedAt.IsZero(),
	}
}

func printInstances(f *factory, views []instanceJSON) error {
	if len(views) == 0 {
		fmt.Fprintln(f.io.ErrOut, "no instances (rent one with `vastfleet rent OFFER_ID` or `vastfleet launch`)")
		return nil
	}
	t := newTable(f.io.Out, "ID", "OFFER", "GPU", "vCPU", "$/hr", "STATE", "UPTIME", "COST", "SSH", "FLEET")
	for _, v := range views {
		state := v.State
		if state == "" {
			state = "provisioning"
		}
		if v.Gone {
			state = "gone"
		} else if v.DestroyWait {
			state += " (destroying)"
		}
		fleetName := v.Fleet
		if v.Experiment != "" {
			fleetName += "/" + v.Experiment
		}
		t.row(strconv.FormatInt(v.ID, 10), strconv.FormatInt(v.OfferID, 10), fmt.Sprintf("%s x%d", v.GPUName, v.NumGPUs),
			fmtNum(v.CPUCores), fmt.Sprintf("%.3f", v.DPHTotal), state,
			(time.Duration(v.UptimeSec) * time.Second).Round(time.Minute).String(),
			fmt.Sprintf("$%.3f", v.CostSoFar), dash(v.SSHURL), fleetName)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, v := range views {
		if v.Note != "" {
			fmt.Fprintf(f.io.Out, "instance %d: %s\n", v.ID, v.Note)
		}
		if v.Next != nil {
			fmt.Fprintf(f.io.Out, "instance %d: teardown ladder: %s at %s (%s)\n", v.ID, v.Next.Action, v.Next.At.UTC().Format(time.RFC3339), v.Next.Reason)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, usagef("instance id %q: want a positive number (see `vastfleet ls`)", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// knownIDs refuses ids the store has never seen, before anything is sent.
func knownIDs(ctx context.Context, st *store.Store, ids []int64) error {
	for _, id := range ids {
		r, err := st.Instance(ctx, id)
		if err != nil {
			return usagef("instance %d is not one vastfleet tracks (see `vastfleet ls`, or `vastfleet reconcile` to adopt instances it created)", id)
		}
		if !r.Live() {
			return usagef("instance %d was destroyed at %s", id, r.GoneAt.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// stateOptions is what `stop` or `start` was asked.
type stateOptions struct {
	// Verb is stop or start.
	Verb string
	IDs  []int64
	JSONFlags
}

// newStateCmd is `stop` or `start` (verb): it parses into stateOptions and
// hands them to runF (tests) or stateRun.
func newStateCmd(f *factory, verb, short string, runF func(context.Context, *stateOptions) error) *cobra.Command {
	opts := &stateOptions{Verb: verb}
	cmd := &cobra.Command{
		Use:   verb + " ID...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			opts.IDs = ids
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return stateRun(cmd.Context(), f, opts)
		},
	}
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the ids acted on as JSON")
	return cmd
}

// idArgs writes ids back as the arguments they were given as.
func idArgs(ids []int64) []string {
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = strconv.FormatInt(id, 10)
	}
	return args
}

// stateRun is `stop` or `start` once its flags are parsed.
func stateRun(ctx context.Context, f *factory, opts *stateOptions) error {
	verb, ids := opts.Verb, opts.IDs
	m, err := f.manager(ctx, holderName(append([]string{verb}, idArgs(ids)...)...))
	if err != nil {
		return err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before %s: %w", verb, err)
	}
	if err := knownIDs(ctx, m.S, ids); err != nil {
		return err
	}
	if verb == "stop" {
		err = m.Stop(ctx, ids)
	} else {
		err = m.Start(ctx, ids)
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), map[string]any{"action": verb, "ids": ids})
	}
	fmt.Fprintf(f.io.ErrOut, "%s requested for %d instance(s)\n", verb, len(ids))
	return nil
}

type destroyOptions struct {
	// IDs are the instances given; empty with --all.
	IDs []int64
	JSONFlags
	All   bool
	Yes   bool
	Fleet string
	// Force destroys even when results on a node were never collected.
	Force   bool
	Collect bool // collect results into ./results first
	Results string
}

// newDestroyCmd parses into destroyOptions and hands them to runF (tests)
// or destroyRun.
func newDestroyCmd(f *factory, runF func(context.Context, *destroyOptions) error) *cobra.Command {
	opts := &destroyOptions{}
	cmd := &cobra.Command{
		Use:   "destroy ID... | --all",
		Short: "Destroy instances: the only way to stop every charge",
		Long: `Destroy instances and wait until the marketplace's listing no longer shows
them; only then are they marked gone. --all destroys every instance vastfleet
tracks (or of one --fleet); it asks first unless --yes.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.All == (len(args) > 0) {
				return usagef("give instance ids or --all (not both)")
			}
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			opts.IDs = ids
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return destroyRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "destroy every tracked instance")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask")
	cmd.Flags().StringVar(&opts.Fleet, "fleet", "", "with --all: only this fleet")
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the destroyed ids as JSON")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "destroy even if a node's results are newer than its last collect")
	cmd.Flags().BoolVar(&opts.Collect, "collect", false, "collect each running node's results into ./results/<fleet>/<node>/ first")
	cmd.Flags().StringVar(&opts.Results, "results", "/workspace/project/results", "the results directory checked on running nodes")
	return cmd
}

// destroyRun is `destroy` once its flags are parsed.
func destroyRun(ctx context.Context, f *factory, opts *destroyOptions) error {
	ids := opts.IDs
	if !opts.Force {
		// Checking results reaches into the instances.
		f.simHosts = true
	}
	m, err := f.manager(ctx, holderName(append([]string{"destroy"}, idArgs(ids)...)...))
	if err != nil {
		return err
	}
	if _, err := m.Reconcile(ctx, fleet.ReconcileOptions{}); err != nil {
		return fmt.Errorf("reconcile before destroy: %w", err)
	}
	if opts.All {
		live, err := m.S.Instances(ctx, store.InstanceFilter{Fleet: opts.Fleet})
		if err != nil {
			return err
		}
		for _, r := range live {
			ids = append(ids, r.ID)
		}
		if len(ids) == 0 {
			fmt.Fprintln(f.io.ErrOut, "nothing to destroy")
			return nil
		}
		if !opts.Yes && !confirm(f.io, fmt.Sprintf("Destroy %d instance(s)?", len(ids))) {
			return usagef("not confirmed: nothing destroyed (pass --yes to skip the question)")
		}
	} else if err := knownIDs(ctx, m.S, ids); err != nil {
		return err
	}
	if opts.Collect && !opts.Force {
		if err := f.collectBeforeDestroy(ctx, m.S, ids, opts.Results); err != nil {
			return err
		}
	}
	if !opts.Force {
		left, err := f.uncollected(ctx, m.S, ids, opts.Results)
		if err != nil {
			return fmt.Errorf("checking for uncollected results: %w (--force destroys without checking)", err)
		}
		if len(left) > 0 {
			var lines []string
			for _, id := range ids {
				if why, ok := left[id]; ok {
					lines = append(lines, fmt.Sprintf("instance %d: %s", id, why))
				}
			}
			return fmt.Errorf("nothing destroyed: destroying deletes these results forever:\n  %s\nrun `vastfleet collect --id ID` first, or pass --force", strings.Join(lines, "\n  "))
		}
	}
	if err := m.Destroy(ctx, ids); err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), map[string]any{"action": "destroy", "ids": ids})
	}
	fmt.Fprintf(f.io.ErrOut, "destroyed %d instance(s); the marketplace no longer lists them\n", len(ids))
	return nil
}

// reconcileOptions is what `reconcile` was asked.
type reconcileOptions struct {
	DestroyOrphans bool
	DestroyForeign bool
	Adopt          bool
	AdoptForeign   bool
	JSONFlags
}

// newReconcileCmd parses into reconcileOptions and hands them to runF
// (tests) or reconcileRun; adopting and destroying together is a usage
// error.
func newReconcileCmd(f *factory, runF func(context.Context, *reconcileOptions) error) *cobra.Command {
	opts := &reconcileOptions{}
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Match the marketplace's instances to the store: adopt, mark gone, find orphans",
		RunE: func(cmd *cobra.Command, args []string) error {
			if (opts.Adopt || opts.AdoptForeign) && (opts.DestroyOrphans || opts.DestroyForeign) {
				return usagef("--adopt and --destroy-*: pick one")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return reconcileRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.DestroyOrphans, "destroy-orphans", false, "destroy instances labelled by this data dir that it has no record of wanting")
	cmd.Flags().BoolVar(&opts.DestroyForeign, "destroy-foreign", false, "also destroy instances labelled by another vastfleet data dir (a lost database, or a colleague's!)")
	cmd.Flags().BoolVar(&opts.Adopt, "adopt", false, "track again the orphans this data dir rented (its state store was lost, emptied or rolled back)")
	cmd.Flags().BoolVar(&opts.AdoptForeign, "adopt-foreign", false, "also take over orphans labelled by another vastfleet data dir")
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// reconcileRun is `reconcile` once its flags are parsed.
func reconcileRun(ctx context.Context, f *factory, opts *reconcileOptions) error {
	m, err := f.manager(ctx, holderName("reconcile"))
	if err != nil {
		return err
	}
	ropts := fleet.ReconcileOptions{DestroyOrphans: opts.DestroyOrphans, DestroyForeign: opts.DestroyForeign}
	switch {
	case opts.AdoptForeign:
		ropts.Adopt = func(fleet.Orphan) bool { return true }
	case opts.Adopt:
		ropts.Adopt = f.ownOrphan
	}
	rep, err := m.Reconcile(ctx, ropts)
	if err != nil {
		return err
	}
	f.warnOrphans(rep.Orphans)
	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), rep)
	}
	fmt.Fprint(f.io.Out, rep.String())
	return nil
}
