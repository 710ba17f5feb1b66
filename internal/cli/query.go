package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
)

// queryParseOptions is what `query parse` was asked.
type queryParseOptions struct {
	query queryFlags
	// Query is the query's words, as given.
	Query []string
}

// newQueryCmd is `query` with its parse subcommand, which parses into
// queryParseOptions and hands them to parseF (tests) or queryParseRun.
func newQueryCmd(f *factory.Factory, parseF func(context.Context, *queryParseOptions) error) *cobra.Command {
	cmd := &cobra.Command{Use: "query", Short: "Work with the vastai query language"}
	// query parse shows what the vastai CLI would send, unknown fields
	// included (with a warning); search refuses them before sending.
	opts := &queryParseOptions{query: queryFlags{sendUnknown: true}}
	parse := &cobra.Command{
		Use:   "parse [-n] [-t T|-b|-i|-r|-d] [--new] [-o ORDER] [--limit N] QUERY...",
		Short: "Print the JSON body the vastai CLI would send for QUERY",
		Long: `Parse a query exactly as 'vastai search offers' does and print the JSON
body it would POST to /api/v0/bundles/ (with --new: PUT to
/api/v0/search/asks/, wrapped as {"select_cols":["*"],"q":...}), keys
sorted, for comparison with the CLI; the method and path go to stderr. This
is the body vastfleet's own searches send. One deliberate difference:
repeated field!=value terms on one field become {"notin": [...]} instead of
keeping only the last one.`,
		Example: `  vastfleet query parse -n --limit 100 -o +dph_total 'gpu_ram>=24 geolocation!=CN'
  vastfleet query parse --new -b 'num_gpus=1'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Query = args
			return run(cmd, f, opts, parseF, queryParseRun)
		},
	}
	opts.query.register(parse)
	cmd.AddCommand(parse)
	return cmd
}

// queryParseRun is `query parse` once its flags are parsed.
func queryParseRun(_ context.Context, f *factory.Factory, opts *queryParseOptions) error {
	query, err := opts.query.parse(f.IO, opts.Query)
	if err != nil {
		return err
	}
	method, path, body, err := vast.SearchBodyJSON(query, opts.query.New, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "%s %s\n", method, path)
	_, err = fmt.Fprintln(f.IO.Out, string(body))
	return err
}
