package nodes

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vastfleet/vastfleet/internal/remote"
)

// natNote is what vast's network allows, said wherever nodes are exported
// for engines that connect them to each other.
const natNote = `vast.ai nodes on different machines sit behind NAT with random mapped ports:
all-to-all engines (MPI, NCCL, Ray) need the nodes on one physical cluster
(a vast overlay network) or hosts without NAT; hub-and-spoke work (every node
talks only to this machine or to a server you run) needs neither.`

// SSHArgs is the OpenSSH command line for a node, using the fleet key and
// the host key vastfleet recorded for the instance.
func SSHArgs(k *Key, n Node) []string {
	return []string{"-i", k.Path, "-o", "IdentitiesOnly=yes", "-p", strconv.Itoa(n.Port),
		"-o", "HostKeyAlias=" + HostKeyAlias(n.ID), "-o", "UserKnownHostsFile=" + k.KnownHosts,
		"-o", "StrictHostKeyChecking=accept-new", "root@" + n.Host}
}

// ExportOptions say how Export writes the nodes.
type ExportOptions struct {
	// Format is ssh-config, hostfile, env or torchrun.
	Format string
	// Key gives the fleet key, which only ssh-config names.
	Key func() (*Key, error)
	// Mpich writes the hostfile as host:N instead of Open MPI's host slots=N.
	Mpich bool
	// Script is what torchrun lines run.
	Script string
}

// Export writes the nodes ns in a format other engines read.
func Export(w io.Writer, ns []Node, o ExportOptions) error {
	comment := "# " + strings.ReplaceAll(natNote, "\n", "\n# ") + "\n"
	switch o.Format {
	case "ssh-config":
		k, err := o.Key()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# vastfleet: %d nodes. Include this file from ~/.ssh/config (Include PATH), then `ssh %s`.\n%s", len(ns), ns[0].Name, comment)
		for _, n := range ns {
			fmt.Fprintf(w, "\nHost %s\n  HostName %s\n  Port %d\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  HostKeyAlias %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking accept-new\n  ServerAliveInterval 30\n  ServerAliveCountMax 3\n",
				n.Name, n.Host, n.Port, k.Path, HostKeyAlias(n.ID), k.KnownHosts)
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
			if o.Mpich {
				fmt.Fprintf(w, "%s:%d\n", n.Name, slots)
			} else {
				fmt.Fprintf(w, "%s slots=%d\n", n.Name, slots)
			}
		}
	case "env":
		for _, n := range ns {
			fmt.Fprintf(w, "# %s (instance %d)\n%s\n", n.Name, n.ID, strings.ReplaceAll(remote.WithEnv(RankEnv(ns, n), ""), "; ", "\n"))
		}
	case "torchrun":
		fmt.Fprint(w, comment)
		for _, n := range ns {
			fmt.Fprintf(w, "%s: torchrun --nnodes=%d --node_rank=%d --nproc_per_node=%d --master_addr=%s --master_port=29500 %s\n",
				n.Name, len(ns), n.Rank, max(n.NumGPU, 1), ns[0].Host, o.Script)
		}
	default:
		return &UsageError{fmt.Sprintf("--format %q: use vast-instances, ssh-config, hostfile, env or torchrun", o.Format)}
	}
	return nil
}
