package workspace

import (
	"go/ast"
	"go/parser"
	"go/token"
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
	for _, pkg := range []string{"stock", "stock/dbfallback", "order", "limiter", "token", "captcha", "risk", "outbox", "breaker"} {
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
