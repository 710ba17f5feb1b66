package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// balanceOptions is what `balance` was asked.
type balanceOptions struct {
	cmdutil.JSONFlags
}

// newBalanceCmd parses into balanceOptions and hands them to runF (tests)
// or balanceRun.
func newBalanceCmd(f *factory.Factory, runF func(context.Context, *balanceOptions) error) *cobra.Command {
	opts := &balanceOptions{}
	cmd := &cobra.Command{
		Use:   "balance",
		Short: "The account's credit balance",
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, f, opts, runF, balanceRun)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// balanceRun is `balance` once its flags are parsed.
func balanceRun(ctx context.Context, f *factory.Factory, opts *balanceOptions) error {
	p, err := f.Provider(ctx)
	if err != nil {
		return err
	}
	u, err := p.CurrentUser(ctx)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), u)
	}
	fmt.Fprintf(f.IO.Out, "account %d (%s): balance $%.2f, credit $%.2f\n", u.ID, termSafe(u.Username), u.Balance, u.Credit)
	return nil
}

// logsOptions is what `logs` was asked.
type logsOptions struct {
	// Target is the instance id or the job (the positional ID|JOB).
	Target string
	// InstanceID is Target's instance; 0 when Target names a job.
	InstanceID int64
	Tail       int
	Node       string
	Session    string
	cmdutil.JSONFlags
}

// newLogsCmd parses into logsOptions and hands them to runF (tests) or
// logsRun; --node and --session with an instance id are a usage error.
func newLogsCmd(f *factory.Factory, runF func(context.Context, *logsOptions) error) *cobra.Command {
	opts := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs ID|JOB",
		Short: "An instance's container log, or a job's session logs from each of its nodes",
		Long: `logs ID prints an instance's container log as the marketplace keeps it
(vast.ai keeps it for stopped instances too).

logs JOB prints the job's session logs from each node that ran it (the
agent's logs in ~/.vastfleet/logs/ on the node, read over SSH), headed by
the node; a node that does not answer gives its container log instead.
--node picks one node (its rank, node-RANK or its instance id) and
--session one session (run is the task file's run command).`,
		Example: `  vastfleet logs 4711
  vastfleet logs sweep-20261203-064837 --node 2 --session run --tail 50`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Tail < 0 {
				return usagef("--tail %d: must be 0 (all) or more", opts.Tail)
			}
			opts.Target, opts.InstanceID = args[0], 0
			if _, err := strconv.ParseInt(args[0], 10, 64); err == nil {
				if opts.Node != "" || opts.Session != "" {
					return usagef("--node and --session go with a job (vastfleet logs JOB); %s is an instance id", args[0])
				}
				ids, err := parseIDs(args)
				if err != nil {
					return err
				}
				opts.InstanceID = ids[0]
			}
			return run(cmd, f, opts, runF, logsRun)
		},
	}
	cmd.Flags().IntVar(&opts.Tail, "tail", 200, "last N lines (0: all)")
	cmd.Flags().StringVar(&opts.Node, "node", "", "with JOB: only this node (rank, node-RANK or instance id)")
	cmd.Flags().StringVar(&opts.Session, "session", "", "with JOB: only this session's log (default: every session's)")
	limitFlags(cmd.Flags(), bounds{"tail", "0", "1000000"})
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	// A job's session logs are read over SSH.
	return withNeeds(f, cmd, func(args []string) factory.Needs {
		_, err := strconv.ParseInt(strings.Join(args, " "), 10, 64)
		return factory.Needs{SimHosts: err != nil}
	})
}

// logsRun is `logs` once its flags are parsed: a job's session logs or an
// instance's container log.
func logsRun(ctx context.Context, f *factory.Factory, opts *logsOptions) error {
	if opts.InstanceID == 0 {
		return jobLogs(ctx, f, opts.Target, opts.Node, opts.Session, opts.Tail, opts.JSONFlags)
	}
	op, err := f.Operator(ctx)
	if err != nil {
		return err
	}
	text, err := op.InstanceLogs(ctx, opts.InstanceID, opts.Tail)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), map[string]any{"id": opts.InstanceID, "log": text})
	}
	_, err = fmt.Fprint(f.IO.Out, termsafe.Text(text))
	return err
}

func newSSHURLCmd(f *factory.Factory, runF func(context.Context, *routeURLOptions) error) *cobra.Command {
	return newRouteURLCmd(f, "ssh", runF)
}

// newSCPURLCmd is `scp-url ID`: the same route as ssh-url, as scp://.
func newSCPURLCmd(f *factory.Factory, runF func(context.Context, *routeURLOptions) error) *cobra.Command {
	return newRouteURLCmd(f, "scp", runF)
}

// routeURLOptions is what `ssh-url` or `scp-url` was asked.
type routeURLOptions struct {
	// Scheme is ssh or scp.
	Scheme string
	ID     int64
	cmdutil.JSONFlags
}

// newRouteURLCmd is `ssh-url` or `scp-url` (scheme): it parses into
// routeURLOptions and hands them to runF (tests) or routeURLRun.
func newRouteURLCmd(f *factory.Factory, scheme string, runF func(context.Context, *routeURLOptions) error) *cobra.Command {
	opts := &routeURLOptions{Scheme: scheme}
	cmd := &cobra.Command{
		Use:   scheme + "-url ID",
		Short: "An instance's " + scheme + "://root@HOST:PORT, derived as the vastai CLI does",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			opts.ID = ids[0]
			return run(cmd, f, opts, runF, routeURLRun)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// routeURLRun is `ssh-url` or `scp-url` once its flags are parsed.
func routeURLRun(ctx context.Context, f *factory.Factory, opts *routeURLOptions) error {
	scheme, id := opts.Scheme, opts.ID
	p, err := f.Provider(ctx)
	if err != nil {
		return err
	}
	r, err := nodes.RouteOf(ctx, p, id, scheme)
	if err != nil {
		return nodes.AsUsage(err)
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), map[string]any{"id": id, scheme + "_url": r.URL, "ssh_host": r.Host, "ssh_port": r.Port})
	}
	_, err = fmt.Fprintln(f.IO.Out, r.URL)
	return err
}
