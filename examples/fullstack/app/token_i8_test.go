package app_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// TestTokenPoolLostMidSaleIsBusy (item 8): Redis lost the access-token
// pool while the sale runs (data loss; the pool is issued again after the
// rebuild). POST /api/activity/token answers 503 busy with Retry-After —
// retry shortly — not 425 not_started: the sale's own window is open.
func TestTokenPoolLostMidSaleIsBusy(t *testing.T) {
	a, base := startApp(t, embeddedConfig(10, 5)) // the sale runs from the start
	mini := app.Miniredis(a)
	if mini == nil {
		t.Skip("needs the embedded Redis to drop keys")
	}
	u := login(t, base, "user1")
	hdr := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + u.bearer}
	dropped := 0
	for _, k := range mini.Keys() {
		if strings.Contains(k, "}:tok:") {
			mini.Del(k)
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatalf("no token pool keys among %v", mini.Keys())
	}
	code, h, m := rawDo(t, "POST", base+"/api/activity/token", hdr, "{}")
	wantErrShape(t, "token without a pool", m)
	if code != http.StatusServiceUnavailable || m["status"] != "busy" {
		t.Errorf("token while the pool is lost mid-sale: %d %v, want 503 busy", code, m)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want seconds", h.Get("Retry-After"))
	}
}
