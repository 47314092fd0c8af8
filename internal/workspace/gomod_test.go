package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// notInTheLibrary names the modules the library's go.mod must never require:
// the anchors of the side-by-side benchmarks (they live in bench/go.mod) and
// the dependencies of the reference deployment and the observer adapters
// (examples/fullstack/go.mod, contrib/*/go.mod). go.mod does not separate
// test-only requirements, so any of them listed in the root go.mod would
// reach every service that imports one package of the library, and minimal
// version selection would raise it there to our version.
var notInTheLibrary = []struct{ path, where string }{
	{"golang.org/x/time", "bench (anchor)"},
	{"github.com/go-redis/redis_rate", "bench (anchor)"},
	{"github.com/sony/gobreaker", "bench (anchor)"},
	{"github.com/prometheus/", "examples/fullstack, contrib/prometheus"},
	{"go.opentelemetry.io/", "contrib/otel"},
	{"github.com/valyala/fasthttp", "examples/fullstack"},
	{"github.com/chromedp/", "examples/fullstack"},
	{"github.com/schollz/progressbar", "examples/fullstack"},
	{"github.com/spf13/cobra", "examples/fullstack"},
	{"github.com/coder/websocket", "examples/fullstack"},
	{"github.com/gorilla/websocket", "examples/fullstack"},
	{"github.com/Shopify/toxiproxy", "examples/fullstack"},
	{"github.com/rs/zerolog", "examples/fullstack"},
}

// bannedModules returns each line of the go.mod text that names a module
// of notInTheLibrary (in a require, replace, exclude or tool directive),
// with where that module belongs.
func bannedModules(gomod string) []string {
	var out []string
	for i, line := range strings.Split(gomod, "\n") {
		if c := strings.Index(line, "//"); c >= 0 {
			line = line[:c]
		}
		for _, field := range strings.Fields(line) {
			for _, m := range notInTheLibrary {
				if field == m.path || strings.HasPrefix(field, strings.TrimSuffix(m.path, "/")+"/") {
					out = append(out, "line "+strconv.Itoa(i+1)+": "+strings.TrimSpace(line)+" (belongs in "+m.where+")")
				}
			}
		}
	}
	return out
}

// TestRootGoModIsLean: the library's go.mod requires only what the
// library's packages and their own tests import. The benchmarks that run an
// anchor library side by side are in the bench module, the reference
// deployment and the observer adapters in theirs.
func TestRootGoModIsLean(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "module github.com/seckillkit/seckill\n") {
		t.Fatalf("../../go.mod is not the library's go.mod:\n%s", b)
	}
	for _, l := range bannedModules(string(b)) {
		t.Errorf("root go.mod %s", l)
	}
}

// TestBannedModules: the check itself finds a banned module in each
// directive form, by module path and not by substring.
func TestBannedModules(t *testing.T) {
	gomod := `module github.com/seckillkit/seckill

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sony/gobreaker/v2 v2.4.0
	golang.org/x/time v0.16.0 // indirect
	golang.org/x/timeout v1.0.0
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheusx/other v1.0.0
)

require github.com/go-redis/redis_rate/v10 v10.0.1

replace github.com/spf13/cobra => ../cobra

// golang.org/x/time is only a comment here
`
	got := bannedModules(gomod)
	want := []string{"gobreaker/v2", "golang.org/x/time v0.16.0", "client_golang", "redis_rate/v10", "spf13/cobra"}
	if len(got) != len(want) {
		t.Fatalf("found %d lines, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("finding %d = %q, want it to name %q", i, got[i], w)
		}
	}
	if bad := bannedModules("module github.com/seckillkit/seckill\n\nrequire github.com/redis/go-redis/v9 v9.23.0\n"); len(bad) != 0 {
		t.Errorf("a clean go.mod: %q", bad)
	}
}
