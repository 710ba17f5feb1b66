package cli

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
	"github.com/vastfleet/vastfleet/internal/job"
	"github.com/vastfleet/vastfleet/internal/store"
)

// TestCommandsDeclareWhatTheyNeed: each command's needs (withNeeds) reach
// the factory when it is initialised for that command, worked out from
// its flags and arguments, and only for it; the factory is initialised
// once.
func TestCommandsDeclareWhatTheyNeed(t *testing.T) {
	t.Parallel()
	hosts := factory.Needs{SimHosts: true}
	waits := factory.Needs{WaitsOnMarket: true}
	up := factory.Needs{SimHosts: true, WaitsOnMarket: true, Paced: true}
	upOn := func(market string) factory.Needs { n := up; n.Market = market; return n }
	demo := up
	demo.SimSpeed = 40
	upScaled := up // --sim-speed given: the demo's own speed is not applied
	// Task files choosing each market, and a job to resume from one.
	dir := t.TempDir()
	task := func(name, choice string) string {
		path := filepath.Join(dir, name)
		body := "name: t\nquery: \"rentable=True\"\nimage: ubuntu:22.04\nrun: \"true\"\n" + choice
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	onVast, onSim, byGPU, onNone := task("vast.yaml", "market: vast\n"), task("sim.yaml", "market: sim\n"), task("gpu.yaml", "gpu: vast\n"), task("none.yaml", "")
	dataDir := filepath.Join(dir, "data")
	saveJob(t, dataDir, &job.Record{ID: "j1", File: onVast, State: job.StateRunning})
	// Scratch data dirs the demo's needs make (demoDir checks them).
	scratch := "scratch"
	cases := []struct {
		args []string
		want factory.Needs
	}{
		{[]string{"ls"}, factory.Needs{}},
		{[]string{"--sim-hosts", "ls"}, hosts},
		{[]string{"--sim-speed", "5", "ls"}, factory.Needs{Paced: true}},
		{[]string{"launch", "--count", "2"}, waits},
		{[]string{"rent", "42"}, waits},
		{[]string{"rent", "42", "--no-wait"}, factory.Needs{}},
		{[]string{"plan", "--rent", "1"}, waits},
		{[]string{"plan"}, factory.Needs{}},
		{[]string{"bench", "offers"}, factory.Needs{SimHosts: true, WaitsOnMarket: true}},
		{[]string{"up", "job.toml"}, up}, // unreadable: up says why as it runs
		{[]string{"up", onVast}, upOn("vast")},
		{[]string{"up", onSim}, upOn("sim")},
		{[]string{"up", byGPU}, upOn("vast")},
		{[]string{"up", onNone}, up},
		{[]string{"--market", "sim", "up", onVast}, up}, // the flag wins
		{[]string{"--data-dir", dataDir, "up", "--resume", "j1"}, upOn("vast")},
		{[]string{"--data-dir", dataDir, "up", "--resume", "j2"}, up}, // no such job: up says so as it runs
		{[]string{"demo"}, wantDemo(demo, scratch, true, true)},
		{[]string{"demo", "--json"}, wantDemo(demo, scratch, false, true)},
		{[]string{"demo", "--keep"}, wantDemo(demo, scratch, false, false)},
		{[]string{"--data-dir", dataDir, "demo"}, demo},
		{[]string{"--sim-speed", "5", "demo", "--data-dir", dataDir}, upScaled},
		{[]string{"demo", "--prefix", "xyz"}, demo}, // refused: no data dir made
		{[]string{"--market", "vast", "demo"}, demo},
		{[]string{"coord"}, hosts},
		{[]string{"down", "job-1"}, hosts},
		{[]string{"destroy", "42"}, hosts},
		{[]string{"destroy", "42", "--force"}, factory.Needs{}},
		{[]string{"ssh", "42"}, hosts},
		{[]string{"ssh", "42", "--print"}, factory.Needs{}},
		{[]string{"logs", "sweep-1"}, hosts},
		{[]string{"logs", "42"}, factory.Needs{}},
		{[]string{"exec", "--all", "true"}, hosts},
		{[]string{"collect", "--all"}, hosts},
		{[]string{"sync", "--all"}, hosts},
		{[]string{"setup", "--all"}, hosts},
		{[]string{"serve"}, hosts},
		// A subcommand does not inherit its parent's needs.
		{[]string{"serve", "token", "ls"}, factory.Needs{}},
	}
	for _, tc := range cases {
		f := factory.New(&iostreams.IOStreams{ErrOut: new(strings.Builder), Getenv: func(string) string { return "" }}, Version)
		root := newRootCmd(f)
		var got *factory.Needs
		var stub func(c *cobra.Command)
		stub = func(c *cobra.Command) {
			if c.RunE != nil || c.Run != nil {
				c.Run, c.RunE = nil, func(*cobra.Command, []string) error { s := f.Settings(); got = &s; return nil }
			}
			for _, sub := range c.Commands() {
				stub(sub)
			}
		}
		stub(root)
		root.SetArgs(tc.args)
		root.SetOut(new(strings.Builder))
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got == nil {
			t.Errorf("%v: the command did not run", tc.args)
			continue
		}
		if tc.want.DataDir == scratch {
			// A fresh data dir of the demo's own, its paths left out of
			// the output where asked.
			if !strings.HasPrefix(filepath.Base(got.DataDir), "vastfleet-demo-") {
				t.Errorf("%v: data dir %q, want a fresh vastfleet-demo-*", tc.args, got.DataDir)
			} else if fi, err := os.Stat(got.DataDir); err != nil || !fi.IsDir() {
				t.Errorf("%v: data dir %q not made: %v", tc.args, got.DataDir, err)
			} else {
				os.RemoveAll(got.DataDir)
			}
			got.DataDir = scratch
			got.Out, got.ErrOut = filtered(got.Out, tc.want.Out), filtered(got.ErrOut, tc.want.ErrOut)
		}
		if *got != tc.want {
			t.Errorf("%v: settings %+v, want %+v", tc.args, *got, tc.want)
		}
		if err := f.Init(func(string) bool { return false }, nil, nil); !errors.Is(err, factory.ErrInitialised) {
			t.Errorf("%v: a second Init gave %v, want ErrInitialised", tc.args, err)
		}
		f.Close()
	}
}

// isFiltered stands, in a wanted Needs, for a stream the demo filters.
var isFiltered io.Writer = new(strings.Builder)

// wantDemo are the demo's needs in data dir dir, with its stdout and
// stderr filtered or not.
func wantDemo(n factory.Needs, dir string, out, errOut bool) factory.Needs {
	n.DataDir = dir
	if out {
		n.Out = isFiltered
	}
	if errOut {
		n.ErrOut = isFiltered
	}
	return n
}

// filtered is isFiltered for a stream the demo's scratch filter writes
// through, when one is wanted; else the stream.
func filtered(w, want io.Writer) io.Writer {
	if want == isFiltered && w != nil && fmt.Sprintf("%T", w) == "*demo.scratchFilter" {
		return isFiltered
	}
	return w
}

// saveJob records a job in the data dir's store, as up does.
func saveJob(t *testing.T, dataDir string, rec *job.Record) {
	t.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dataDir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := (&job.Records{Store: st, Dir: filepath.Join(dataDir, "jobs")}).Save(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

// TestNoCommandChangesTheFactory: the factory is the one composition
// root, built once (its settings come from the global flags and the
// command's declared needs) and never changed by a command. Its settings
// are unexported, so only its exported parts could be written; no file
// of the command tree assigns to them, nor takes their address to write
// through, except root.go binding the global flags before Init: up's
// market, the demo's speed, data dir and streams are declared (Needs).
func TestNoCommandChangesTheFactory(t *testing.T) {
	t.Parallel()
	exported := map[string]bool{"IO": true, "Opts": true, "Log": true, "Version": true}
	// factoryField names f.X... when e is a selector rooted at the
	// factory (named f in every command) through one of its exported
	// fields.
	factoryField := func(e ast.Expr) (string, bool) {
		var sels []string
		for {
			switch x := e.(type) {
			case *ast.SelectorExpr:
				sels = append([]string{x.Sel.Name}, sels...)
				e = x.X
				continue
			case *ast.IndexExpr:
				e = x.X
				continue
			case *ast.StarExpr:
				e = x.X
				continue
			case *ast.Ident:
				if x.Name == "f" && len(sels) > 0 && exported[sels[0]] {
					return "f." + strings.Join(sels, "."), true
				}
			}
			return "", false
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		report := func(pos token.Pos, what string) {
			t.Errorf("%s: %s changes the factory after Init: declare what the command needs (withNeeds) instead", fset.Position(pos), what)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, lhs := range n.Lhs {
					if what, ok := factoryField(lhs); ok {
						report(n.Pos(), what)
					}
				}
			case *ast.IncDecStmt:
				if what, ok := factoryField(n.X); ok {
					report(n.Pos(), what)
				}
			case *ast.UnaryExpr:
				if what, ok := factoryField(n.X); ok && n.Op == token.AND && name != "root.go" {
					report(n.Pos(), "&"+what)
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d files: is the test running in internal/cli?", checked)
	}
}
