package stock

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// replySpec ties one script to the Go type that names its reply codes.
type replySpec struct {
	src  string   // the embedded source (scripts.go)
	typ  string   // the type in replycodes.go whose constants name its codes
	skip []string // constants of typ this script never returns
	pos  int      // which element of a returned table is the code (0: the first)
	// at starts each reply in the source (default: return). A reply is a
	// table constructor whose element pos is the code, or a scalar that
	// is the code itself.
	at string
	// others are the code expressions that are not codes (a number of
	// shards, a record), as written in the script.
	others []string
}

// replySpecs lists every script whose reply the Go side decodes by code.
var replySpecs = map[string]replySpec{
	"reserve.lua":       {src: reserveLua, typ: "reserveCode", skip: []string{"reserveNotTried"}},
	"reserve_many.lua":  {src: reserveManyLua, typ: "reserveCode", at: `\bout\[i\]\s*=`, skip: []string{"reserveNotTried"}},
	"reserve_lines.lua": {src: reserveLinesLua, typ: "varsCode"},
	"reserve_lines.lua (lines)": {src: reserveLinesLua, typ: "reserveCode", at: `\bout\[[ik]\]\s*=`,
		skip: []string{"reserveDirectory"}},
	"vstock.lua":     {src: vstockLua, typ: "varsCode"},
	"vheld.lua":      {src: vheldLua, typ: "varsCode"},
	"vload.lua":      {src: vloadLua, typ: "writeCode"},
	"extend.lua":     {src: extendLua, typ: "extendCode"},
	"group_take.lua": {src: groupTakeLua, typ: "groupCode"},
	"group_give.lua": {src: groupGiveLua, typ: "giveBackCode"},
	"release.lua":    {src: releaseLua, typ: "releaseCode"},
	"load.lua":       {src: loadLua, typ: "writeCode"},
	"directory.lua":  {src: directoryLua, typ: "writeCode"},
	"rebuild.lua":    {src: rebuildLua, typ: "rebuildCode"},
	"adjust.lua":     {src: adjustLua, typ: "adjustCode"},
	"give.lua":       {src: giveLua, typ: "giveCode"},
	"credit.lua":     {src: creditLua, typ: "creditCode"},
	"settle.lua":     {src: settleLua, typ: "settleCode"},
	"layout.lua":     {src: layoutLua, typ: "metaKind"},
	"held.lua":       {src: heldLua, typ: "metaKind"},
	"remaining.lua":  {src: remainingLua, typ: "metaKind"},
	"stats.lua":      {src: statsLua, typ: "metaKind"},
	"adjlog.lua":     {src: adjlogLua, typ: "metaKind"},
	"freeze.lua":     {src: freezeLua, typ: "metaKind"},
	"probe.lua":      {src: probeLua, typ: "metaKind", skip: []string{"metaDirectory"}},
	"scan.lua":       {src: scanLua, typ: "ledgerShape", pos: 2, skip: []string{"shapeFrozen"}, others: []string{"tonumber(m[2])"}},
	"lookup.lua": {src: lookupLua, typ: "ledgerShape", skip: []string{"shapeLoaded"},
		others: []string{"redis.call('HGET', KEYS[1], ARGV[1])", "false", "tonumber(m[2])"}},
}

// codeFree are the scripts whose reply carries no code, and why.
var codeFree = map[string]string{
	"drop.lua":          "the number of keys deleted",
	"ids.lua":           "an HSCAN page (scanEnd is Redis's cursor)",
	"group_scan.lua":    "an HSCAN page of a group's ledger and Redis now",
	"pending.lua":       "the pending transfer records",
	"group_rebuild.lua": "the number of allowances taken again, and the group's fence",
	"group_freeze.lua":  "1 frozen, 0 no meta (a count, not a decision)",
}

// TestReplyCodesMatchScripts reads every script and replycodes.go and
// checks, per script, that the codes it returns are exactly the constants
// named for it: a code renumbered, added or dropped on one side only fails.
func TestReplyCodesMatchScripts(t *testing.T) {
	t.Parallel()
	consts, types := replyConsts(t)
	used := map[string]bool{}
	for name, spec := range replySpecs {
		used[spec.typ] = true
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			named := map[int64]string{}
			for _, c := range consts[spec.typ] {
				if !slices.Contains(spec.skip, c.name) {
					named[c.value] = c.name
				}
			}
			for _, s := range spec.skip {
				if !slices.ContainsFunc(consts[spec.typ], func(c namedCode) bool { return c.name == s }) {
					t.Errorf("skip %s is not a %s constant", s, spec.typ)
				}
			}
			if len(named) == 0 {
				t.Fatalf("no %s constants in replycodes.go", spec.typ)
			}
			codes, others, err := scriptCodes(spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range sortedKeys(codes) {
				if _, ok := named[v]; !ok {
					t.Errorf("%s returns code %d, which no %s constant names", name, v, spec.typ)
				}
			}
			for _, v := range sortedKeys(named) {
				if !codes[v] {
					t.Errorf("%s (%d) is never returned by %s", named[v], v, name)
				}
			}
			for _, o := range others {
				if !slices.Contains(spec.others, o) {
					t.Errorf("%s returns %q as its code: not a literal, and not listed as a non-code", name, o)
				}
			}
			for _, o := range spec.others {
				if !slices.Contains(others, o) {
					t.Errorf("%s no longer returns %q", name, o)
				}
			}
		})
	}
	for _, typ := range types {
		if !used[typ] {
			t.Errorf("type %s of replycodes.go is tied to no script", typ)
		}
	}
	files, err := filepath.Glob("*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, coded := replySpecs[f]
		if _, free := codeFree[f]; coded == free {
			t.Errorf("%s must be in exactly one of replySpecs and codeFree", f)
		}
	}
}

// TestScriptCodesParser checks the reading of scripts on small sources,
// so TestReplyCodesMatchScripts cannot pass by finding nothing.
func TestScriptCodesParser(t *testing.T) {
	t.Parallel()
	src := `-- header: return {99, 0}
local function fail(code)
  return {code, 0}
end
if a == 1 then
  return fail(-4)
end
local code, s = 3, 'x' -- return {98}
if b then
  code = 1
end
if c then
  return {'str', {}, x}
end
return {code, tonumber(m[1])}
`
	codes, others, err := scriptCodes(replySpec{src: src})
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(codes); !slices.Equal(got, []int64{-4, 1, 3}) {
		t.Errorf("codes %v, want [-4 1 3]", got)
	}
	if !slices.Equal(others, []string{"'str'"}) {
		t.Errorf("others %q, want ['str']", others)
	}
	codes, _, err = scriptCodes(replySpec{src: "return 2\nreturn -1\n"})
	if err != nil || !slices.Equal(sortedKeys(codes), []int64{-1, 2}) {
		t.Errorf("scalar codes %v, %v", sortedKeys(codes), err)
	}
	if _, _, err := scriptCodes(replySpec{src: "return {y, 1}\n"}); err == nil {
		t.Error("an unresolvable code identifier passed")
	}
}

type namedCode struct {
	name  string
	value int64
}

// replyConsts parses replycodes.go: the constants of each reply type, and
// the reply types (the int64 types declared there).
func replyConsts(t *testing.T) (map[string][]namedCode, []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "replycodes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string][]namedCode{}
	var types []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if id, ok := s.Type.(*ast.Ident); ok && id.Name == "int64" {
					types = append(types, s.Name.Name)
				}
			case *ast.ValueSpec:
				typ, ok := s.Type.(*ast.Ident)
				if g.Tok != token.CONST || !ok || typ.Name == "int64" {
					continue
				}
				for i, n := range s.Names {
					if i >= len(s.Values) {
						t.Fatalf("replycodes.go: %s has no literal value", n.Name)
					}
					v, err := intLiteral(s.Values[i])
					if err != nil {
						t.Fatalf("replycodes.go: %s: %v", n.Name, err)
					}
					consts[typ.Name] = append(consts[typ.Name], namedCode{n.Name, v})
				}
			}
		}
	}
	return consts, types
}

// intLiteral evaluates an integer literal, possibly negated.
func intLiteral(e ast.Expr) (int64, error) {
	sign := int64(1)
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		sign, e = -1, u.X
	}
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.INT {
		return 0, fmt.Errorf("value %T is not an integer literal", e)
	}
	v, err := strconv.ParseInt(b.Value, 0, 64)
	return sign * v, err
}

var (
	intRe    = regexp.MustCompile(`^-?\d+$`)
	identRe  = regexp.MustCompile(`^[A-Za-z_]\w*$`)
	callRe   = regexp.MustCompile(`^([A-Za-z_]\w*)\(`)
	funcRe   = regexp.MustCompile(`local\s+function\s+([A-Za-z_]\w*)\s*\(([^)]*)\)`)
	assignRe = regexp.MustCompile(`^\s*(?:local\s+)?([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*=([^=].*)$`)
)

// scriptCodes reads the reply codes of a script: the integer literals that
// are the code of one of its replies, directly or through a local variable
// or a local function's parameter; others are the code expressions that
// are none of these.
func scriptCodes(spec replySpec) (map[int64]bool, []string, error) {
	lines := strings.Split(spec.src, "\n")
	for i, l := range lines {
		lines[i] = stripComment(l)
	}
	src := strings.Join(lines, "\n")
	at := spec.at
	if at == "" {
		at = `\breturn\b`
	}
	r := &luaReader{src: src, lines: lines, funcs: map[string][]string{}, codes: map[int64]bool{}}
	for _, m := range funcRe.FindAllStringSubmatch(src, -1) {
		r.funcs[m[1]] = splitTop(m[2])
	}
	for _, loc := range regexp.MustCompile(at).FindAllStringIndex(src, -1) {
		expr, err := replyCode(src[loc[1]:], spec.pos)
		if err != nil {
			return nil, nil, fmt.Errorf("reply at %q: %w", firstLine(src[loc[0]:]), err)
		}
		if err := r.classify(expr, 0); err != nil {
			return nil, nil, err
		}
	}
	if len(r.codes) == 0 {
		return nil, nil, fmt.Errorf("no reply codes found")
	}
	return r.codes, r.others, nil
}

type luaReader struct {
	src    string
	lines  []string
	funcs  map[string][]string // local function -> its parameters
	codes  map[int64]bool
	others []string
}

// classify records what the code expression e can be.
func (r *luaReader) classify(e string, depth int) error {
	e = strings.Join(strings.Fields(e), " ")
	if depth > 8 {
		return fmt.Errorf("code %q: too deep", e)
	}
	switch {
	case intRe.MatchString(e):
		v, err := strconv.ParseInt(e, 10, 64)
		r.codes[v] = true
		return err
	case identRe.MatchString(e) && e != "false" && e != "true" && e != "nil":
		vals, err := r.valuesOf(e)
		if err != nil {
			return err
		}
		for _, v := range vals {
			if err := r.classify(v, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if m := callRe.FindStringSubmatch(e); m != nil && r.funcs[m[1]] != nil {
		return nil // a local function's reply: read from its own return
	}
	if !slices.Contains(r.others, e) {
		r.others = append(r.others, e)
	}
	return nil
}

// valuesOf is every expression assigned to the local name: the arguments
// given for it when it is a local function's parameter, else the right
// side of its assignments.
func (r *luaReader) valuesOf(name string) ([]string, error) {
	var vals []string
	for f, params := range r.funcs {
		i := slices.Index(params, name)
		if i < 0 {
			continue
		}
		for _, loc := range regexp.MustCompile(`\b`+f+`\(`).FindAllStringIndex(r.src, -1) {
			args, err := balanced(r.src[loc[1]-1:], '(', ')')
			if err != nil {
				return nil, err
			}
			if a := splitTop(args); i < len(a) && !strings.Contains(r.src[max(loc[0]-9, 0):loc[0]], "function") {
				vals = append(vals, a[i])
			}
		}
	}
	for _, l := range r.lines {
		m := assignRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		names, exprs := splitTop(m[1]), splitTop(m[2])
		if i := slices.Index(names, name); i >= 0 && i < len(exprs) {
			vals = append(vals, exprs[i])
		}
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("code %s: no value assigned to it", name)
	}
	return vals, nil
}

// replyCode returns the code expression of the reply that starts s: the
// element pos of a table constructor, or a scalar expression (pos 0).
func replyCode(s string, pos int) (string, error) {
	s = strings.TrimLeft(s, " \t")
	if !strings.HasPrefix(s, "{") {
		if pos != 0 {
			return "", fmt.Errorf("a scalar reply, want a table")
		}
		return strings.TrimSpace(firstLine(s)), nil
	}
	inner, err := balanced(s, '{', '}')
	if err != nil {
		return "", err
	}
	elems := splitTop(inner)
	if pos >= len(elems) {
		return "", fmt.Errorf("%d elements, the code is element %d", len(elems), pos+1)
	}
	return elems[pos], nil
}

// balanced returns the text inside the bracket s starts with.
func balanced(s string, open, close byte) (string, error) {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == open:
			depth++
		case c == close:
			if depth--; depth == 0 {
				return s[1:i], nil
			}
		}
	}
	return "", fmt.Errorf("unbalanced %c in %q", open, firstLine(s))
}

// splitTop splits s at the commas outside brackets and strings, trimmed.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" || len(out) > 0 {
		out = append(out, rest)
	}
	return out
}

// stripComment cuts a Lua line comment that is not inside a string.
func stripComment(l string) string {
	var quote byte
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '-' && i+1 < len(l) && l[i+1] == '-':
			return l[:i]
		}
	}
	return l
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func sortedKeys[V any](m map[int64]V) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestReplyCodesFileIsRead guards replyConsts against reading nothing.
func TestReplyCodesFileIsRead(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("replycodes.go"); err != nil {
		t.Fatal(err)
	}
	consts, types := replyConsts(t)
	if len(types) < 9 || len(consts["reserveCode"]) != 13 {
		t.Fatalf("read %d reply types and %d reserve codes from replycodes.go", len(types), len(consts["reserveCode"]))
	}
	for _, c := range consts["reserveCode"] {
		if c.name == "reserveEnded" && c.value != int64(reserveEnded) {
			t.Fatalf("reserveEnded read as %d, compiled as %d", c.value, reserveEnded)
		}
	}
}
