package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/shell"
)

// sshOptions is what `ssh` was asked.
type sshOptions struct {
	// ID is the instance (one: exec takes several).
	ID string
	// Command is what follows --, run instead of a shell.
	Command []string
	Print   bool
}

// newSSHCmd parses into sshOptions and hands them to runF (tests) or
// sshRun; anything but one ID before -- is a usage error.
func newSSHCmd(f *factory.Factory, runF func(context.Context, *sshOptions) error) *cobra.Command {
	opts := &sshOptions{}
	cmd := &cobra.Command{
		Use:   "ssh ID [--print] [-- CMD]",
		Short: "Open a shell on an instance with OpenSSH (or --print the command)",
		Long: `Connects with the fleet key (attached to the instance first when it lacks it)
and the host key recorded for the instance, through the system ssh client, so
a terminal behaves as it always does. --print prints the command instead.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			ids, rest := args, []string(nil)
			if dash >= 0 {
				ids, rest = args[:dash], args[dash:]
			}
			if len(ids) != 1 {
				return usagef("ssh takes one instance ID (use exec for several)")
			}
			opts.ID, opts.Command = ids[0], rest
			return run(cmd, f, opts, runF, sshRun)
		},
	}
	cmd.Flags().BoolVar(&opts.Print, "print", false, "print the OpenSSH command instead of running it")
	return withNeeds(f, cmd, func([]string) factory.Needs { return factory.Needs{SimHosts: !opts.Print} })
}

// sshRun is `ssh` once its flags are parsed.
func sshRun(ctx context.Context, f *factory.Factory, opts *sshOptions) error {
	ns, p, err := selectNodes(ctx, f, "", false, []string{opts.ID})
	if err != nil {
		return err
	}
	key, err := f.FleetKey()
	if err != nil {
		return err
	}
	argv := append(nodes.SSHArgs(key, ns[0]), opts.Command...)
	if opts.Print {
		fmt.Fprintln(f.IO.Out, "ssh "+shell.Join(argv))
		return nil
	}
	o, err := f.NodeOps(p, 1)
	if err != nil {
		return err
	}
	return o.OpenSSH(ctx, ns[0], argv, f.IO.In, f.IO.Out, f.IO.ErrOut)
}

// exportNodes writes a fleet in a format other engines read.
func exportNodes(ctx context.Context, f *factory.Factory, w io.Writer, format, fleetName string, ids []string, mpich bool, script string) error {
	ns, _, err := selectNodes(ctx, f, fleetName, fleetName == "" && len(ids) == 0, ids)
	if err != nil {
		return err
	}
	return nodes.AsUsage(nodes.Export(w, ns, nodes.ExportOptions{Format: format, Key: f.FleetKey, Mpich: mpich, Script: script}))
}
