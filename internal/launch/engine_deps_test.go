package launch

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// notEngine are the package's helpers that the CLI calls beside a launch,
// not the engine: they read or write the store before or outside one.
var notEngine = map[string]string{
	"UsefulScorer":     "the --by useful ranking reads the bad-host list before any launch",
	"BadHosts.MarkBad": "the coordinator's wrong-results marks, outside any launch",
	"Candidates":       "the search a launch is given, made before it",
}

// TestEngineTouchesNoStoreOrProvider holds the engine to its fleet
// interface (FleetOps): no function of the engine calls the store or the
// marketplace itself. A call reaches them when it is a method of
// store.Store, a method of an interface the provider or store declares
// (Provider, Bidder, BulkCreator, ...), or a function of either package
// that takes a context (provider.SweepOffers). Their value types' pure
// helpers (provider.SSHAddr, Instance.Status, provider.Bills) stay
// allowed: they are those rules' one home and do no I/O. Types from both
// packages still appear in signatures (store.Instance, provider.Listing,
// provider.CreateRequest in Spec): FleetOps hands them over as values.
func TestEngineTouchesNoStoreOrProvider(t *testing.T) {
	t.Parallel()
	calls, err := storeProviderCalls(".")
	if err != nil {
		t.Skip(err)
	}
	for _, c := range calls {
		t.Errorf("%s", c)
	}
	if len(calls) > 0 {
		t.Logf("%d direct calls: the engine goes through FleetOps (fleetops.go)", len(calls))
	}
}

// storeProviderCalls lists the calls in dir's non-test files that reach
// the store or the provider, as "file:line: func calls pkg.Name".
func storeProviderCalls(dir string) ([]string, error) {
	return eachCall(dir, func(fn string, info *types.Info, call *ast.CallExpr) (string, bool) {
		if _, skip := notEngine[fn]; skip {
			return "", false
		}
		return reaches(info, call)
	})
}

// TestPlannerIsPure holds the planner (the model's methods) to deciding
// only: it calls no function value it was handed (Checks.Usable and
// Checks.Agents are the runner's to call) and reads no wall clock; the
// model has no FleetOps and no event sink to call at all.
func TestPlannerIsPure(t *testing.T) {
	t.Parallel()
	calls, err := eachCall(".", func(fn string, info *types.Info, call *ast.CallExpr) (string, bool) {
		if !strings.HasPrefix(fn, "model.") {
			return "", false
		}
		sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		if s, ok := info.Selections[sel]; ok && s.Kind() == types.FieldVal {
			return "the function in field " + sel.Sel.Name, true
		}
		if f, ok := info.Uses[sel.Sel].(*types.Func); ok && f.Pkg() != nil && f.Pkg().Path() == "time" {
			switch f.Name() {
			case "Now", "Since", "Until", "Sleep", "After", "NewTimer", "Tick":
				return "time." + f.Name(), true
			}
		}
		return "", false
	})
	if err != nil {
		t.Skip(err)
	}
	for _, c := range calls {
		t.Errorf("%s", c)
	}
}

// eachCall type-checks dir's non-test files and reports every call in a
// function body that bad flags, as "file:line: func calls what"; fn is
// the function's name, Type.Method for a method.
func eachCall(dir string, bad func(fn string, info *types.Info, call *ast.CallExpr) (string, bool)) ([]string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("go not on PATH")
	}
	fset := token.NewFileSet()
	names, err := goList(gobin, dir, "{{range .GoFiles}}{{.}}\n{{end}}", ".")
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	exports, err := exportData(gobin, dir)
	if err != nil {
		return nil, err
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check("github.com/vastfleet/vastfleet/internal/launch", fset, files, info); err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := funcName(fd)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if what, flagged := bad(name, info, call); flagged {
					out = append(out, fmt.Sprintf("%s: %s calls %s", fset.Position(call.Pos()), name, what))
				}
				return true
			})
		}
	}
	sort.Strings(out)
	return out, nil
}

// reaches says whether call is one into the store or the marketplace.
func reaches(info *types.Info, call *ast.CallExpr) (string, bool) {
	var fn *types.Func
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[f]; ok {
			fn, _ = sel.Obj().(*types.Func)
		} else {
			fn, _ = info.Uses[f.Sel].(*types.Func)
		}
	case *ast.Ident:
		fn, _ = info.Uses[f].(*types.Func)
	}
	if fn == nil || fn.Pkg() == nil {
		return "", false
	}
	const mod = "github.com/vastfleet/vastfleet/internal/"
	path := fn.Pkg().Path()
	sig := fn.Type().(*types.Signature)
	if path == mod+"fleet" && sig.Recv() != nil && strings.HasSuffix(sig.Recv().Type().String(), "fleet.Manager") {
		return "fleet.Manager." + fn.Name() + " (the engine holds FleetOps, not the manager)", true
	}
	if path != mod+"store" && path != mod+"provider" {
		return "", false
	}
	what := fn.Pkg().Name() + "." + fn.Name()
	if recv := sig.Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if types.IsInterface(t) {
			return what + " (a method of " + fn.Pkg().Name() + "'s interface)", true
		}
		if n, ok := t.(*types.Named); ok && n.Obj().Name() == "Store" {
			return fn.Pkg().Name() + ".Store." + fn.Name(), true
		}
	}
	if ps := sig.Params(); ps.Len() > 0 && ps.At(0).Type().String() == "context.Context" {
		return what + " (takes a context)", true
	}
	return "", false
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// exportData maps each dependency of the package in dir to its compiled
// export data, from the build cache.
func exportData(gobin, dir string) (map[string]string, error) {
	lines, err := goList(gobin, dir, "{{.ImportPath}} {{.Export}}", "-export", "-deps", ".")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range lines {
		path, file, ok := strings.Cut(l, " ")
		if ok && file != "" {
			m[path] = filepath.Clean(file)
		}
	}
	return m, nil
}

// goList runs go list with format in dir; one line of output each.
func goList(gobin, dir, format string, args ...string) ([]string, error) {
	cmd := exec.Command(gobin, append([]string{"list", "-f", format}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}
