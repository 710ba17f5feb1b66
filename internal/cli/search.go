package cli

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/jsonarray"
	"github.com/vastfleet/vastfleet/internal/launch"
	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/search"
)

// queryFlags are the `vastai search offers` flags, shared by every command
// that selects offers.
type queryFlags struct {
	NoDefault bool
	Type      string
	Order     string
	Limit     int
	Storage   float64
	// SweepLimit is the result size a sweep asks for per slice.
	SweepLimit int
	// sendUnknown sends a field that looks like a typo of a known one, with
	// a warning, as the vastai CLI does, rather than refusing it.
	sendUnknown bool
	// New sends the search in the CLI's --new form (PUT /search/asks/).
	New bool
}

// typeAlias is a flag that stands for one --type value, as the vastai
// CLI's store_const aliases do: all write the same field while the command
// line is parsed, so of several the last one given wins, as in argparse.
type typeAlias struct {
	dest *string
	val  string
}

func (a typeAlias) String() string   { return "false" }
func (a typeAlias) Type() string     { return "bool" }
func (a typeAlias) IsBoolFlag() bool { return true }
func (a typeAlias) Set(v string) error {
	if v != "true" {
		return fmt.Errorf("takes no value (it means --type %s)", a.val)
	}
	*a.dest = a.val
	return nil
}

// register adds the flags to cmd; omit names pricing aliases the command
// defines otherwise (launch's --bid takes a price).
func (q *queryFlags) register(cmd *cobra.Command, omit ...string) {
	fl := cmd.Flags()
	fl.BoolVarP(&q.NoDefault, "no-default", "n", false, "drop the default filters (verified, external=false, rentable)")
	fl.StringVarP(&q.Type, "type", "t", "on-demand", "pricing: on-demand, reserved or bid (interruptible); sent as given, as the vastai CLI does")
	for _, a := range []struct{ name, short, val string }{
		{"interruptible", "i", "bid"}, {"bid", "b", "bid"}, {"reserved", "r", "reserved"}, {"on-demand", "d", "on-demand"},
	} {
		if slices.Contains(omit, a.name) {
			continue
		}
		fl.VarPF(typeAlias{&q.Type, a.val}, a.name, a.short, "same as --type "+a.val+" (of several pricing flags, the last wins)").NoOptDefVal = "true"
	}
	fl.BoolVar(&q.New, "new", false, "search with the vastai CLI's --new request: PUT /api/v0/search/asks/ with {\"select_cols\":[\"*\"],\"q\":QUERY}")
	fl.BoolVar(&q.sendUnknown, "send-unknown", q.sendUnknown, "send a field that looks like a typo of a known one as written (other unknown fields are always sent, with a warning)")
	fl.StringVarP(&q.Order, "order", "o", "score-", "sort keys, comma separated, with +/- for ascending/descending (e.g. +dph_total,-num_gpus)")
	fl.IntVar(&q.Limit, "limit", 0, "keep the N best offers by the ranking (by -o when nothing scores them); 0 keeps every offer found")
	fl.Float64Var(&q.Storage, "storage", 5, "disk GiB to price into dph_total")
	fl.IntVar(&q.SweepLimit, "sweep-limit", provider.DefaultSweepPage, "with --all: offers asked per search; a slice that returns this many, or that a marketplace capping below it cut short, is split further")
	limitFlags(fl, bounds{"limit", "0", "10000000"}, bounds{"storage", "0", "100000"}, bounds{"sweep-limit", "1", "1000000"})
}

func (q *queryFlags) parse(io *iostreams.IOStreams, args []string) (market.Query, error) {
	query, warnings, err := search.ParseQuery(args, market.ParseOptions{
		NoDefault: q.NoDefault, Type: q.Type, Order: q.Order, Limit: q.Limit, Storage: q.Storage, Strict: !q.sendUnknown,
	})
	for _, w := range warnings {
		fmt.Fprintf(io.ErrOut, "warning: %s\n", termSafe(string(w)))
	}
	return query, err
}

// rankFlags choose how offers are scored.
type rankFlags struct {
	By    string
	Score string
	// byDefault applies when neither --by nor --score is given.
	byDefault string
	// spec is the launch the ranking is for (--by useful weighs its
	// image and deadline); nil: a default launch.
	spec *launch.Spec
}

func (r *rankFlags) register(cmd *cobra.Command, defaultBy string) {
	r.byDefault = defaultBy
	help := "rank by vcpu (vCPUs per $/hr), gpu (relative FP16 speed per $/hr), dlperf (DLPerf per $/hr) or useful (the expected $ of a node ready in time and kept, lowest first: failures, slow boots and pulls priced in; the query bounds the node's size)"
	if defaultBy != "" {
		help += " (default " + defaultBy + ")"
	}
	cmd.Flags().StringVar(&r.By, "by", "", help)
	cmd.Flags().StringVar(&r.Score, "score", "", "rank by your own expression over offer fields, e.g. 'cpu_cores_effective * reliability / dph_total'")
}

// scorer returns nil when no ranking is asked for and there is no default.
func (r *rankFlags) scorer(ctx context.Context, f *factory.Factory) (market.Scorer, error) {
	return search.Ranking{By: r.By, Score: r.Score, Default: r.byDefault}.Scorer(func() (market.Scorer, error) {
		return f.UsefulScorer(ctx, r.spec)
	})
}

// toRent is the query of offers to rent instances of disk GB from:
// priced with that disk unless --storage says otherwise, and without
// words, launch.DefaultFilter (said on the terminal, as what does it)
// unless -n drops the defaults.
func (q *queryFlags) toRent(f *factory.Factory, args []string, disk float64, doing string) []string {
	if q.Storage == 5 { // the search default
		q.Storage = disk
	}
	if len(args) == 0 && !q.NoDefault {
		fmt.Fprintf(f.IO.ErrOut, "no query: %s offers with %s (give a query, or -n for none)\n", doing, launch.DefaultFilter)
		args = []string{launch.DefaultFilter}
	}
	return args
}

// rankedOffers parses the query flags, searches (sweeping past the
// marketplace's cap when sweepLimit > 0) and ranks.
func rankedOffers(ctx context.Context, f *factory.Factory, qf *queryFlags, rf *rankFlags, args []string, sweepLimit int) ([]market.Ranked, market.Scorer, error) {
	q, s, err := parseSearch(ctx, f, qf, rf, args)
	if err != nil {
		return nil, nil, err
	}
	ranked, err := f.LiveRanked(ctx, q, search.Options{NewForm: qf.New, Sweep: sweepLimit, Page: qf.SweepLimit, Scorer: s})
	return ranked, s, err
}

// parseSearch is the query and the scorer the flags ask for.
func parseSearch(ctx context.Context, f *factory.Factory, qf *queryFlags, rf *rankFlags, args []string) (market.Query, market.Scorer, error) {
	q, err := qf.parse(f.IO, args)
	if err != nil {
		return q, nil, err
	}
	s, err := rf.scorer(ctx, f)
	return q, s, err
}

type searchOptions struct {
	query   queryFlags
	rank    rankFlags
	All     bool
	Explain bool
	cmdutil.JSONFlags
	Save string
	From string
	// Query is the positional query (`offers` first is allowed, as the
	// vastai CLI has it).
	Query []string
}

// newSearchCmd parses into searchOptions and hands them to runF (tests) or
// searchRun.
func newSearchCmd(f *factory.Factory, runF func(context.Context, *searchOptions) error) *cobra.Command {
	opts := &searchOptions{}
	cmd := &cobra.Command{
		Use:   "search [flags] QUERY...",
		Short: "Search offers with the vastai query language and rank them",
		Long: `Search offers exactly as 'vastai search offers' does (same query language,
defaults, -n, --type, -o, --limit, --storage), then rank them.

  vastfleet search 'gpu_ram>=24 reliability>0.95 geolocation!=CN' -o +dph_total
  vastfleet search -n 'rentable=True cpu_cores_effective>16 dph_total<=5' --by vcpu --all

The marketplace caps how many offers one search returns; --all sweeps price
slices until every matching offer is collected.`,
		Example: `  vastfleet search --by vcpu -n 'rentable=True inet_down>=200 cpu_cores_effective>16 geolocation notin [CN,HK]'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Query = args
			if opts.From != "" && opts.All {
				return usagef("--from and --all: a file holds every offer it has; drop --all")
			}
			if opts.rank.Score != "" && opts.rank.By != "" {
				return usagef("--by %s and --score: pick one", opts.rank.By)
			}
			return run(cmd, f, opts, runF, searchRun)
		},
	}
	opts.query.register(cmd)
	opts.rank.register(cmd, "")
	cmd.Flags().BoolVar(&opts.All, "all", false, "collect every matching offer, beyond the marketplace's per-search cap")
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the ranked offers as a JSON array")
	cmd.Flags().StringVar(&opts.Save, "save", "", "also write the ranked offers as JSON to FILE (input for launch --from)")
	cmd.Flags().StringVar(&opts.From, "from", "", "rank offers from FILE (- for stdin) instead of the marketplace: a search answer, a `vastai search offers --raw` array, a --save'd ranking, or JSON lines")
	cmd.Flags().BoolVar(&opts.Explain, "explain", false, "also print the query object sent and each offer's score factors")
	return cmd
}

// searchRun is `search` once its flags are parsed.
func searchRun(ctx context.Context, f *factory.Factory, opts *searchOptions) error {
	if opts.All || opts.From != "" {
		defer search.TuneForWholeMarket()()
	}
	if opts.From != "" && opts.All {
		return usagef("--from and --all: a file holds every offer it has; drop --all")
	}
	sweep := 0
	if opts.All {
		sweep = opts.query.SweepLimit
	}
	q, scorer, err := parseSearch(ctx, f, &opts.query, &opts.rank, opts.Query)
	if err != nil {
		return err
	}
	var ranked []market.Ranked
	if opts.From != "" {
		ranked, err = search.FromFile(ctx, f.IO.In, opts.From, q, scorer)
	} else {
		ranked, err = f.LiveRanked(ctx, q, search.Options{NewForm: opts.query.New, Sweep: sweep, Page: opts.query.SweepLimit, Scorer: scorer})
	}
	if err != nil {
		return err
	}
	if opts.Save != "" {
		if err := search.Save(opts.Save, ranked); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
		fmt.Fprintf(f.IO.ErrOut, "saved %d ranked offers to %s\n", len(ranked), opts.Save)
	}
	if opts.JSON {
		return jsonarray.Write(opts.Out(f.IO.Out), ranked)
	}
	if err := search.WriteOffers(f.IO.Out, ranked); err != nil {
		return err
	}
	if opts.Explain {
		return explainSearch(f.IO.Out, opts, q, scorer, ranked)
	}
	return nil
}

// explainSearch shows what was asked of the marketplace and why each offer
// ranks where it does.
func explainSearch(w io.Writer, opts *searchOptions, q market.Query, s market.Scorer, ranked []market.Ranked) error {
	if !opts.All && opts.From == "" {
		q = search.OnePageQuery(q, s, opts.query.SweepLimit)
	}
	method, path, body, err := vast.SearchBodyJSON(q, opts.query.New, false)
	if err != nil {
		return err
	}
	search.WriteExplain(w, method, path, body, s, ranked)
	return nil
}
