// Package demo is `vastfleet demo`'s script: the task it writes, the
// run on the simulated marketplace in a scratch data dir, the output
// that stays true once that dir is gone, and the CPU job (hashwork) and
// its verify command (hashcheck) that the nodes run.
package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/shell"
)

// Options is what the demo was asked.
type Options struct {
	Count   int
	Prefix  string
	Seconds float64
	// By is the task's ranking ("": vcpu).
	By string
	// Keep keeps the data dir the demo made.
	Keep bool
	// JSON says the report goes out as JSON, which must stay whole.
	JSON bool
	// CullBelow, when above 0, gives the task a cull policy: a node
	// whose hashes_per_s per $/hr stays under that share of the median
	// after CullAfter of reports is destroyed.
	CullBelow float64
	CullAfter time.Duration
	// DataDirGiven says the user named the data dir: the demo then makes
	// none and removes nothing.
	DataDirGiven bool
}

// Deps is what the demo runs on.
type Deps struct {
	// Out and ErrOut are the command's streams, as Streams made them.
	Out, ErrOut io.Writer
	// Self is the vastfleet binary the nodes run hashwork with.
	Self string
	// DataDir is the data dir the commands use: the one NewDataDir made,
	// unless the user named one.
	DataDir func() (string, error)
	// Up runs the job from its task file, results under resultsDir.
	Up func(ctx context.Context, jf *jobfile.Job, file, resultsDir string) (*job.Report, error)
	// Print writes the report where it goes besides the job's own output
	// (JSON); nil writes nothing.
	Print func(*job.Report) error
	// Close lets go of the market and store, which live in the data dir.
	Close func()
}

// Scratch says the data dir goes when the demo ends: the demo made it
// and was not asked to keep it.
func (o Options) Scratch() bool { return !o.DataDirGiven && !o.Keep }

// NewDataDir makes the data dir a demo runs in when the user named none.
func NewDataDir() (string, error) { return os.MkdirTemp("", "vastfleet-demo-") }

// Streams are the streams a demo in data dir dir writes to. When dir is
// scratch, lines that name a path in it, or a command that reads it,
// would point at nothing once it is gone, so they are left out; not
// from the JSON, which must stay whole, nor from a terminal's stderr,
// which the live view must see as the terminal it is (errTTY).
func Streams(out, errOut io.Writer, errTTY bool, dir string, o Options) (io.Writer, io.Writer) {
	if !o.Scratch() {
		return out, errOut
	}
	if !o.JSON {
		out = NewScratchFilter(out, dir)
	}
	if !errTTY {
		errOut = NewScratchFilter(errOut, dir)
	}
	return out, errOut
}

// Run is the demo: it writes its task file into the data dir, runs it and
// removes a scratch data dir once nothing in it is live. Its output goes
// to d's streams, filtered for a scratch data dir (Streams) from the
// start: the factory is built with them.
func Run(ctx context.Context, d *Deps, o Options) error {
	scratch := o.Scratch()
	dir, err := d.DataDir()
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(file, []byte(Task(d.Self, o)), 0o600); err != nil {
		return err
	}
	jf, err := jobfile.Load(file)
	if err != nil {
		return err
	}
	w := d.ErrOut
	fmt.Fprintf(w, "vastfleet demo: %d instances on the simulated marketplace, each searching sha256 hashes that start with %q for %gs\n", o.Count, o.Prefix, o.Seconds)
	if scratch {
		fmt.Fprintf(w, "  in a temporary data dir, removed at the end (--keep keeps it: store, results, findings, reports)\n")
	} else {
		fmt.Fprintf(w, "  data dir %s; the task file it runs: %s\n", dir, file)
	}
	fmt.Fprintf(w, "  1. rank every offer by %s  2. launch parked, replace failed boots, release together\n", rankingWords(o.By))
	fmt.Fprintf(w, "  3. the agent on every node runs the search and reports hashes/s and findings  4. collect, destroy, cost report\n")
	rep, err := d.Up(ctx, jf, file, filepath.Join(dir, "results"))
	if err != nil && scratch {
		// Whatever went wrong, the store knows what was rented: it stays.
		err = fmt.Errorf("%w (the demo's data dir %s is kept)", err, dir)
	}
	if rep != nil && d.Print != nil {
		if perr := d.Print(rep); perr != nil && err == nil {
			err = perr
		}
	}
	if rep != nil {
		fmt.Fprintf(w, "%s\n", HashesPerDollar(rep))
	}
	if err != nil {
		return err
	}
	if rep != nil && rep.Live > 0 {
		// The store knows those instances: it stays, whatever --keep says.
		return fmt.Errorf("%d instance(s) still live: `vastfleet --data-dir %s down %s`", rep.Live, dir, rep.Job)
	}
	if scratch {
		d.Close() // the market and store live in it
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

// Task is the demo's task file: self (the vastfleet binary) searches on
// every node, and verifies each finding on the coordinator.
func Task(self string, o Options) string {
	return fmt.Sprintf(`# written by vastfleet demo
name: demo
query: "rentable=True cpu_cores_effective>=4"
by: %s
count: %d
park: true
deadline: 45m
image: ubuntu:22.04
run: nice -n 5 %s hashwork --prefix %s --seconds %g
verify: exec %s hashcheck --prefix %s
results: /workspace/project/results
max_duration: 2h
%s`, cmp.Or(o.By, "vcpu"), o.Count, shell.Quote(self), o.Prefix, o.Seconds, shell.Quote(self), o.Prefix, cullLine(o))
}

// rankingWords says what the task ranks by.
func rankingWords(by string) string {
	if by == "useful" {
		return "the expected $ of a node ready in time and kept"
	}
	return "vCPU per $/hr"
}

// cullLine is the task's cull policy, "" for none.
func cullLine(o Options) string {
	if o.CullBelow <= 0 {
		return ""
	}
	return fmt.Sprintf("cull: {below: %g, after: %s, metric: hashes_per_s}\n", o.CullBelow, o.CullAfter)
}

// HashesPerDollar says what the fleet delivered for the money: the
// hashes each node last reported (its count so far), summed, over the
// job's whole cost (failed boots and culled nodes included).
func HashesPerDollar(rep *job.Report) string {
	var hashes float64
	for _, n := range rep.Nodes {
		hashes += n.LastMetrics["hashes"]
	}
	if rep.Total <= 0 {
		return fmt.Sprintf("%.4g hashes for $0.00", hashes)
	}
	return fmt.Sprintf("%.4g hashes for $%.4f: %.4g hashes per dollar (%d node(s) culled)", hashes, rep.Total, hashes/rep.Total, len(rep.Culls))
}
