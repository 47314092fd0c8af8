package workspace

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// surfaceBudgetFile holds each library package's budget of exported names:
// "<package> <budget> <reason>" a line. A package over its budget fails
// TestSurfaceBudget unless the same change raises the budget there, with a
// one-line reason.
const surfaceBudgetFile = "surface_budget.txt"

// oldTotal is the budget line of the packages that existed at 955fadc (the
// start of #23), together: #23 took them from 1,020 names to at most 850.
// order/* and limiter/* count with them (they were split out of order and
// limiter), and so does observe
// (it was internal/observe, re-exported by eight of them).
const oldTotal = "@955fadc"

// exportedNames counts a package's exported identifiers: top-level names
// (types, functions, constants, variables) and the exported methods of
// exported types, in non-test files.
func exportedNames(dir string) (int, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv.List[0].Type)) {
						n++
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								n++
							}
						case *ast.ValueSpec:
							for _, id := range s.Names {
								if id.IsExported() {
									n++
								}
							}
						}
					}
				}
			}
		}
	}
	return n, nil
}

func exportedRecv(t ast.Expr) bool {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr: // a generic type's receiver
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// libraryPackages lists the library's package directories (relative to
// the root): everything with non-test Go files, outside internal/,
// examples/, testdata/ and the other modules.
func libraryPackages(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == ".":
				return nil
			case strings.HasPrefix(d.Name(), "."), d.Name() == "internal", rel == "examples", rel == "testdata", rel == "bench", rel == "contrib", rel == "docs", rel == "deploy":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.ToSlash(filepath.Dir(rel)); !slices.Contains(out, dir) {
				out = append(out, dir)
			}
		}
		return nil
	})
	return out, err
}

// TestSurfaceBudget prints each library package's exported-name count and
// fails when one exceeds its budget in surface_budget.txt, or has none.
// The packages of 955fadc (the start of the round that set the budget)
// and those added since are summed apart.
func TestSurfaceBudget(t *testing.T) {
	root := filepath.Join("..", "..")
	f, err := os.Open(surfaceBudgetFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	budget := map[string]int{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 3 {
			t.Fatalf("%s:%d: want \"<package> <budget> <reason>\"", surfaceBudgetFile, line)
		}
		n, err := strconv.Atoi(fields[1])
		if err != nil || n < 0 {
			t.Fatalf("%s:%d: budget %q", surfaceBudgetFile, line, fields[1])
		}
		budget[fields[0]] = n
	}
	pkgs, err := libraryPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pkgs)
	old := map[string]bool{"breaker": true, "captcha": true, "captcha/captchatest": true, "limiter": true, "order": true,
		"observe": true, "order/orderid": true, "order/orderkafka": true, "outbox": true, "risk": true, "stock": true, "stock/dbfallback": true, "token": true}
	var report strings.Builder
	var sumOld, sumNew int
	for _, p := range pkgs {
		n, err := exportedNames(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		// order/* was split out of order, limiter/* out of limiter
		if old[p] || strings.HasPrefix(p, "order/") || strings.HasPrefix(p, "limiter/") {
			sumOld += n
		} else {
			sumNew += n
		}
		b, ok := budget[p]
		fmt.Fprintf(&report, "%-22s %4d / %4d\n", p, n, b)
		switch {
		case !ok:
			t.Errorf("%s: %d exported names and no budget in %s: add one, with a reason", p, n, surfaceBudgetFile)
		case n > b:
			t.Errorf("%s: %d exported names, over its budget of %d: remove some, or raise the budget in %s with a one-line reason", p, n, b, surfaceBudgetFile)
		}
	}
	fmt.Fprintf(&report, "packages of 955fadc (order/* and limiter/* counted with them): %d / %d; added since: %d\n", sumOld, budget[oldTotal], sumNew)
	if b, ok := budget[oldTotal]; !ok {
		t.Errorf("%s: no %q line (the budget of the packages of 955fadc together)", surfaceBudgetFile, oldTotal)
	} else if sumOld > b {
		t.Errorf("the packages of 955fadc export %d names together, over their budget of %d (%q in %s)", sumOld, b, oldTotal, surfaceBudgetFile)
	}
	t.Logf("exported names (count / budget):\n%s", report.String())
}

// TestOptionConstructors holds every library package to at most three
// constructors that take options (a variadic parameter of a type named
// …Option), the limit of docs/ARCHITECTURE.md's conventions: a package
// with more is split by role or gives plain settings a Config struct.
func TestOptionConstructors(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs, err := libraryPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		fset := token.NewFileSet()
		parsed, err := parser.ParseDir(fset, filepath.Join(root, p), func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ctors []string
		for _, pkg := range parsed {
			for _, f := range pkg.Files {
				for _, d := range f.Decls {
					fd, ok := d.(*ast.FuncDecl)
					if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Params == nil || len(fd.Type.Params.List) == 0 {
						continue
					}
					last := fd.Type.Params.List[len(fd.Type.Params.List)-1].Type
					ell, ok := last.(*ast.Ellipsis)
					if !ok {
						continue
					}
					var name string
					switch e := ell.Elt.(type) {
					case *ast.Ident:
						name = e.Name
					case *ast.SelectorExpr:
						name = e.Sel.Name
					}
					if strings.HasSuffix(name, "Option") && strings.HasPrefix(fd.Name.Name, "New") {
						ctors = append(ctors, fd.Name.Name)
					}
				}
			}
		}
		sort.Strings(ctors)
		if len(ctors) > 3 {
			t.Errorf("%s: %d constructors take options (%s); at most 3", p, len(ctors), strings.Join(ctors, ", "))
		}
	}
}

// TestOrderDocIsShort holds `go doc -short ./order` to at most 61 lines
// (136 before #23 split the package by role; 60 until #27 added
// order.Line, the line of an order with lines).
func TestOrderDocIsShort(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	cmd := exec.Command(goTool, "doc", "-short", "./order")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go doc: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "\n"); n > 61 || n < 10 {
		t.Errorf("go doc -short ./order prints %d lines; want 10..61", n)
	}
}
