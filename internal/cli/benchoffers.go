package cli

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/fleet"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/offerbench"
	"github.com/vastfleet/vastfleet/internal/search"
)

type benchOffersOptions struct {
	query       queryFlags
	rank        rankFlags
	Probe       string
	Top         int
	Timeout     time.Duration
	BootTimeout time.Duration
	Parallel    int
	Save        string
	Image       string
	Disk        float64
	Fleet       string
	cmdutil.JSONFlags
	Query []string
}

// newBenchOffersCmd parses into benchOffersOptions and hands them to runF
// (tests) or benchOffersRun.
func newBenchOffersCmd(f *factory.Factory, runF func(context.Context, *benchOffersOptions) error) *cobra.Command {
	opts := &benchOffersOptions{}
	cmd := &cobra.Command{
		Use:   "offers --probe CMD [--top N] [--save FILE] [QUERY...]",
		Short: "Rank machine types by your own benchmark: measured units per dollar",
		Long: `Rent one instance of each of the --top machine types (GPU model and CPU model)
that the query ranks best (--by vcpu unless --by or --score says otherwise;
an offer taken before the create is replaced by its type's next, up to 3
tries), wait until each accepts SSH (at most 2 minutes after it runs), run
CMD with sh on each over SSH, and rank them by measured units per dollar:
the probe's units per second × 3600 / the instance's $/hr. Beside each is its
place by the listing's $/vCPU, and the listing's pick's measured figure
relative to the best.

The probe's contract: the first word of its last non-empty output line
(stdout and stderr together) is a number, units per second (hashes/s,
samples/s, ...). A probe that exits non-zero, prints no such number or runs
past --timeout is reported as failed or timeout, and never ranked. Exit
status: 0 when every probe passed, 3 when some did not, 1 when none did.

--save writes the ranking (passed offers, best first, each offer's score its
units per dollar) as search --save does: search --from FILE shows it and
launch --from FILE rents from it.

Every instance is recorded, labelled with its fleet and destroyed at the
end, after a failure or Ctrl+C too ('vastfleet cleanup FLEET' finishes a
destroy the marketplace did not confirm). On the simulator the probes run
one at a time (--parallel), since its machines share this computer's cores.`,
		Example: `  vastfleet bench offers --probe 'openssl speed -seconds 5 sha256 2>&1 | awk "/^sha256/{print \$NF*1000}"' --top 5 --save probed.json 'cpu_cores_effective>=16'
  vastfleet search --from probed.json && vastfleet launch --from probed.json --count 1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Probe == "" {
				return usagef("--probe CMD: give the benchmark to run on each instance")
			}
			if opts.rank.Score != "" && opts.rank.By != "" {
				return usagef("--by %s and --score: pick one", opts.rank.By)
			}
			opts.Query = args
			return run(cmd, f, opts, runF, benchOffersRun)
		},
	}
	opts.query.register(cmd)
	opts.rank.register(cmd, launch.DefaultBy)
	fl := cmd.Flags()
	fl.StringVar(&opts.Probe, "probe", "", "the benchmark: a shell command whose last output line starts with units per second")
	fl.IntVar(&opts.Top, "top", offerbench.DefaultTop, "machine types to probe, one instance each")
	fl.DurationVar(&opts.Timeout, "timeout", offerbench.DefaultTimeout, "a probe still running after this fails as timeout (wall time, connection included)")
	fl.DurationVar(&opts.BootTimeout, "boot-timeout", launch.DefaultBootTimeout, "an instance not running after this fails as boot failed (marketplace time)")
	fl.IntVar(&opts.Parallel, "parallel", 0, "probes at once (default: all, one at a time on the simulator)")
	fl.StringVar(&opts.Save, "save", "", "write the ranking to `FILE` (input for search --from and launch --from)")
	fl.StringVar(&opts.Image, "image", launch.DefaultImage, "docker image")
	fl.Float64Var(&opts.Disk, "disk", launch.DefaultDisk, "disk GB per instance")
	fl.StringVar(&opts.Fleet, "fleet", "", "fleet the probe instances belong to (default: probe-<time>)")
	cmdutil.AddJSONFlags(fl, &opts.JSONFlags, "print the result (rows, listing_pick, listing_pick_share, destroyed) as JSON")
	limitFlags(fl, bounds{"top", "1", strconv.Itoa(offerbench.MaxTop)}, bounds{"timeout", "1s", "24h"},
		bounds{"boot-timeout", "0", "720h"}, bounds{"parallel", "0", strconv.Itoa(offerbench.MaxTop)}, bounds{"disk", ">0", "100000"})
	// The market moves while the instances boot, and the probes reach into
	// the simulated machines.
	return withNeeds(f, cmd, func([]string) factory.Needs { return factory.Needs{WaitsOnMarket: true, SimHosts: true} })
}

// benchOffersRun is `bench offers` once its flags are parsed.
func benchOffersRun(ctx context.Context, f *factory.Factory, opts *benchOffersOptions) error {
	name := cmp.Or(opts.Fleet, offerbench.FleetName(time.Now()))
	if err := fleet.ValidateFleetName(name); err != nil {
		return usageError{err}
	}
	create := launch.Create(opts.Image, opts.Disk)
	args := opts.query.toRent(f, opts.Query, opts.Disk, "probing")
	cands, _, err := rankedOffers(ctx, f, &opts.query, &opts.rank, args, 0)
	if err != nil {
		return err
	}
	d, parallel, err := f.OfferBench(ctx, factory.HolderName("bench", "offers", "--fleet", name), opts.Parallel)
	if err != nil {
		return err
	}
	res, err := offerbench.Run(ctx, d, cands, offerbench.Config{
		Probe: opts.Probe, Top: opts.Top, Timeout: opts.Timeout, BootTimeout: opts.BootTimeout,
		Parallel: parallel, Fleet: name, Create: create, Log: f.IO.ErrOut,
	})
	if err != nil {
		return err
	}
	return reportBenchOffers(f, opts, res)
}

// reportBenchOffers saves the ranking (--save) and prints the result.
func reportBenchOffers(f *factory.Factory, opts *benchOffersOptions, res offerbench.Result) error {
	var err error
	if opts.Save != "" {
		if err := search.Save(opts.Save, res.Ranking); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
		fmt.Fprintf(f.IO.ErrOut, "saved %d measured offers to %s\n", len(res.Ranking), opts.Save)
	}
	if opts.JSON {
		err = cmdutil.WriteJSON(opts.Out(f.IO.Out), res)
	} else {
		err = res.WriteText(f.IO.Out)
	}
	if err != nil {
		return err
	}
	return res.Outcome()
}

// probedOffers runs a task file's probe (offerbench.ProbeJob) in a
// fleet of its own.
func probedOffers(ctx context.Context, f *factory.Factory, jf *jobfile.Job, ranked []market.Ranked) ([]market.Ranked, error) {
	name := offerbench.FleetName(time.Now())
	d, parallel, err := f.OfferBench(ctx, factory.HolderName("up", "probe", name), 0)
	if err != nil {
		return nil, err
	}
	return offerbench.ProbeJob(ctx, d, ranked, jf, name, parallel, f.IO.ErrOut)
}
