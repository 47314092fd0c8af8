package workspace

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFileLayers is how many layers the files of order and each order/*
// package may form (#23).
const maxFileLayers = 6

// fileGraph is the graph of a package's non-test files: uses[a][b] when
// file a uses a top-level name declared in file b (b != a).
type fileGraph struct {
	files []string
	uses  map[string]map[string]bool
}

// buildFileGraph parses the non-test Go files of dir. A name is "used"
// where an identifier the parser left unresolved in its file (so not a
// local, a field or a name of the same file) names a top-level
// declaration of another file; selectors (x.Name) and composite-literal
// keys are fields, not uses.
func buildFileGraph(dir string) (fileGraph, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		return fileGraph{}, err
	}
	g := fileGraph{uses: map[string]map[string]bool{}}
	declared := map[string]string{} // top-level name -> file
	files := map[string]*ast.File{}
	for _, p := range pkgs {
		for path, f := range p.Files {
			name := filepath.Base(path)
			files[name] = f
			g.files = append(g.files, name)
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						declared[d.Name.Name] = name
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							declared[s.Name.Name] = name
						case *ast.ValueSpec:
							for _, id := range s.Names {
								declared[id.Name] = name
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(g.files)
	for name, f := range files {
		skip := map[*ast.Ident]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				skip[n.Sel] = true
			case *ast.CompositeLit:
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if id, ok := kv.Key.(*ast.Ident); ok {
							skip[id] = true
						}
					}
				}
			}
			return true
		})
		g.uses[name] = map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok || id.Obj != nil || skip[id] {
				return true
			}
			if b, ok := declared[id.Name]; ok && b != name && id.Name != "_" {
				g.uses[name][b] = true
			}
			return true
		})
	}
	return g, nil
}

// analyse returns the references that run back up (edges inside a cycle,
// a file's use of a file that uses it, directly or not) and the number
// of layers: the longest chain of files, each using the next, counted in
// files, with every cycle collapsed to one layer; chain is that chain, top
// down.
func (g fileGraph) analyse() (backRefs []string, layers int, chain []string) {
	// Tarjan's strongly connected components.
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	comp := map[string]int{}
	var stack []string
	next, ncomp := 0, 0
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(g.uses[v]) {
			if _, seen := index[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for _, f := range g.files {
		if _, seen := index[f]; !seen {
			strong(f)
		}
	}
	for _, a := range g.files {
		for _, b := range sortedKeys(g.uses[a]) {
			if comp[a] == comp[b] {
				backRefs = append(backRefs, a+" -> "+b)
			}
		}
	}
	// Longest path over the components (Tarjan numbers them so that a
	// component's uses come first).
	depth := make([]int, ncomp)
	next2 := make([]int, ncomp) // the component below on the longest chain
	members := make([][]string, ncomp)
	for _, f := range g.files {
		members[comp[f]] = append(members[comp[f]], f)
	}
	top := -1
	for c := 0; c < ncomp; c++ {
		d, below := 1, -1
		for _, a := range members[c] {
			for _, b := range sortedKeys(g.uses[a]) {
				if comp[b] != c && depth[comp[b]]+1 > d {
					d, below = depth[comp[b]]+1, comp[b]
				}
			}
		}
		depth[c], next2[c] = d, below
		if d > layers {
			layers, top = d, c
		}
	}
	for c := top; c >= 0; c = next2[c] {
		chain = append(chain, strings.Join(members[c], "+"))
	}
	return backRefs, layers, chain
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestFileLayers prints, for every library package, how many layers its
// files form and how many references run back up, and fails when order or
// an order/* package has a cycle between its files or more than
// maxFileLayers layers (#23: a reader can take the files bottom up).
func TestFileLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs, err := libraryPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		g, err := buildFileGraph(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		back, layers, chain := g.analyse()
		t.Logf("%-24s %3d files %3d layers %3d references back up   %s", p, len(g.files), layers, len(back), strings.Join(chain, " > "))
		if p != "order" && !strings.HasPrefix(p, "order/") {
			continue
		}
		if len(back) > 0 {
			t.Errorf("%s: %d references run back up (a cycle between files): %s", p, len(back), strings.Join(back, ", "))
		}
		if layers > maxFileLayers {
			t.Errorf("%s: its files form %d layers, want at most %d", p, layers, maxFileLayers)
		}
	}
}

// TestFileGraph checks the analysis on a package built for it.
func TestFileGraph(t *testing.T) {
	g := fileGraph{
		files: []string{"a.go", "b.go", "c.go", "d.go"},
		uses: map[string]map[string]bool{
			"a.go": {"b.go": true},
			"b.go": {"c.go": true},
			"c.go": {"b.go": true}, // b and c form a cycle
			"d.go": {},
		},
	}
	back, layers, _ := g.analyse()
	if got, want := fmt.Sprint(back), "[b.go -> c.go c.go -> b.go]"; got != want {
		t.Errorf("back references = %s, want %s", got, want)
	}
	if layers != 2 {
		t.Errorf("layers = %d, want 2 (a, then the cycle b+c)", layers)
	}
	g.uses["c.go"] = map[string]bool{"d.go": true}
	back, layers, chain := g.analyse()
	if len(back) != 0 || layers != 4 || strings.Join(chain, ">") != "a.go>b.go>c.go>d.go" {
		t.Errorf("chain a>b>c>d: back = %v, layers = %d, chain %v, want none, 4 and a>b>c>d", back, layers, chain)
	}
}
