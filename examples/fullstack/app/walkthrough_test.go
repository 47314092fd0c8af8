package app_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// walkthroughBlock returns the shell block of the README between the
// markers <!-- walkthrough:NAME:begin --> and <!-- walkthrough:NAME:end -->.
func walkthroughBlock(t *testing.T, readme, name string) string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<!-- walkthrough:` + name + `:begin -->\s*` + "```sh\n(.*?)```" + `\s*<!-- walkthrough:` + name + `:end -->`)
	m := re.FindStringSubmatch(readme)
	if m == nil {
		t.Fatalf("README: no walkthrough:%s block", name)
	}
	return m[1]
}

// TestREADMEWalkthrough runs the README's curl walkthrough, the buyer's
// block and then the operator's, as they stand, with bash against a server
// started as `go run ./examples/fullstack` starts it (embedded, demo mode,
// the admin API on), the sale open. Each command must succeed (set -e,
// curl -f where the README uses it, jq -e on the claims it makes), so a
// walkthrough that drifts from the API fails here.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH: the README's walkthrough uses bash, curl and jq", tool)
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script := "set -euo pipefail\n" + walkthroughBlock(t, string(b), "buyer") + walkthroughBlock(t, string(b), "operator")

	cfg := embeddedConfig(100, 5)
	cfg.AdminAddr, cfg.AdminToken = "127.0.0.1:0", randHex(24)
	a, url := startApp(t, cfg)
	if a.AdminURL() == "" {
		t.Fatal("the admin API did not start")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(), "BASE="+url, "ADMIN="+a.AdminURL()+"/admin", "SECKILL_ADMIN_TOKEN="+cfg.AdminToken)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Logf("walkthrough output:\n%s", got)
	for _, want := range []string{`unknown field \"colour\"`, `"paid"`, `"action": "topup"`, `"status": "REFUNDED"`, `"restock": "sale"`, `"action": "refund"`} {
		if !strings.Contains(got, want) {
			t.Errorf("walkthrough output lacks %s", want)
		}
	}
}
