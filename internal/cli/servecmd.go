package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/server"
)

type serveOptions struct {
	factory.Serving
	APIKeyFile string
}

func newServeCmd(f *factory.Factory, runF func(context.Context, *serveOptions) error) *cobra.Command {
	opts := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8480] [--tls] [--db sqlite:PATH|postgres://...]",
		Short: "Run the controller as a service: jobs run on the server, clients submit and follow them",
		Long: `Run vastfleet as a long-running server until Ctrl+C. It holds this data dir's
store and market, runs every job submitted to it as an up inside the server
(one at a time, as the data dir has one writer; a job running when the
server stopped or was killed is resumed when it starts again, its agents
coming back to its coordinator), and runs status, logs, ls, cost, down,
destroy and launch for clients.

Clients authenticate with API tokens made here (` + "`vastfleet serve token create NAME --role viewer|operator`" + `):
a viewer reads (status, logs, ls, cost, the dashboard); an operator also
submits (up), launches, ends (down) and destroys. Every action, allowed or
refused, is in the audit log (` + "`vastfleet serve audit`" + `). The marketplace's
API key stays on the server (--api-key-file reads it from a 0600 secret
file; it is never written to the data dir nor sent to a client). A client talks to it with --server URL and
VASTFLEET_TOKEN, or a context (` + "`vastfleet context add`" + `).

Servers given the same --db postgres://..., data dir and --coord-addr are
replicas: each serves the API, and each job runs on one replica at a time,
chosen with PostgreSQL advisory locks; when that replica dies another
resumes the job within seconds. The replicas must share the data dir on
one machine (its SQLite stores and job files are not in PostgreSQL), so
they guard against a server process dying, not the machine; see the
README.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, f, opts, runF, serveRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Addr, "addr", "127.0.0.1:8480", "where the server listens (an address other machines reach needs --tls)")
	fl.BoolVar(&opts.TLS, "tls", false, "serve HTTPS with a self-signed certificate kept in the data dir (its sha256 pin is printed: `context add --pin`)")
	fl.StringVar(&opts.DB, "db", "", "the server's database (tokens, audit log, jobs): sqlite:PATH (default sqlite:DATA_DIR/serve.db) or postgres://USER:PASSWORD@HOST:PORT/DB")
	fl.StringVar(&opts.AgentBin, "agent-bin", "", "agent binary the jobs' coordinators serve (as up --agent-bin)")
	fl.StringVar(&opts.CoordAddr, "coord-addr", "", "where the jobs' coordinators listen (as up --coord-addr; default 127.0.0.1:0). Give a fixed address to restore elsewhere: the agents keep calling it")
	fl.StringVar(&opts.Replicate, "replicate", "", "replicate the data dir continuously (Litestream) to `URL`: file:///PATH or sftp://USER@HOST/PATH")
	fl.StringVar(&opts.RestoreFrom, "restore-from", "", "before serving, bring an empty data dir back from the replica at `URL` (then go on replicating to it), and resume its jobs")
	fl.StringVar(&opts.APIKeyFile, "api-key-file", "", "read the marketplace's API key from this secret `FILE` (mode 0600, e.g. a mounted secret; it wins over VAST_API_KEY): kept in memory only, never written to the data dir or sent to a client")
	cmd.AddCommand(newServeTokenCmd(f), newServeAuditCmd(f))
	// The server holds the market for its whole life: on the simulator,
	// its machines run in this process, and each command the server runs
	// reaches the market where this process serves it.
	return withNeeds(f, cmd, func([]string) factory.Needs { return factory.Needs{SimHosts: true, APIKeyFile: opts.APIKeyFile} })
}

// serveRun is `serve` once its flags are parsed: the factory serves,
// each client's command run by this command line in this process.
func serveRun(ctx context.Context, f *factory.Factory, opts *serveOptions) error {
	return f.Serve(ctx, opts.Serving, mainWith)
}

func newServeTokenCmd(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "API tokens of this server: create, revoke, ls"}
	var role, dbSpec string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create NAME --role viewer|operator [--expires 720h]",
		Short: "Make a token for NAME and print it (once: only its sha256 is kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := server.NewToken(cmd.Context(), dbSpec, f.DataDir, args[0], role, ttl)
			if err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, tok)
			fmt.Fprintf(f.IO.ErrOut, "token %s (%s) made: it is shown only now; give it to its user (VASTFLEET_TOKEN, or `vastfleet context add NAME URL --token-file F`)\n", args[0], role)
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "", "viewer (reads) or operator (also submits, launches, ends and destroys)")
	create.Flags().DurationVar(&ttl, "expires", 0, "the token expires after this long (0: when revoked)")
	limitFlags(create.Flags(), bounds{"expires", "0", "87600h"})
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke NAME's token: it is refused from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := server.RevokeToken(cmd.Context(), dbSpec, f.DataDir, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "token %s revoked\n", args[0])
			return nil
		},
	}
	var js cmdutil.JSONFlags
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the tokens (names, roles, dates; never the tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return printServeRows(cmd.Context(), f, dbSpec, js, (*server.DB).Tokens, server.TokenHeader, server.TokenInfo.Cells)
		},
	}
	cmdutil.AddJSONFlags(ls.Flags(), &js, "print JSON")
	for _, c := range []*cobra.Command{create, revoke, ls} {
		c.Flags().StringVar(&dbSpec, "db", "", "the server's database (as serve --db)")
		cmd.AddCommand(c)
	}
	return cmd
}

func newServeAuditCmd(f *factory.Factory) *cobra.Command {
	var js cmdutil.JSONFlags
	var dbSpec string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "The server's audit log: who did what, allowed or refused",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return printServeRows(cmd.Context(), f, dbSpec, js, (*server.DB).AuditLog, server.AuditHeader, server.AuditEntry.Cells)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &js, "print JSON")
	cmd.Flags().StringVar(&dbSpec, "db", "", "the server's database (as serve --db)")
	return cmd
}

// printServeRows prints what read gives of the server's database (--db).
func printServeRows[T any](ctx context.Context, f *factory.Factory, dbSpec string, js cmdutil.JSONFlags,
	read func(*server.DB, context.Context) ([]T, error), header []string, cells func(T) []string) error {
	db, err := server.OpenSpec(ctx, dbSpec, f.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := read(db, ctx)
	if err != nil {
		return err
	}
	return cmdutil.PrintRows(f.IO.Out, js, rows, header, cells)
}
