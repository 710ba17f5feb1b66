package cli

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/iostreams"
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
		{[]string{"up", "job.toml"}, up},
		{[]string{"demo"}, up},
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
		if *got != tc.want {
			t.Errorf("%v: settings %+v, want %+v", tc.args, *got, tc.want)
		}
		if err := f.Init(func(string) bool { return false }, nil, nil); !errors.Is(err, factory.ErrInitialised) {
			t.Errorf("%v: a second Init gave %v, want ErrInitialised", tc.args, err)
		}
	}
}

// TestNoCommandChangesTheFactory: the factory is the one composition
// root, built once (its settings come from the global flags and the
// command's declared needs) and never changed by a command. Its settings
// are unexported, so only its exported parts could be written; no file
// of the command tree assigns to them, nor takes their address to write
// through, except root.go binding the global flags before Init, and the
// exceptions named below.
func TestNoCommandChangesTheFactory(t *testing.T) {
	t.Parallel()
	// Still changed at run time; each is to go (issue 22): up takes the
	// job file's market, the demo runs a whole session in a scratch data
	// dir at its own speed and filters its output.
	allowed := map[string]bool{
		"upcmd.go: f.Opts.Market":     true,
		"democmd.go: f.Opts.SimSpeed": true,
		"democmd.go: f.Opts.DataDir":  true,
		"democmd.go: &f.IO.Out":       true,
		"democmd.go: &f.IO.ErrOut":    true,
	}
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
			if !allowed[name+": "+what] {
				t.Errorf("%s: %s changes the factory after Init: declare what the command needs (withNeeds) instead", fset.Position(pos), what)
			}
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
