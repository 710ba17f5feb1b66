package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/shell"
)

type demoOptions struct {
	Count   int
	Prefix  string
	Seconds float64
	Keep    bool
	JSONFlags
	// DataDirGiven and SimSpeedGiven say the user typed --data-dir and
	// --sim-speed: the demo otherwise picks a fresh data dir and its
	// own speed.
	DataDirGiven, SimSpeedGiven bool
}

// newDemoCmd parses into demoOptions and hands them to runF (tests) or
// demoRun; a --prefix that is not hex is a usage error.
func newDemoCmd(f *factory, runF func(context.Context, *demoOptions) error) *cobra.Command {
	opts := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo [--count 50]",
		Short: "The whole story on the simulated marketplace: rank, launch parked with backfill, run a search, watch, collect, destroy, report",
		Long: `Runs a job on the built-in simulated marketplace, in a fresh data dir (or
--data-dir), with nothing to install: offers ranked by vCPU per $/hr,
--count instances launched parked and released together, failed boots
replaced, the agent on every instance running a real CPU job (searching
for sha256 hashes that start with --prefix) that reports its hash rate
and every hash it finds to the coordinator, whose dashboard link is
printed; then results are collected, every instance destroyed and the
cost report printed. The simulated instances run on this machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := hex.DecodeString(opts.Prefix + strings.Repeat("0", len(opts.Prefix)%2)); err != nil || len(opts.Prefix) > 16 {
				return usagef("--prefix %q: want up to 16 hex digits", opts.Prefix)
			}
			opts.DataDirGiven = cmd.Flags().Changed("data-dir")
			opts.SimSpeedGiven = cmd.Flags().Changed("sim-speed")
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Count, "count", 50, "instances to launch")
	fl.StringVar(&opts.Prefix, "prefix", "0000", "hex prefix the searched hashes start with")
	fl.Float64Var(&opts.Seconds, "seconds", 6, "how long each node searches (wall seconds)")
	fl.BoolVar(&opts.Keep, "keep", false, "keep the demo's data dir (its store, results and reports) and print where it is")
	addJSONFlags(fl, &opts.JSONFlags, "print the cost report as JSON")
	limitFlags(fl, bounds{"count", "1", "200"}, bounds{"seconds", ">0", "3600"})
	return cmd
}

// demoRun is `demo` once its flags are parsed.
func demoRun(ctx context.Context, f *factory, opts *demoOptions) error {
	if f.opts.Market != "sim" {
		return usagef("the demo runs on the simulated marketplace only (drop --market %s)", f.opts.Market)
	}
	scratch := !opts.DataDirGiven && !opts.Keep // the data dir goes when the demo ends
	if !opts.DataDirGiven {
		dir, err := os.MkdirTemp("", "vastfleet-demo-")
		if err != nil {
			return err
		}
		f.opts.DataDir = dir
	}
	if !opts.SimSpeedGiven {
		f.opts.SimSpeed = 40 // a simulated minute per 1.5 s: API calls take wall time, and boots must fit the deadline
	}
	dir, err := f.dataDir()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "demo.yaml")
	task := fmt.Sprintf(`# written by vastfleet demo
name: demo
query: "rentable=True cpu_cores_effective>=4"
by: vcpu
count: %d
park: true
deadline: 45m
image: ubuntu:22.04
run: nice -n 5 %s hashwork --prefix %s --seconds %g
verify: exec %s hashcheck --prefix %s
results: /workspace/project/results
max_duration: 2h
`, opts.Count, shell.Quote(self), opts.Prefix, opts.Seconds, shell.Quote(self), opts.Prefix)
	if err := os.WriteFile(file, []byte(task), 0o600); err != nil {
		return err
	}
	job, err := jobfile.Load(file)
	if err != nil {
		return err
	}
	w := f.io.ErrOut
	fmt.Fprintf(w, "vastfleet demo: %d instances on the simulated marketplace, each searching sha256 hashes that start with %q for %gs\n", opts.Count, opts.Prefix, opts.Seconds)
	if scratch {
		fmt.Fprintf(w, "  in a temporary data dir, removed at the end (--keep keeps it: store, results, findings, reports)\n")
		// Lines that name a path in it, or a command that reads it, would
		// point at nothing once it is gone.
		// (Not the JSON, which must stay whole, nor a terminal's stderr,
		// which the live view must see as the terminal it is.)
		out, errOut := f.io.Out, f.io.ErrOut
		if !opts.JSON {
			f.io.Out = &scratchFilter{w: out, dir: dir}
		}
		if !f.io.ErrTTY {
			f.io.ErrOut = &scratchFilter{w: errOut, dir: dir}
		}
		defer func() { f.io.Out, f.io.ErrOut = out, errOut }()
	} else {
		fmt.Fprintf(w, "  data dir %s; the task file it runs: %s\n", dir, file)
	}
	fmt.Fprintf(w, "  1. rank every offer by vCPU per $/hr  2. launch parked, replace failed boots, release together\n")
	fmt.Fprintf(w, "  3. the agent on every node runs the search and reports hashes/s and findings  4. collect, destroy, cost report\n")
	uo := &upOptions{CoordAddr: "127.0.0.1:0", ResultsDir: filepath.Join(dir, "results"), OnInterrupt: upCollect, JSONFlags: opts.JSONFlags, poll: 250 * time.Millisecond}
	rep, err := upRun(ctx, f, uo, job, file)
	if err != nil && scratch {
		// Whatever went wrong, the store knows what was rented: it stays.
		err = fmt.Errorf("%w (the demo's data dir %s is kept)", err, dir)
	}
	if rep != nil && opts.JSON {
		if jerr := writeJSON(opts.out(f.io.Out), rep); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		return err
	}
	if rep != nil && rep.Live > 0 {
		// The store knows those instances: it stays, whatever --keep says.
		return fmt.Errorf("%d instance(s) still live: `vastfleet --data-dir %s down %s`", rep.Live, dir, rep.Job)
	}
	if scratch {
		f.Close() // the market and store live in it
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if rep == nil || rep.Findings == 0 {
		return fmt.Errorf("the demo found no hashes (try a shorter --prefix or more --seconds)")
	}
	if !scratch {
		fmt.Fprintf(w, "kept %s: try `vastfleet --data-dir %s cost --fleet %s` or `status`\n", dir, dir, rep.Job)
	}
	return nil
}

// scratchFilter passes whole lines on, leaving out those that name a path
// in dir or a vastfleet command to run later: the demo removes dir.
type scratchFilter struct {
	w   io.Writer
	dir string
	buf []byte
}

func (s *scratchFilter) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := trimHint(s.buf[:i+1])
		if !bytes.Contains(line, []byte(s.dir)) && !bytes.Contains(line, []byte("`vastfleet ")) {
			if _, err := s.w.Write(line); err != nil {
				return 0, err
			}
		}
		s.buf = s.buf[i+1:]
	}
}

// trimHint drops a trailing "; ... `vastfleet ...`" clause from a line
// that says something else first (the charged line's reconcile hint),
// so the figure stays when the command that would read the gone data
// dir goes. A line that is only a hint is left whole, for the caller to
// drop.
func trimHint(line []byte) []byte {
	i := bytes.Index(line, []byte("`vastfleet "))
	if i < 0 {
		return line
	}
	j := bytes.LastIndex(line[:i], []byte("; "))
	k := bytes.IndexByte(line[i+1:], '`')
	if j < 0 || k < 0 {
		return line
	}
	return append(slices.Clip(line[:j]), line[i+1+k+1:]...)
}

// newHashcheckCmd is the demo's verify command: the coordinator runs it on
// each finding (its JSON on stdin), which it accepts only when the hash is
// the input's sha256 and starts with --prefix, so a node cannot report
// hashes it did not find.
func newHashcheckCmd(f *factory) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:    "hashcheck --prefix HEX < finding.json",
		Short:  "The demo's verify command: re-hash a finding",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var found struct {
				Input  string `json:"input"`
				SHA256 string `json:"sha256"`
			}
			if err := json.NewDecoder(io.LimitReader(f.io.In, 1<<20)).Decode(&found); err != nil {
				return fmt.Errorf("hashcheck: the finding on stdin: %w", err)
			}
			sum := sha256.Sum256([]byte(found.Input))
			if got := hex.EncodeToString(sum[:]); got != found.SHA256 || !strings.HasPrefix(got, strings.ToLower(prefix)) {
				return fmt.Errorf("hashcheck: sha256(%q) is %s, not the reported %q with prefix %q", found.Input, got, found.SHA256, prefix)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "hex prefix every hash must start with")
	return cmd
}

// newHashworkCmd is the demo's CPU job: sha256 of "<node>-<n>" for n = 0,
// 1, ... until --seconds pass, printing the hash rate as a metric line
// and every hash that starts with --prefix as a finding (and into
// results/found.txt).
func newHashworkCmd(f *factory, runF func(context.Context, *hashworkOptions) error) *cobra.Command {
	opts := &hashworkOptions{}
	cmd := &cobra.Command{
		Use:    "hashwork --prefix HEX --seconds S",
		Short:  "The demo's CPU job: search sha256 hashes with a prefix",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return hashworkRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "000", "hex prefix")
	cmd.Flags().Float64Var(&opts.Seconds, "seconds", 5, "how long to search")
	limitFlags(cmd.Flags(), bounds{"seconds", ">0", "86400"})
	return cmd
}

// hashworkOptions is what `hashwork` was asked.
type hashworkOptions struct {
	Prefix  string
	Seconds float64
}

// hashworkRun is `hashwork` once its flags are parsed: the search, as the
// node named by $VASTFLEET_NODE_NAME, findings into results/found.txt.
func hashworkRun(ctx context.Context, f *factory, opts *hashworkOptions) error {
	node := os.Getenv("VASTFLEET_NODE_NAME")
	if node == "" {
		node = "node-" + strconv.Itoa(os.Getpid())
	}
	if err := os.MkdirAll("results", 0o755); err != nil {
		return err
	}
	found, err := os.OpenFile(filepath.Join("results", "found.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer found.Close()
	out := bufio.NewWriter(f.io.Out)
	defer out.Flush()
	return hashwork(ctx, node, strings.ToLower(opts.Prefix), time.Duration(opts.Seconds*float64(time.Second)), out, found)
}

func hashwork(ctx context.Context, node, prefix string, d time.Duration, out *bufio.Writer, found *os.File) error {
	start := time.Now()
	last, lastN := start, 0
	buf := make([]byte, 0, 64)
	var hexBuf [64]byte
	for n := 0; ; n++ {
		buf = strconv.AppendInt(append(append(buf[:0], node...), '-'), int64(n), 10)
		sum := sha256.Sum256(buf)
		hex.Encode(hexBuf[:], sum[:])
		if strings.HasPrefix(string(hexBuf[:len(prefix)]), prefix) {
			line, _ := json.Marshal(map[string]any{"found": map[string]string{"input": string(buf), "sha256": string(hexBuf[:])}})
			out.Write(line)
			out.WriteByte('\n')
			fmt.Fprintf(found, "%s %s\n", hexBuf[:], buf)
		}
		if n%4096 == 0 {
			now := time.Now()
			if now.Sub(last) >= 500*time.Millisecond {
				fmt.Fprintf(out, "{\"metric\":\"hashes_per_s\",\"value\":%.0f}\n", float64(n-lastN)/now.Sub(last).Seconds())
				out.Flush()
				last, lastN = now, n
			}
			if now.Sub(start) >= d || ctx.Err() != nil {
				fmt.Fprintf(out, "%d hashes in %s\n", n, now.Sub(start).Round(time.Millisecond))
				return ctx.Err()
			}
		}
	}
}
