package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/provider"
)

func newBalanceCmd(f *factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "balance",
		Short: "The account's credit balance",
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.Provider(cmd.Context())
			if err != nil {
				return err
			}
			u, err := p.CurrentUser(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.io.Out, u)
			}
			fmt.Fprintf(f.io.Out, "account %d (%s): balance $%.2f, credit $%.2f\n", u.ID, termSafe(u.Username), u.Balance, u.Credit)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newLogsCmd(f *factory) *cobra.Command {
	var tail int
	var asJSON bool
	var nodeSel, session string
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
			if tail < 0 {
				return usagef("--tail %d: must be 0 (all) or more", tail)
			}
			if _, err := strconv.ParseInt(args[0], 10, 64); err != nil {
				return jobLogs(cmd.Context(), f, args[0], nodeSel, session, tail, asJSON)
			}
			if nodeSel != "" || session != "" {
				return usagef("--node and --session go with a job (vastfleet logs JOB); %s is an instance id", args[0])
			}
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			op, err := f.operator(cmd.Context())
			if err != nil {
				return err
			}
			text, err := op.InstanceLogs(cmd.Context(), ids[0], tail)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.io.Out, map[string]any{"id": ids[0], "log": text})
			}
			_, err = fmt.Fprint(f.io.Out, text)
			return err
		},
	}
	cmd.Flags().IntVar(&tail, "tail", 200, "last N lines (0: all)")
	cmd.Flags().StringVar(&nodeSel, "node", "", "with JOB: only this node (rank, node-RANK or instance id)")
	cmd.Flags().StringVar(&session, "session", "", "with JOB: only this session's log (default: every session's)")
	limitFlags(cmd.Flags(), bounds{"tail", "0", "1000000"})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// operator is the marketplace client's instance operations (logs,
// execute), which every client here has.
func (f *factory) operator(ctx context.Context) (provider.Operator, error) {
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, err
	}
	op, ok := p.(provider.Operator)
	if !ok {
		return nil, fmt.Errorf("this marketplace client cannot fetch logs")
	}
	return op, nil
}

func newSSHURLCmd(f *factory) *cobra.Command { return newRouteURLCmd(f, "ssh") }

// newSCPURLCmd is `scp-url ID`: the same route as ssh-url, as scp://.
func newSCPURLCmd(f *factory) *cobra.Command { return newRouteURLCmd(f, "scp") }

func newRouteURLCmd(f *factory, scheme string) *cobra.Command {
	urlOf := provider.SSHURL
	if scheme == "scp" {
		urlOf = provider.SCPURL
	}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   scheme + "-url ID",
		Short: "An instance's " + scheme + "://root@HOST:PORT, derived as the vastai CLI does",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			p, err := f.Provider(cmd.Context())
			if err != nil {
				return err
			}
			inst, err := p.ShowInstance(cmd.Context(), ids[0])
			if errors.Is(err, provider.ErrNotFound) {
				return usagef("instance %d: not found on the marketplace (see `vastfleet ls`)", ids[0])
			}
			if err != nil {
				return fmt.Errorf("instance %d: %w", ids[0], err)
			}
			host, port, ok := provider.SSHAddr(inst)
			if !ok {
				return fmt.Errorf("instance %d has no ssh address yet (state %q): try again once it runs", ids[0], inst.Status())
			}
			if asJSON {
				return writeJSON(f.io.Out, map[string]any{"id": ids[0], scheme + "_url": urlOf(inst), "ssh_host": host, "ssh_port": port})
			}
			_, err = fmt.Fprintln(f.io.Out, urlOf(inst))
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
