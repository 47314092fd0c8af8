// Tests of examples/fullstack/deploy/observability: the alert rules
// (alerts.yml), their promtool unit tests (alerts_test.yml) and the Grafana
// dashboard (dashboard.json).
//
//   - TestRulesFile, TestRulesTestsCoverEveryAlert and TestDashboard parse the
//     files and check their shape: every alert has a severity, a summary
//     and a description, and a promtool test case where it fires and one
//     where it does not; every dashboard panel has a query.
//   - TestMetricNamesExist checks every metric name an alert or a panel uses
//     against the metrics the code exports, read from the Go sources: the
//     example's registry (examples/fullstack/app), the Prometheus adapter's
//     fixed metrics (contrib/prometheus) and its gauges, one per gauge stage
//     a package reports ("seckill_" + stage with '.' → '_'). A renamed
//     metric fails here.
//   - TestPromtool runs `promtool check rules` and `promtool test rules`, and
//     checks the dashboard's queries as PromQL, when promtool (Debian
//     package prometheus) is on PATH or named by $PROMTOOL; it skips with
//     the reason otherwise.
package observability_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	rulesFile     = "alerts.yml"
	rulesTestFile = "alerts_test.yml"
	dashboardFile = "dashboard.json"
	modulePath    = "github.com/seckillkit/seckill"
	observePath   = modulePath + "/observe"
)

// ---- the files ----

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type rulesTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// loadYAML decodes the file name into v; strict, it refuses fields v does
// not have.
func loadYAML(t *testing.T, name string, v any, strict bool) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	loadYAML(t, rulesFile, &f, true)
	var rules []rule
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Fatalf("%s: group %q without a name or rules", rulesFile, g.Name)
		}
		rules = append(rules, g.Rules...)
	}
	return rules
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// panels flattens the dashboard's panels, rows' nested ones included.
func (d dashboard) panels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// query is one PromQL expression and where it comes from.
type query struct{ where, expr string }

func queries(t *testing.T) []query {
	t.Helper()
	var qs []query
	for _, r := range loadRules(t) {
		qs = append(qs, query{fmt.Sprintf("%s alert %s", rulesFile, r.Alert), r.Expr})
	}
	for _, p := range loadDashboard(t).panels() {
		for _, tg := range p.Targets {
			qs = append(qs, query{fmt.Sprintf("%s panel %d %q target %s", dashboardFile, p.ID, p.Title, tg.RefID), tg.Expr})
		}
	}
	return qs
}

// ---- shape ----

func TestRulesFile(t *testing.T) {
	rules := loadRules(t)
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" || r.Record != "" {
			t.Errorf("rule %q/%q: only alerting rules belong in %s", r.Alert, r.Record, rulesFile)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if strings.TrimSpace(r.Expr) == "" {
			t.Errorf("alert %s: no expr", r.Alert)
		}
		if r.For != "" {
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
		}
		if s := r.Labels["severity"]; s != "page" && s != "ticket" {
			t.Errorf("alert %s: severity %q, want page or ticket", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("alert %s: no %s annotation", r.Alert, a)
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("%d alerts, want the 10 of the README", len(seen))
	}
}

func TestRulesTestsCoverEveryAlert(t *testing.T) {
	alerts := map[string]bool{}
	for _, r := range loadRules(t) {
		alerts[r.Alert] = true
	}
	var f rulesTests
	loadYAML(t, rulesTestFile, &f, false)
	if len(f.RuleFiles) != 1 || f.RuleFiles[0] != rulesFile {
		t.Fatalf("%s tests %v, want [%s]", rulesTestFile, f.RuleFiles, rulesFile)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range f.Tests {
		for _, c := range tc.AlertRuleTest {
			if !alerts[c.Alertname] {
				t.Errorf("test %q checks alert %q, which %s does not define", tc.Name, c.Alertname, rulesFile)
			}
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				quiet[c.Alertname]++
			}
		}
	}
	for a := range alerts {
		if fires[a] == 0 || quiet[a] == 0 {
			t.Errorf("alert %s: %d firing and %d non-firing cases in %s, want at least one of each", a, fires[a], quiet[a], rulesTestFile)
		}
	}
}

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Fatalf("uid %q title %q: both needed", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["job"] != "query" {
		t.Fatalf("template variables %v, want datasource (datasource) and job (query)", vars)
	}
	ids := map[int]string{}
	queried := 0
	for _, p := range d.panels() {
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %q with expr %q (empty or repeated)", p.Title, tg.RefID, tg.Expr)
			}
			refs[tg.RefID] = true
			if !strings.Contains(tg.Expr, `job=~"$job"`) {
				t.Errorf("panel %q target %s: not filtered by the job variable: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
		queried++
	}
	if queried < 15 {
		t.Fatalf("%d panels with queries", queried)
	}
}

// ---- metric names against the code ----

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	seckillTok = regexp.MustCompile(`\bseckill_[A-Za-z0-9_:]*`)
	stageLit   = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
)

// metricNames returns the seckill_ metric names expr refers to (quoted
// label values left out).
func metricNames(expr string) []string {
	return seckillTok.FindAllString(quoted.ReplaceAllString(expr, `""`), -1)
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (stage) (rate(seckill_events_total{stage="seckill_not_a_metric", job=~"$job"}[5m])) / on (job) seckill_x:y`)
	if fmt.Sprint(got) != "[seckill_events_total seckill_x:y]" {
		t.Fatalf("metricNames: %v", got)
	}
}

// exported is what the code exports: metric name → where it is defined.
type exported map[string]string

func (e exported) add(name, kind, where string) {
	e[name] = where
	switch kind {
	case "Histogram":
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			e[name+s] = where
		}
	case "Summary":
		for _, s := range []string{"_sum", "_count"} {
			e[name+s] = where
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(b), "module "+modulePath+"\n") {
		t.Fatalf("%s is not the root of %s (%v)", root, modulePath, err)
	}
	return root
}

// goFiles parses the non-test Go files of dir (not its subdirectories).
func goFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// stringConsts maps the package-level string constants of files to their
// values (plain literals only).
func stringConsts(files []*ast.File) map[string]string {
	consts := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[n.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return consts
}

// promMetrics adds the metrics dir's Go files declare through
// prometheus.{Counter,Gauge,Histogram,Summary}Opts literals whose Name (and
// Namespace, Subsystem) is a string literal or a package constant.
func promMetrics(t *testing.T, e exported, dir, where string) int {
	t.Helper()
	files := goFiles(t, dir)
	consts := stringConsts(files)
	str := func(x ast.Expr) (string, bool) {
		switch v := x.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(v.Value)
			return s, err == nil
		case *ast.Ident:
			s, ok := consts[v.Name]
			return s, ok
		}
		return "", false
	}
	n := 0
	for _, f := range files {
		ast.Inspect(f, func(node ast.Node) bool {
			cl, ok := node.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := cl.Type.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			kind, ok := strings.CutSuffix(sel.Sel.Name, "Opts")
			if !ok || (kind != "Counter" && kind != "Gauge" && kind != "Histogram" && kind != "Summary") {
				return true
			}
			parts := map[string]string{}
			for _, el := range cl.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				k, ok := kv.Key.(*ast.Ident)
				if !ok {
					continue
				}
				// A computed name (the adapter's gauges) is left out:
				// those are matched by stage below.
				if s, ok := str(kv.Value); ok {
					parts[k.Name] = s
				}
			}
			var name []string
			for _, k := range []string{"Namespace", "Subsystem", "Name"} {
				if parts[k] != "" {
					name = append(name, parts[k])
				}
			}
			if parts["Name"] != "" {
				e.add(strings.Join(name, "_"), kind, where)
				n++
			}
			return true
		})
	}
	return n
}

// stageScan is what the repository's Go sources say about stages.
type stageScan struct {
	stages    map[string]string // stage literal → file
	reporters map[string]bool   // top-level package → imports observe
	packages  map[string]bool   // top-level package directories
}

// scanStages walks every non-test Go file of the repository except
// contrib/ (the adapters) and this directory, collecting string literals
// shaped like stages ("<package>.<operation>" of a top-level package) and
// which top-level packages import the observer.
func scanStages(t *testing.T, root string) stageScan {
	t.Helper()
	s := stageScan{stages: map[string]string{}, reporters: map[string]bool{}, packages: map[string]bool{}}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && e.Name() != "internal" && e.Name() != "examples" && e.Name() != "contrib" && e.Name() != "docs" && !strings.HasPrefix(e.Name(), ".") {
			if m, _ := filepath.Glob(filepath.Join(root, e.Name(), "*.go")); len(m) > 0 {
				s.packages[e.Name()] = true
			}
		}
	}
	self, _ := filepath.Abs(".")
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "contrib" || path == self || (strings.HasPrefix(d.Name(), ".") && rel != ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == observePath && s.packages[top] {
				s.reporters[top] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err == nil && stageLit.MatchString(v) && s.packages[strings.Split(v, ".")[0]] {
				s.stages[v] = rel
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMetricNamesExist: every seckill_ metric an alert or a panel queries
// is exported by the example or by the Prometheus adapter. A gauge of the
// adapter ("seckill_" + stage, '.' → '_') counts when a package reports
// that stage; a gauge of a package that does not report to the observer at
// all yet is skipped, with the reason.
func TestMetricNamesExist(t *testing.T) {
	root := repoRoot(t)
	known := exported{}
	if n := promMetrics(t, known, filepath.Join(root, "examples", "fullstack", "app"), "examples/fullstack/app"); n < 10 {
		t.Fatalf("read %d metrics from examples/fullstack/app: the parser no longer finds them", n)
	}
	adapter := filepath.Join(root, "contrib", "prometheus")
	if n := promMetrics(t, known, adapter, "contrib/prometheus"); n < 3 {
		t.Fatalf("read %d metrics from contrib/prometheus, want its 3 fixed ones", n)
	}
	gaugePrefix := stringConsts(goFiles(t, adapter))["GaugePrefix"]
	if gaugePrefix != "seckill_" {
		t.Fatalf("contrib/prometheus GaugePrefix %q: the gauge naming this test assumes changed", gaugePrefix)
	}
	scan := scanStages(t, root)
	gauges := map[string]string{} // adapter gauge name → stage
	for st := range scan.stages {
		gauges[gaugePrefix+strings.ReplaceAll(st, ".", "_")] = st
	}

	used := map[string][]string{} // name → where
	for _, q := range queries(t) {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s queries no seckill_ metric: %s", q.where, q.expr)
		}
		for _, n := range names {
			if w := used[n]; len(w) == 0 || w[len(w)-1] != q.where {
				used[n] = append(w, q.where)
			}
		}
	}
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if where, ok := known[name]; ok {
				t.Logf("exported by %s", where)
				return
			}
			if st, ok := gauges[name]; ok {
				t.Logf("gauge of stage %s (reported in %s) through contrib/prometheus", st, scan.stages[st])
				return
			}
			pkg := ""
			for p := range scan.packages {
				if strings.HasPrefix(name, gaugePrefix+p+"_") && len(p) > len(pkg) {
					pkg = p
				}
			}
			if pkg != "" && !scan.reporters[pkg] {
				t.Skipf("%s would be the contrib/prometheus gauge of a %s.* stage, and package %s does not report to the observer (%s) yet: checked once it does", name, pkg, pkg, observePath)
			}
			t.Errorf("%s (used by %s) is neither a metric of examples/fullstack/app or contrib/prometheus nor the gauge of a stage any package reports (stages found: %v)", name, strings.Join(used[name], "; "), sortedKeys(scan.stages))
		})
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- promtool ----

func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH and $PROMTOOL unset (Debian package prometheus ships it; `apt-get download prometheus && dpkg -x prometheus_*.deb DIR` gives DIR/usr/bin/promtool without the daemon): alerts.yml and the dashboard's PromQL are checked by the parser tests only")
	}
	return p
}

func runPromtool(t *testing.T, bin, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// grafanaVars replaces the dashboard's variables by values PromQL accepts.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", `"$job"`, `".*"`)

func TestPromtool(t *testing.T) {
	bin := promtool(t)
	runPromtool(t, bin, ".", "check", "rules", rulesFile)
	runPromtool(t, bin, ".", "test", "rules", rulesTestFile)

	// The dashboard's queries, as recording rules promtool parses.
	type rec struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var recs []rec
	for _, p := range loadDashboard(t).panels() {
		for _, tg := range p.Targets {
			expr := grafanaVars.Replace(tg.Expr)
			if strings.Contains(expr, "$") {
				t.Fatalf("panel %q: a Grafana variable this test does not replace: %s", p.Title, tg.Expr)
			}
			recs = append(recs, rec{fmt.Sprintf("dashboard:panel%d_%s", p.ID, tg.RefID), expr})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": recs}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard_rules.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, dir, "check", "rules", "dashboard_rules.yml")
}
