package limiter_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoRedisClientDependency: the package links no Redis client; the
// Redis limiters and their go-redis dependency are in the redislimit
// sub-package, which imports limiter, never the reverse. go list -deps
// lists the non-test imports only.
func TestNoRedisClientDependency(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/redis/go-redis/") ||
			strings.HasPrefix(d, "github.com/seckillkit/seckill/limiter/") {
			t.Errorf("limiter depends on %s", d)
		}
	}
}
