// Package cli is vastfleet's command tree: it parses flags, calls what
// the factory (internal/factory, the one place that names concrete
// adapters) gives it, prints, and maps errors to messages and exit codes.
package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/buildinfo"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/search"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// Version is set at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

// usageOnBadArgs makes a wrong number of arguments a usage error (exit
// 2), as a bad flag is, in every command of the tree.
func usageOnBadArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w (usage: %s)", err, cmd.UseLine())}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageOnBadArgs(sub)
	}
}

// usageError marks errors that are the user's input: exit code 2, as
// domain packages' usage.Error.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// serverRuns are the commands that run on a server when there is one
// (--server, or a current context).
var serverRuns = map[string]bool{"up": true, "status": true, "logs": true, "down": true, "ls": true, "cost": true, "destroy": true, "launch": true}

// Main runs vastfleet with args and returns the process exit code.
func Main(ctx context.Context, ios *iostreams.IOStreams, args []string) int {
	return mainWith(ctx, ios, args, nil)
}

// mainWith is Main with what a caller in this process (serve's job runner)
// gives the factory before any command runs.
func mainWith(ctx context.Context, ios *iostreams.IOStreams, args []string, durable func(context.Context) error) int {
	f := factory.New(ios, Version).ServeDurable(durable)
	defer f.Close()
	root := newRootCmd(f)
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		// A server ran the command and sent its output, error included.
		return int(code)
	}
	if errors.Is(err, syscall.EPIPE) && !errors.Is(err, context.Canceled) {
		// The reader went away (`vastfleet search | head`): nothing to
		// say, and the status a pipeline expects of a closed pipe.
		return 141
	}
	if msg, ok := unknownCommand(err); ok {
		err = usageError{errors.New(msg)}
	}
	fmt.Fprintf(ios.ErrOut, "error: %s\n", termSafe(err.Error()))
	return exitStatus(err)
}

// exitStatus is the exit code of a command that failed with err.
func exitStatus(err error) int {
	var ue usageError
	switch {
	case errors.As(err, &ue), errors.As(err, new(usage.Error)), errors.As(err, new(*search.QueryError)):
		return 2
	case errors.Is(err, provider.ErrAuth):
		return 4
	case errors.Is(err, usage.ErrPartial): // usage.Partial, job.ErrPartial
		return 3
	case errors.Is(err, context.Canceled), errors.Is(err, launch.ErrInterrupted):
		return 130 // as a shell reports a command ended by Ctrl+C
	default:
		return 1
	}
}

// unknownCommand rewrites cobra's unknown-command error, which spreads
// its suggestions over lines and tabs (shown escaped by termSafe), as one
// line: a usage error, exit 2.
func unknownCommand(err error) (string, bool) {
	first, rest, _ := strings.Cut(err.Error(), "\n")
	if !strings.HasPrefix(first, "unknown command ") {
		return "", false
	}
	var maybe []string
	for _, l := range strings.Split(rest, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasSuffix(l, ":") && !strings.HasSuffix(l, "?") {
			maybe = append(maybe, l)
		}
	}
	msg := first
	if len(maybe) > 0 {
		msg += "; did you mean " + strings.Join(maybe, ", ") + "?"
	}
	return msg + " (see vastfleet --help)", true
}

// withNeeds declares what cmd needs of the factory beyond the global
// flags, worked out from its parsed flags and arguments: the factory reads
// it once, as it is initialised for cmd, so that its settings are fixed
// before any adapter is built and no command changes them after.
func withNeeds(f *factory.Factory, cmd *cobra.Command, needs func(args []string) factory.Needs) *cobra.Command {
	f.Declare(cmd, func(args []string) (factory.Needs, error) { return needs(args), nil })
	return cmd
}

// run hands a command's parsed options to runF (tests) or to the
// command's own run.
func run[O any](cmd *cobra.Command, f *factory.Factory, opts O, runF func(context.Context, O) error, do func(context.Context, *factory.Factory, O) error) error {
	if runF != nil {
		return runF(cmd.Context(), opts)
	}
	return do(cmd.Context(), f, opts)
}

func newRootCmd(f *factory.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "vastfleet",
		Short: "Cheap, safe clusters from GPU marketplaces (vast.ai and a built-in simulator)",
		Long: `vastfleet searches and ranks marketplace offers, plans a task's hardware,
launches fleets of instances without ever leaving one billing unnoticed, and
tears them down with a cost report.

By default every command runs against the built-in simulated marketplace
(--market sim), which keeps its state in the data dir. Use --market vast with
an API key (--api-key, VAST_API_KEY or the vastai CLI's key file) for the real one.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read(Version).String(),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := validateFlags(cmd); err != nil {
				return err
			}
			if err := cmdutil.CheckJQ(cmd.Flags()); err != nil {
				return err
			}
			return f.Init(func(name string) bool { fl := cmd.Flags().Lookup(name); return fl != nil && fl.Changed }, cmd, args)
		},
	}
	defer usageOnBadArgs(root)
	root.SetVersionTemplate("vastfleet {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&f.Opts.Market, "market", "sim", "marketplace: sim (built-in simulator) or vast (real vast.ai)")
	pf.StringVar(&f.Opts.APIKey, "api-key", "", "vast.ai API key (default: $VAST_API_KEY, then the vastai CLI's key file)")
	pf.StringVar(&f.Opts.APIURL, "api-url", "", "marketplace base URL (default https://console.vast.ai, or $VAST_URL); with --market sim, the URL of a running 'vastfleet sim serve'")
	pf.StringVar(&f.Opts.DataDir, "data-dir", "", "state directory (default $VASTFLEET_HOME, else ~/.local/share/vastfleet)")
	pf.Float64Var(&f.Opts.APIRate, "api-rate", factory.DefaultAPIRate, "--market vast: requests per second to the API, shared by all of one command's calls (a 429 halves it for a while)")
	pf.Float64Var(&f.Opts.SimSpeed, "sim-speed", 60, "simulator time scale, simulated seconds per wall second: the most a waiting command (launch, up, rent) runs the market per wall second; given to the command that starts the local market, also its pace between commands (else 1x, as a real market)")
	pf.StringVar(&f.Opts.SimFaults, "sim-faults", "realistic", "simulator fault profile: none, realistic or harsh")
	pf.Float64Var(&f.Opts.SimLiars, "sim-liars", -1, "share of the simulator's machines whose operators lie with the agent's credential (default: the fault profile's; harsh has 0.05)")
	pf.Float64Var(&f.Opts.SimSpoof, "sim-spoof", -1, "share of the simulator's machines with less true capacity than they advertise (default: the fault profile's; harsh has 0.05)")
	pf.Float64Var(&f.Opts.SimCapacityScale, "sim-capacity-scale", 0, "run each simulated machine's workload at its true cores over this scale: N simulated cores to one of this computer's (0: every machine shares this computer's cores alike)")
	pf.BoolVar(&f.Opts.SimEndpointLimits, "sim-endpoint-limits", false, "limit the simulator's endpoints per key as vast does (about one call a market second on most)")
	pf.Int64Var(&f.Opts.SimSeed, "sim-seed", 1, "simulator market seed (used when its state is created)")
	pf.BoolVar(&f.Opts.SimHosts, "sim-hosts", false, "run a machine (directory, onstart, SSH on 127.0.0.1) behind each running instance of the in-process simulator (VASTFLEET_SIM_LOCAL=off) while the command runs; the local market always does")
	pf.BoolVarP(&f.Opts.Verbose, "verbose", "v", false, "log API calls and decisions to stderr")
	pf.StringVar(&f.Opts.Server, "server", "", "run up, status, logs, down, ls, cost, destroy and launch on this vastfleet server (token: $VASTFLEET_TOKEN or the context for its URL; default: the current context; local: this process)")
	limitFlags(pf, bounds{"api-rate", ">0", "1000"}, bounds{"sim-speed", ">0", "1000000"}, bounds{"sim-liars", "-1", "1"}, bounds{"sim-spoof", "-1", "1"}, bounds{"sim-capacity-scale", "0", "1e9"})
	root.AddGroup(&cobra.Group{ID: "market", Title: "Offers and planning:"},
		&cobra.Group{ID: "instances", Title: "Instances and fleets:"},
		&cobra.Group{ID: "tools", Title: "Tools:"})
	for _, c := range []*cobra.Command{newSearchCmd(f, nil), newPlanCmd(f, nil), newMarketCmd(f, nil), newQueryCmd(f, nil)} {
		c.GroupID = "market"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newSimCmd(f), newBenchCmd(f, nil, nil), newVersionCmd(f, nil), newAgentCmd(f), newWatchBidsCmd(f)} {
		c.GroupID = "tools"
		root.AddCommand(c)
	}
	for _, c := range append(instanceCommands(f), newCoordCmd(f, nil), newServeCmd(f, nil), newContextCmd(f)) {
		c.GroupID = "instances"
		if serverRuns[c.Name()] {
			remotable(f, c)
		}
		root.AddCommand(c)
	}
	return root
}
