package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/admin"
)

// TestBodilessPost: pause and resume take {} or nothing, and nothing means
// no body and no Content-Type (curl -X POST): it acts, once. A change that
// needs fields, sent without a body, names the missing field (400), not a
// media type; a body without application/json is still 415.
func TestBodilessPost(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	P := http.MethodPost
	before := f.mem.Calls("pause")
	if r := f.do(req{method: P, path: "/admin/activities/a1/pause", contentType: "-", key: "k1"}); r.status != 200 {
		t.Fatalf("bodiless pause: %d %s", r.status, r.body)
	}
	if got := f.mem.Calls("pause") - before; got != 1 {
		t.Errorf("pause reached the backend %d times, want 1", got)
	}
	if r := f.do(req{method: P, path: "/admin/activities/a1/topup", contentType: "-", key: "k2"}); r.status != 400 || !strings.Contains(r.body, admin.CodeInvalidArgument) {
		t.Errorf("bodiless topup: %d %s, want 400 %s", r.status, r.body, admin.CodeInvalidArgument)
	}
	if r := f.do(req{method: P, path: "/admin/activities/a1/resume", body: "{}", contentType: "-", key: "k3"}); r.status != 415 {
		t.Errorf("a body without a Content-Type: %d %s, want 415", r.status, r.body)
	}
}
