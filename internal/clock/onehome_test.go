package clock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoOtherPackageDefinesAClock keeps time in one home: no type outside
// this package (and its subpackages) tells the time with a Now()
// time.Time method, and no struct carries a Now or Sleep function of its
// own beside a Clock. A package that needs the time takes a Clock.
func TestNoOtherPackageDefinesAClock(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel == "internal/clock" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			found = append(found, clocksIn(fset, rel, f)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range found {
		t.Errorf("%s: only package clock defines clocks; take a clock.Clock", f)
	}
}

// The checker catches a clock and time hooks defined elsewhere, and
// leaves other uses of time alone.
func TestTheClockCheckerCatchesOne(t *testing.T) {
	const src = `package elsewhere

import (
	"context"
	stdtime "time"
)

type ticker struct{}

func (*ticker) Now() stdtime.Time { return stdtime.Now() }

type gen[T any] struct{ v T }

func (g gen[T]) Now() stdtime.Time { return stdtime.Time{} }

type teller interface{ Now() stdtime.Time }

type options struct {
	Now   func() stdtime.Time
	Sleep func(ctx context.Context, d stdtime.Duration) error
	Other func() stdtime.Duration
	At    stdtime.Time
}

type fine struct{}

func (fine) Now() int                  { return 0 }
func (fine) When() stdtime.Time         { return stdtime.Time{} }
func (fine) Nowt(x int) stdtime.Time    { return stdtime.Time{} }
func Now() stdtime.Time                 { return stdtime.Now() }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "elsewhere/x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := clocksIn(fset, "elsewhere/x.go", f)
	want := []string{
		"elsewhere/x.go:10: type ticker has Now() time.Time",
		"elsewhere/x.go:14: type gen has Now() time.Time",
		"elsewhere/x.go:16: interface teller has Now() time.Time",
		"elsewhere/x.go:19: struct options has a Now hook (func() time.Time)",
		"elsewhere/x.go:20: struct options has a Sleep hook (func(context.Context, time.Duration) error)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// clocksIn lists what in f defines a clock: a method Now() time.Time on a
// type or in an interface, and struct fields holding a Now or Sleep
// function (a clock in pieces).
func clocksIn(fset *token.FileSet, name string, f *ast.File) []string {
	timePkg, ctxPkg := "", ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := path
		if imp.Name != nil {
			local = imp.Name.Name
		}
		switch path {
		case "time":
			timePkg = local
		case "context":
			ctxPkg = local
		}
	}
	if timePkg == "" {
		return nil
	}
	isSel := func(e ast.Expr, pkg, name string) bool {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := s.X.(*ast.Ident)
		return ok && pkg != "" && x.Name == pkg && s.Sel.Name == name
	}
	types := func(l *ast.FieldList) []ast.Expr {
		var out []ast.Expr
		if l == nil {
			return out
		}
		for _, f := range l.List {
			n := max(len(f.Names), 1)
			for range n {
				out = append(out, f.Type)
			}
		}
		return out
	}
	// tellsTime: func() time.Time.
	tellsTime := func(ft *ast.FuncType) bool {
		res := types(ft.Results)
		return len(types(ft.Params)) == 0 && len(res) == 1 && isSel(res[0], timePkg, "Time")
	}
	// sleeps: func(context.Context, time.Duration) error.
	sleeps := func(ft *ast.FuncType) bool {
		ps, res := types(ft.Params), types(ft.Results)
		if len(ps) != 2 || len(res) != 1 {
			return false
		}
		e, ok := res[0].(*ast.Ident)
		return isSel(ps[0], ctxPkg, "Context") && isSel(ps[1], timePkg, "Duration") && ok && e.Name == "error"
	}
	at := func(p token.Pos) string { return name + ":" + strconv.Itoa(fset.Position(p).Line) }
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || d.Name.Name != "Now" || !tellsTime(d.Type) {
				continue
			}
			recv := d.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			switch r := recv.(type) {
			case *ast.IndexExpr:
				recv = r.X
			case *ast.IndexListExpr:
				recv = r.X
			}
			typ := "?"
			if id, ok := recv.(*ast.Ident); ok {
				typ = id.Name
			}
			out = append(out, at(d.Pos())+": type "+typ+" has Now() time.Time")
		case *ast.GenDecl:
			for _, s := range d.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok {
					continue
				}
				switch tt := ts.Type.(type) {
				case *ast.InterfaceType:
					for _, m := range tt.Methods.List {
						ft, ok := m.Type.(*ast.FuncType)
						if ok && len(m.Names) == 1 && m.Names[0].Name == "Now" && tellsTime(ft) {
							out = append(out, at(m.Pos())+": interface "+ts.Name.Name+" has Now() time.Time")
						}
					}
				case *ast.StructType:
					for _, fld := range tt.Fields.List {
						ft, ok := fld.Type.(*ast.FuncType)
						switch {
						case !ok:
						case tellsTime(ft):
							out = append(out, at(fld.Pos())+": struct "+ts.Name.Name+" has a Now hook (func() time.Time)")
						case sleeps(ft):
							out = append(out, at(fld.Pos())+": struct "+ts.Name.Name+" has a Sleep hook (func(context.Context, time.Duration) error)")
						}
					}
				}
			}
		}
	}
	return out
}
