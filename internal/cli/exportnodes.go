package cli

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/nodes"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/shell"
)

// natNote is what vast's network allows, said wherever nodes are exported
// for engines that connect them to each other.
const natNote = `vast.ai nodes on different machines sit behind NAT with random mapped ports:
all-to-all engines (MPI, NCCL, Ray) need the nodes on one physical cluster
(a vast overlay network) or hosts without NAT; hub-and-spoke work (every node
talks only to this machine or to a server you run) needs neither.`

// sshArgs is the OpenSSH command line for a node, using the fleet key and
// the host key vastfleet recorded for the instance.
func sshArgs(k *nodes.Key, n nodes.Node) []string {
	return []string{"-i", k.Path, "-o", "IdentitiesOnly=yes", "-p", strconv.Itoa(n.Port),
		"-o", "HostKeyAlias=" + nodes.HostKeyAlias(n.ID), "-o", "UserKnownHostsFile=" + k.KnownHosts,
		"-o", "StrictHostKeyChecking=accept-new", "root@" + n.Host}
}

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
func newSSHCmd(f *factory, runF func(context.Context, *sshOptions) error) *cobra.Command {
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
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return sshRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Print, "print", false, "print the OpenSSH command instead of running it")
	return cmd
}

// sshRun is `ssh` once its flags are parsed.
func sshRun(ctx context.Context, f *factory, opts *sshOptions) error {
	ns, p, err := f.selectNodes(ctx, "", false, []string{opts.ID}, !opts.Print)
	if err != nil {
		return err
	}
	key, err := f.fleetKey()
	if err != nil {
		return err
	}
	argv := append(sshArgs(key, ns[0]), opts.Command...)
	if opts.Print {
		fmt.Fprintln(f.io.Out, "ssh "+shell.Join(argv))
		return nil
	}
	// Learn the host key and attach the fleet key in-process first,
	// so OpenSSH meets a known host that accepts its key.
	rows, err := execOnNodes(ctx, f, p, ns, "true", 1, 0, "", true)
	if err != nil {
		return err
	}
	if rows[0].Error != "" {
		return fmt.Errorf("%s", rows[0].Error)
	}
	c := exec.CommandContext(ctx, "ssh", argv...)
	c.Stdin, c.Stdout, c.Stderr = f.io.In, f.io.Out, f.io.ErrOut
	if err := c.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return fmt.Errorf("ssh exited with status %d", ee.ExitCode())
		}
		return err
	}
	return nil
}

// exportNodes writes a fleet in a format other engines read.
func exportNodes(ctx context.Context, f *factory, w io.Writer, format, fleetName string, ids []string, mpich bool, script string) error {
	ns, _, err := f.selectNodes(ctx, fleetName, fleetName == "" && len(ids) == 0, ids, false)
	if err != nil {
		return err
	}
	comment := "# " + strings.ReplaceAll(natNote, "\n", "\n# ") + "\n"
	switch format {
	case "ssh-config":
		k, err := f.fleetKey()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# vastfleet: %d nodes. Include this file from ~/.ssh/config (Include PATH), then `ssh %s`.\n%s", len(ns), ns[0].Name, comment)
		for _, n := range ns {
			fmt.Fprintf(w, "\nHost %s\n  HostName %s\n  Port %d\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  HostKeyAlias %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking accept-new\n  ServerAliveInterval 30\n  ServerAliveCountMax 3\n",
				n.Name, n.Host, n.Port, k.Path, nodes.HostKeyAlias(n.ID), k.KnownHosts)
		}
	case "hostfile":
		// Host names are the ssh-config aliases: each node's address and port
		// live there, and mpirun reaches nodes through ssh.
		fmt.Fprintf(w, "# hosts are the aliases of `vastfleet export --format ssh-config`; include that file from ~/.ssh/config\n%s", comment)
		for _, n := range ns {
			slots := n.NumGPU
			if slots == 0 {
				slots = max(int(n.CPUs), 1)
			}
			if mpich {
				fmt.Fprintf(w, "%s:%d\n", n.Name, slots)
			} else {
				fmt.Fprintf(w, "%s slots=%d\n", n.Name, slots)
			}
		}
	case "env":
		for _, n := range ns {
			fmt.Fprintf(w, "# %s (instance %d)\n%s\n", n.Name, n.ID, strings.ReplaceAll(remote.WithEnv(nodes.RankEnv(ns, n), ""), "; ", "\n"))
		}
	case "torchrun":
		fmt.Fprint(w, comment)
		for _, n := range ns {
			fmt.Fprintf(w, "%s: torchrun --nnodes=%d --node_rank=%d --nproc_per_node=%d --master_addr=%s --master_port=29500 %s\n",
				n.Name, len(ns), n.Rank, max(n.NumGPU, 1), ns[0].Host, script)
		}
	default:
		return usagef("--format %q: use vast-instances, ssh-config, hostfile, env or torchrun", format)
	}
	return nil
}
