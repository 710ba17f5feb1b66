package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/sshkey"
	"github.com/vastfleet/vastfleet/internal/store"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// node is one instance reached over SSH, with its place in the fleet.
type node struct {
	Name   string // <fleet>-node-<rank>, the ssh-config alias
	Rank   int
	ID     int64
	Host   string
	Port   int
	NumGPU int
	CPUs   float64
}

// fleetKey is vastfleet's own key pair, generated once in the data dir.
type fleetKey struct {
	signer     ssh.Signer
	path       string // private key file, for OpenSSH's -i
	authorized string // the public key as one authorized_keys line
	knownHosts string // host keys learned per instance (HostKeyAlias vastfleet-ID)
	mu         sync.Mutex
}

func (f *factory) fleetKey() (*fleetKey, error) {
	dir, err := f.dataDir()
	if err != nil {
		return nil, err
	}
	sshDir := filepath.Join(dir, "ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(sshDir, "id_ed25519")
	signer, err := sshkey.LoadOrCreate(path, "vastfleet")
	if err != nil {
		return nil, fmt.Errorf("fleet key: %w", err)
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " vastfleet"
	if err := atomicfile.WriteFile(path+".pub", []byte(pub+"\n"), 0o600); err != nil {
		return nil, err
	}
	return &fleetKey{signer: signer, path: path, authorized: pub, knownHosts: filepath.Join(sshDir, "known_hosts")}, nil
}

func hostKeyAlias(id int64) string { return "vastfleet-" + strconv.FormatInt(id, 10) }

// hostKeys reads the known_hosts file: the key each instance showed first.
func (k *fleetKey) hostKeys() (map[string]ssh.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := map[string]ssh.PublicKey{}
	b, err := os.ReadFile(k.knownHosts)
	if errors.Is(err, os.ErrNotExist) {
		return keys, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		alias, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rest)); err == nil {
			keys[alias] = pk
		}
	}
	return keys, nil
}

// remember appends an instance's first host key (accept-new), in OpenSSH's
// known_hosts format so exported ssh configs verify the same key.
func (k *fleetKey) remember(id int64, key ssh.PublicKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	fh, err := os.OpenFile(k.knownHosts, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(fh, "%s %s", hostKeyAlias(id), ssh.MarshalAuthorizedKey(key))
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// nodeTargets is which nodes a fan-out command acts on: a fleet's live
// instances, every live instance, or the instance ids given.
type nodeTargets struct {
	Fleet string
	All   bool
	IDs   []string
}

// register adds --fleet and --all, and --id where the ids are not the
// command's arguments; verb completes the help ("sync to").
func (n *nodeTargets) register(fl *pflag.FlagSet, verb string, idFlag bool) {
	fl.StringVar(&n.Fleet, "fleet", "", verb+" this fleet's live instances")
	fl.BoolVar(&n.All, "all", false, verb+" every live instance")
	if idFlag {
		fl.StringSliceVar(&n.IDs, "id", nil, verb+" these instance IDs")
	}
}

func (n *nodeTargets) resolve(ctx context.Context, f *factory) ([]node, provider.Provider, error) {
	return f.selectNodes(ctx, n.Fleet, n.All, n.IDs, true)
}

// selectNodes resolves --fleet/--all/IDs to running instances with an SSH
// route, ranked by instance id so ranks are stable across commands.
// reach turns on the in-process simulator's machines, for commands that
// connect to the nodes.
func (f *factory) selectNodes(ctx context.Context, fleetName string, all bool, args []string, reach bool) ([]node, provider.Provider, error) {
	ids, err := parseIDs(args)
	if err != nil {
		return nil, nil, err
	}
	if (fleetName != "") == all && len(ids) == 0 || (len(ids) > 0 && (fleetName != "" || all)) {
		return nil, nil, usagef("name the nodes: --fleet F, --all, or instance IDs (one of them)")
	}
	if reach {
		f.simHosts = true
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Store(ctx, false, "")
	if err != nil {
		return nil, nil, err
	}
	recs, err := st.Instances(ctx, store.InstanceFilter{Fleet: fleetName})
	if err != nil {
		return nil, nil, err
	}
	if len(ids) > 0 {
		if err := knownIDs(ctx, st, ids); err != nil {
			return nil, nil, err
		}
		recs = slices.DeleteFunc(recs, func(r store.Instance) bool { return !slices.Contains(ids, r.ID) })
	}
	recs = slices.DeleteFunc(recs, func(r store.Instance) bool { return !r.GoneAt.IsZero() })
	if len(recs) == 0 {
		return nil, nil, fmt.Errorf("no live instances selected (see `vastfleet ls`)")
	}
	listing, err := p.ListInstances(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing instances for their ssh addresses: %w", err)
	}
	live := map[int64]provider.Instance{}
	for _, in := range listing.Instances {
		live[in.ID] = in
	}
	slices.SortFunc(recs, func(a, b store.Instance) int { return int(a.ID - b.ID) })
	var nodes []node
	for _, r := range recs {
		in, ok := live[r.ID]
		if !ok {
			return nil, nil, fmt.Errorf("instance %d is not in the marketplace's listing (run `vastfleet reconcile`)", r.ID)
		}
		host, port, ok := provider.SSHAddr(in)
		if !ok || in.ActualStatus == nil || *in.ActualStatus != "running" {
			return nil, nil, fmt.Errorf("instance %d has no ssh route yet (state %s); wait for it to run, or leave it out", r.ID, dash(r.State))
		}
		prefix := r.Fleet
		if prefix == "" {
			prefix = "vf"
		}
		nodes = append(nodes, node{Name: fmt.Sprintf("%s-node-%d", prefix, len(nodes)), Rank: len(nodes), ID: r.ID,
			Host: host, Port: port, NumGPU: in.NumGPUs, CPUs: in.CPUCoresEffective})
	}
	return nodes, p, nil
}

// rankEnv is what every node is told about its place in the fleet, as
// SkyPilot's SKYPILOT_NODE_RANK and friends.
func rankEnv(nodes []node, n node) map[string]string {
	ips := make([]string, len(nodes))
	for i, m := range nodes {
		ips[i] = m.Host
	}
	return map[string]string{
		"VASTFLEET_NODE_RANK":     strconv.Itoa(n.Rank),
		"VASTFLEET_NUM_NODES":     strconv.Itoa(len(nodes)),
		"VASTFLEET_NODE_IPS":      strings.Join(ips, "\n"),
		"VASTFLEET_MASTER_ADDR":   nodes[0].Host,
		"VASTFLEET_GPUS_PER_NODE": strconv.Itoa(n.NumGPU),
		"VASTFLEET_NODE_NAME":     n.Name,
	}
}

// sshSession runs jobs on nodes: the fleet key, host keys accepted once
// per instance, and the key attached to instances that lack it.
type sshSession struct {
	f    *factory
	p    provider.Provider
	key  *fleetKey
	pool *remote.Pool
}

func (f *factory) sshSession(ctx context.Context, p provider.Provider, parallel int) (*sshSession, error) {
	key, err := f.fleetKey()
	if err != nil {
		return nil, err
	}
	s := &sshSession{f: f, p: p, key: key}
	s.pool = remote.NewPool(remote.Options{
		MaxHandshakes: min(max(parallel, 1), 64),
		Jitter:        50 * time.Millisecond,
		OnNewHostKey: func(t remote.Target, k ssh.PublicKey) error {
			id, err := strconv.ParseInt(t.Name[strings.LastIndex(t.Name, "#")+1:], 10, 64)
			if err != nil {
				return err
			}
			return key.remember(id, k)
		},
	})
	f.closers = append(f.closers, s.pool.Close)
	return s, nil
}

func (s *sshSession) target(n node, known map[string]ssh.PublicKey) remote.Target {
	// The name carries the instance id after '#' for OnNewHostKey.
	return remote.Target{Name: fmt.Sprintf("%s #%d", n.Name, n.ID), Host: n.Host, Port: n.Port, User: "root",
		Signer: s.key.signer, HostKey: known[hostKeyAlias(n.ID)]}
}

// run runs jobs and, for nodes that refused the fleet key, attaches it
// through the marketplace and runs those again.
func (s *sshSession) run(ctx context.Context, nodes []node, jobs []remote.Job, parallel int) []remote.Result {
	res := s.pool.RunAll(ctx, jobs, parallel)
	km, ok := s.p.(provider.KeyManager)
	if !ok {
		return res
	}
	var again []int
	for i, r := range res {
		if errors.Is(r.Err, remote.ErrAuth) {
			if err := km.AttachSSHKey(ctx, nodes[i].ID, s.key.authorized); err != nil {
				res[i].Err = fmt.Errorf("%w; attaching the fleet key failed: %v", r.Err, err)
				continue
			}
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return res
	}
	retry := make([]remote.Job, len(again))
	for k, i := range again {
		retry[k] = jobs[i]
	}
	for k, r := range s.pool.RunAll(ctx, retry, parallel) {
		r.Duration += res[again[k]].Duration
		res[again[k]] = r
	}
	return res
}

// prefixWriter writes whole lines as "[name] line" to a shared output,
// safe for the terminal (termsafe.Text).
type prefixWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix string
	buf    bytes.Buffer
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(w.out, "%s%s", w.prefix, termsafe.Text(string(w.buf.Next(i+1)))); err != nil {
			return len(b), err
		}
	}
}

func (w *prefixWriter) flush() {
	if w.buf.Len() > 0 {
		w.mu.Lock()
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, termsafe.Text(w.buf.String()))
		w.mu.Unlock()
		w.buf.Reset()
	}
}

type execRow struct {
	Node       string  `json:"node"`
	ID         int64   `json:"id"`
	Rank       int     `json:"rank"`
	ExitCode   int     `json:"exit_code"`
	DurationS  float64 `json:"duration_s"`
	Error      string  `json:"error,omitempty"`
	OutputFile string  `json:"output_file,omitempty"`
}

// execOptions is what `exec` was asked: flags and arguments, parsed.
type execOptions struct {
	Nodes    nodeTargets
	Command  string
	Parallel int
	Timeout  time.Duration
	OutDir   string
	JSONFlags
}

// newExecCmd parses into execOptions and hands them to runF (tests) or
// execRun.
func newExecCmd(f *factory, runF func(context.Context, *execOptions) error) *cobra.Command {
	opts := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec (--fleet F | --all | ID...) [--parallel K] [--timeout D] [--out DIR] -- CMD",
		Short: "Run a command on every node over SSH, with rank variables; a table of exit codes",
		Long: `Runs CMD with sh on each node over one reused SSH connection per node. Each
node gets VASTFLEET_NODE_RANK, VASTFLEET_NUM_NODES, VASTFLEET_NODE_IPS
(newline-separated), VASTFLEET_MASTER_ADDR (rank 0's address),
VASTFLEET_GPUS_PER_NODE and VASTFLEET_NODE_NAME. Output is shown live,
each line prefixed with its node, or written to DIR/<node>.log with --out.
Exit status: 0 when every node exited 0, 3 when some failed, 1 when all did.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash < 0 || dash == len(args) {
				return usagef("give the command after --, e.g. vastfleet exec --fleet f -- nvidia-smi")
			}
			opts.Command = strings.Join(args[dash:], " ")
			opts.Nodes.IDs = args[:dash]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return execRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	opts.Nodes.register(fl, "run on", false)
	fl.IntVar(&opts.Parallel, "parallel", 64, "nodes at once")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "give up on a node after D (0: no limit)")
	limitFlags(fl, bounds{"parallel", "1", "1024"}, bounds{"timeout", "0", "720h"})
	fl.StringVar(&opts.OutDir, "out", "", "write each node's output to DIR/<node>.log instead of the terminal")
	addJSONFlags(fl, &opts.JSONFlags, "print the result table as JSON")
	return cmd
}

func execRun(ctx context.Context, f *factory, opts *execOptions) error {
	nodes, p, err := opts.Nodes.resolve(ctx, f)
	if err != nil {
		return err
	}
	rows, err := execOnNodes(ctx, f, p, nodes, opts.Command, opts.Parallel, opts.Timeout, opts.OutDir, opts.JSON)
	if err != nil {
		return err
	}
	return reportExec(f, rows, opts.JSONFlags)
}

func execOnNodes(ctx context.Context, f *factory, p provider.Provider, nodes []node, command string, parallel int, timeout time.Duration, outDir string, quiet bool) ([]execRow, error) {
	s, err := f.sshSession(ctx, p, parallel)
	if err != nil {
		return nil, err
	}
	known, err := s.key.hostKeys()
	if err != nil {
		return nil, err
	}
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	jobs := make([]remote.Job, len(nodes))
	var writers []*prefixWriter
	var files []*os.File
	for i, n := range nodes {
		j := remote.Job{Target: s.target(n, known), Cmd: remote.WithEnv(rankEnv(nodes, n), command), Timeout: timeout}
		switch {
		case outDir != "":
			fh, err := os.Create(filepath.Join(outDir, n.Name+".log"))
			if err != nil {
				return nil, err
			}
			files = append(files, fh)
			j.Stdout, j.Stderr = fh, fh
		case quiet:
			j.Stdout, j.Stderr = io.Discard, io.Discard
		default:
			w := &prefixWriter{mu: &mu, out: f.io.Out, prefix: "[" + n.Name + "] "}
			writers = append(writers, w)
			j.Stdout, j.Stderr = w, w
		}
		jobs[i] = j
	}
	res := s.run(ctx, nodes, jobs, parallel)
	for _, w := range writers {
		w.flush()
	}
	for _, fh := range files {
		fh.Close()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rows := make([]execRow, len(nodes))
	for i, r := range res {
		rows[i] = execRow{Node: nodes[i].Name, ID: nodes[i].ID, Rank: nodes[i].Rank, ExitCode: r.Exit,
			DurationS: r.Duration.Seconds()}
		if r.Err != nil {
			rows[i].Error = r.Err.Error()
		}
		if outDir != "" {
			rows[i].OutputFile = filepath.Join(outDir, nodes[i].Name+".log")
		}
	}
	return rows, nil
}

func reportExec(f *factory, rows []execRow, js JSONFlags) error {
	return reportNodes(f, "the command", rows, js, func(r execRow) bool { return r.ExitCode != 0 || r.Error != "" },
		[]string{"NODE", "ID", "EXIT", "DURATION", "ERROR"}, func(r execRow) []string {
			return []string{r.Node, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.ExitCode), fmt.Sprintf("%.2fs", r.DurationS), dash(r.Error)}
		})
}

// reportNodes prints what an operation did on each node, as JSON or as a
// table, and returns its outcome (fanOutError) from the rows that failed.
func reportNodes[R any](f *factory, what string, rows []R, js JSONFlags, failed func(R) bool, header []string, cells func(R) []string) error {
	n := 0
	for _, r := range rows {
		if failed(r) {
			n++
		}
	}
	if js.JSON {
		if err := writeJSON(js.out(f.io.Out), rows); err != nil {
			return err
		}
	} else {
		tw := newTable(f.io.Out, header...)
		for _, r := range rows {
			tw.row(cells(r)...)
		}
		if err := tw.flush(); err != nil {
			return err
		}
	}
	return fanOutError(what, n, len(rows))
}

// fanOutError is the outcome of one operation on many nodes: nil when every
// node succeeded, partial (exit 3) when some failed, an error when all did.
func fanOutError(what string, failed, total int) error {
	switch {
	case failed == 0:
		return nil
	case failed == total:
		return fmt.Errorf("%s failed on all %d nodes", what, failed)
	}
	return partialError{fmt.Errorf("%s failed on %d of %d nodes", what, failed, total)}
}
