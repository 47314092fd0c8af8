package workspace

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOneErrorAnswerType: the error body of the repository's HTTP APIs,
// {"status":…,"message":…}, is declared once, as admin.ErrorAnswer; the
// buyer API (checkout/checkouthttp and the reference deployment's app) and
// the admin API's client (seckillctl) use it. It was declared in four
// places (#23 item 12), kept alike by a test that parsed one of them.
func TestOneErrorAnswerType(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
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
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok && isErrorAnswerShape(st) {
					rel, _ := filepath.Rel(root, path)
					found = append(found, filepath.ToSlash(rel)+": "+ts.Name.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"admin/respond.go: ErrorAnswer"}; !slices.Equal(found, want) {
		t.Fatalf("the {status, message} error body is declared at %q; want it once, at %q (use admin.ErrorAnswer)", found, want)
	}
}

// isErrorAnswerShape reports whether st is a struct of two string fields
// whose JSON names are "status" and "message".
func isErrorAnswerShape(st *ast.StructType) bool {
	var names []string
	for _, fld := range st.Fields.List {
		id, ok := fld.Type.(*ast.Ident)
		if !ok || id.Name != "string" || fld.Tag == nil || len(fld.Names) != 1 {
			return false
		}
		tag, err := strconv.Unquote(fld.Tag.Value)
		if err != nil {
			return false
		}
		name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Equal(names, []string{"message", "status"})
}

// TestErrorAnswerShapeCheck: the check finds the shape in either field
// order and with tag options, and nothing else.
func TestErrorAnswerShapeCheck(t *testing.T) {
	for src, want := range map[string]bool{
		"struct{ Status string `json:\"status\"`; Message string `json:\"message\"` }":           true,
		"struct{ M string `json:\"message,omitempty\"`; S string `json:\"status\"` }":            true,
		"struct{ Status string `json:\"status\"` }":                                              false,
		"struct{ Status, Message string }":                                                       false,
		"struct{ Status int `json:\"status\"`; Message string `json:\"message\"` }":              false,
		"struct{ Status string `json:\"status\"`; Message string `json:\"message\"`; X string }": false,
	} {
		expr, err := parser.ParseExpr(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := isErrorAnswerShape(expr.(*ast.StructType)); got != want {
			t.Errorf("%s: %v, want %v", src, got, want)
		}
	}
}
