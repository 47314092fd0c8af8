package workspace

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneNameForTheReservationID: across the library's exported API a
// reservation ID is called ReservationID (ID inside a ledger entry). It
// used to have five names (RequestID in stock, ReservationID in order, Ref,
// resv, requestID), and a reader had to learn that they were one thing.
func TestOneNameForTheReservationID(t *testing.T) {
	root := filepath.Join("..", "..")
	banned := map[string]bool{"RequestID": true, "Resv": true, "ResvID": true, "ReservationRef": true}
	for _, pkg := range []string{"stock", "stock/dbfallback", "order", "order/handoff", "order/status", "order/reconcile", "order/operate", "limiter", "limiter/redislimit", "token", "captcha", "risk", "outbox", "breaker"} {
		dir := filepath.Join(root, pkg)
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					ts, ok := n.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						return true
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						return true
					}
					for _, fld := range st.Fields.List {
						for _, nm := range fld.Names {
							if banned[nm.Name] {
								t.Errorf("%s: %s.%s: a reservation ID is called ReservationID (%s)", pkg, ts.Name.Name, nm.Name, fset.Position(nm.Pos()))
							}
						}
					}
					return true
				})
			}
		}
	}
}

// TestParamsStructForSameTypedArguments: no exported function, method,
// function type or interface method of the library takes three or more
// arguments of one type (context.Context aside); they take a params struct,
// so swapping two of them does not compile silently
// (token.ConsumeParams, captcha.VerifyParams, status.ResultQuery, …).
func TestParamsStructForSameTypedArguments(t *testing.T) {
	root := filepath.Join("..", "..")
	check := func(pkg, name string, ft *ast.FuncType, pos token.Position) {
		counts := map[string]int{}
		for _, fld := range ft.Params.List {
			typ := types.ExprString(fld.Type)
			counts[typ] += max(1, len(fld.Names))
		}
		for typ, n := range counts {
			if n >= 3 && typ != "context.Context" {
				t.Errorf("%s.%s takes %d arguments of type %s: use a params struct (%s)", pkg, name, n, typ, pos)
			}
		}
	}
	for _, pkg := range []string{"stock", "stock/dbfallback", "order", "order/orderid", "order/orderkafka", "limiter", "limiter/redislimit", "token", "captcha", "risk", "outbox", "breaker", "admin", "admin/admintest", "waitroom", "waitroom/draw", "order/status", "order/payment"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, pkg), func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					switch d := n.(type) {
					case *ast.FuncDecl:
						if d.Name.IsExported() {
							check(pkg, d.Name.Name, d.Type, fset.Position(d.Pos()))
						}
					case *ast.TypeSpec:
						if !d.Name.IsExported() {
							return true
						}
						switch x := d.Type.(type) {
						case *ast.FuncType:
							check(pkg, d.Name.Name, x, fset.Position(d.Pos()))
						case *ast.InterfaceType:
							for _, m := range x.Methods.List {
								if mt, ok := m.Type.(*ast.FuncType); ok && len(m.Names) > 0 {
									check(pkg, d.Name.Name+"."+m.Names[0].Name, mt, fset.Position(m.Pos()))
								}
							}
						}
					}
					return true
				})
			}
		}
	}
}

// TestSingleMethodCollaboratorsAreFunctionTypes: in order/handoff and
// order/reconcile a collaborator of one method (Publisher, Fallback,
// Ledger, Pending) is one function type, the shape stock.Source has: no
// interface with one exported method next to a …Func adapter, which cost
// two more names each and a reader the choice between them.
func TestSingleMethodCollaboratorsAreFunctionTypes(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range []string{"order/handoff", "order/reconcile"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, pkg), func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					gd, ok := d.(*ast.GenDecl)
					if !ok || gd.Tok != token.TYPE {
						continue
					}
					for _, s := range gd.Specs {
						ts := s.(*ast.TypeSpec)
						if !ts.Name.IsExported() {
							continue
						}
						if strings.HasSuffix(ts.Name.Name, "Func") {
							t.Errorf("%s.%s: an adapter type; make the collaborator a function type (%s)", pkg, ts.Name.Name, fset.Position(ts.Pos()))
						}
						it, ok := ts.Type.(*ast.InterfaceType)
						if !ok {
							continue
						}
						exported := 0
						for _, m := range it.Methods.List {
							for _, nm := range m.Names {
								if nm.IsExported() {
									exported++
								}
							}
						}
						if exported == 1 {
							t.Errorf("%s.%s: an interface of one method; make it a function type (%s)", pkg, ts.Name.Name, fset.Position(ts.Pos()))
						}
					}
				}
			}
		}
	}
}
