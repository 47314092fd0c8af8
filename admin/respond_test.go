package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/internal/testenv"
)

// mustBuyerShape fails unless body is one JSON object with exactly the
// string members "status" and "message", both non-empty, and returns it.
func mustBuyerShape(t *testing.T, body string) admin.ErrorAnswer {
	t.Helper()
	var e admin.ErrorAnswer
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("not the buyer API's error shape: %s (%v)", body, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("trailing data after the error object: %s", body)
	}
	// DisallowUnknownFields matches member names case-insensitively:
	// check the exact names and that both are strings.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if len(raw) != 2 || !isJSONString(raw["status"]) || !isJSONString(raw["message"]) {
		t.Fatalf("want exactly {\"status\":string,\"message\":string}, got %s", body)
	}
	if e.Status == "" || e.Message == "" {
		t.Fatalf("empty status or message: %s", body)
	}
	return e
}

func isJSONString(m json.RawMessage) bool {
	var s string
	return len(m) > 0 && m[0] == '"' && json.Unmarshal(m, &s) == nil
}

// Every error path of the admin API answers the buyer API's shape
// {"status":"<code>","message":"<text>"}, with the code's HTTP status, a
// JSON Content-Type and no internal error text.
func TestEveryErrorHasTheBuyerShape(t *testing.T) {
	const secret = "dial tcp 10.1.2.3:6379: password=hunter2"
	P, G := http.MethodPost, http.MethodGet
	for _, tc := range []struct {
		name   string
		do     func(f *fixture) resp
		status int
		code   string
	}{
		{"401 no token", func(f *fixture) resp {
			return f.do(req{method: G, path: "/admin/activities/a1/stats", token: "-"})
		}, 401, admin.CodeUnauthorized},
		{"401 unknown route before auth", func(f *fixture) resp {
			return f.do(req{method: G, path: "/admin/nothing", token: "wrong-token-wrong-token"})
		}, 401, admin.CodeUnauthorized},
		{"403", func(f *fixture) resp {
			h, err := admin.New(f.mem, f.db, func(*http.Request) (string, error) {
				return "", fmt.Errorf("role viewer: %w", admin.ErrForbidden)
			}, admin.WithPrefix("/admin/"))
			if err != nil {
				f.t.Fatal(err)
			}
			g := &fixture{t: f.t, h: h, db: f.db, mem: f.mem, table: f.table}
			return g.post("/admin/activities/a1/pause", `{}`, "")
		}, 403, admin.CodeForbidden},
		{"404 route", func(f *fixture) resp { return f.get("/admin/nothing") }, 404, admin.CodeNotFound},
		{"404 outside prefix", func(f *fixture) resp { return f.get("/elsewhere/activities/a1/stats") }, 404, admin.CodeNotFound},
		{"404 activity", func(f *fixture) resp { return f.post("/admin/activities/zz/pause", `{}`, "") }, 404, admin.CodeNotFound},
		{"405", func(f *fixture) resp { return f.get("/admin/activities/a1/pause") }, 405, admin.CodeMethodNotAllowed},
		{"415", func(f *fixture) resp {
			return f.do(req{method: P, path: "/admin/activities/a1/pause", body: `{}`, contentType: "text/plain"})
		}, 415, admin.CodeUnsupportedMedia},
		{"413", func(f *fixture) resp {
			return f.post("/admin/activities/a1/topup", `{"n":1`+strings.Repeat(" ", 300)+`}`, "")
		}, 413, admin.CodePayloadTooLarge},
		{"400 bad JSON", func(f *fixture) resp { return f.post("/admin/activities/a1/topup", `{"n":`, "") }, 400, admin.CodeBadRequest},
		{"400 unknown query", func(f *fixture) resp { return f.get("/admin/activities/a1/stats?verbose=1") }, 400, admin.CodeBadRequest},
		{"400 invalid argument", func(f *fixture) resp { return f.post("/admin/activities/a1/topup", `{"n":0}`, "") }, 400, admin.CodeInvalidArgument},
		{"422 key reused", func(f *fixture) resp {
			f.mustOK(f.post("/admin/activities/a1/pause", `{}`, "k1"), nil)
			return f.post("/admin/activities/a1/resume", `{}`, "k1")
		}, 422, admin.CodeKeyReused},
		{"409 conflict", func(f *fixture) resp { return f.post("/admin/activities/a1/withdraw", `{"n":4}`, "") }, 409, admin.CodeConflict},
		{"409 conflict replayed", func(f *fixture) resp {
			first := f.post("/admin/activities/a1/withdraw", `{"n":4}`, "k2")
			again := f.post("/admin/activities/a1/withdraw", `{"n":4}`, "k2")
			if again.header.Get("Idempotent-Replayed") != "true" || again.body != first.body {
				f.t.Fatalf("replay %q (replayed=%q), first %q", again.body, again.header.Get("Idempotent-Replayed"), first.body)
			}
			return again
		}, 409, admin.CodeConflict},
		{"409 dry run required", func(f *fixture) resp {
			return f.post("/admin/activities/a1/reconcile", `{"apply":true}`, "")
		}, 409, admin.CodeDryRunRequired},
		{"409 in progress", func(f *fixture) resp {
			f.mustOK(f.post("/admin/activities/a1/pause", `{}`, "k3"), nil)
			// The first request's row as it is while that request runs.
			if err := f.db.Table(f.table).Where("idempotency_key = ?", "k3").Update("status", admin.AuditAttempt).Error; err != nil {
				f.t.Fatal(err)
			}
			return f.post("/admin/activities/a1/pause", `{}`, "k3")
		}, 409, admin.CodeInProgress},
		{"500 internal", func(f *fixture) resp {
			f.mem.Fail["topup"] = errors.New(secret)
			return f.post("/admin/activities/a1/topup", `{"n":1}`, "")
		}, 500, admin.CodeInternal},
		{"503 unavailable", func(f *fixture) resp {
			f.mem.Fail["pause"] = fmt.Errorf("%s: %w", secret, admin.ErrUnavailable)
			return f.post("/admin/activities/a1/pause", `{}`, "")
		}, 503, admin.CodeUnavailable},
		{"503 unavailable read", func(f *fixture) resp {
			f.mem.Fail["stats"] = fmt.Errorf("%s: %w", secret, admin.ErrUnavailable)
			return f.get("/admin/activities/a1/stats")
		}, 503, admin.CodeUnavailable},
		{"503 audit unavailable", func(f *fixture) resp {
			if err := f.db.Migrator().DropTable(f.table); err != nil {
				f.t.Fatal(err)
			}
			return f.post("/admin/activities/a1/pause", `{}`, "")
		}, 503, admin.CodeAuditUnavailable},
		{"504 timeout", func(f *fixture) resp {
			f.mem.Fail["pause"] = fmt.Errorf("%s: %w", secret, context.DeadlineExceeded)
			return f.post("/admin/activities/a1/pause", `{}`, "")
		}, 504, admin.CodeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testenv.SQLite(t), admin.WithMaxBody(256))
			f.load("a1", 3)
			r := tc.do(f)
			if r.status != tc.status {
				t.Fatalf("HTTP %d, want %d; body %s", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			e := mustBuyerShape(t, r.body)
			if e.Status != tc.code {
				t.Fatalf("status %q, want %q; body %s", e.Status, tc.code, r.body)
			}
			if strings.Contains(r.body, "hunter2") || strings.Contains(r.body, "10.1.2.3") {
				t.Fatalf("internal error text sent: %s", r.body)
			}
		})
	}
}

// admin.ErrorAnswer encodes as {"status","message"} and nothing else: the
// one error type of the library's HTTP APIs (checkouthttp answers the
// buyer's refusals in it; internal/workspace's TestOneErrorAnswerType
// checks that no other package declares the shape again).
func TestErrorAnswerIsTheBuyerShape(t *testing.T) {
	b, err := json.Marshal(admin.ErrorAnswer{Status: admin.CodeConflict, Message: "m"})
	if err != nil || string(b) != `{"status":"conflict","message":"m"}` {
		t.Fatalf("encoded %s (%v)", b, err)
	}
	if e := mustBuyerShape(t, string(b)); e != (admin.ErrorAnswer{Status: admin.CodeConflict, Message: "m"}) {
		t.Fatalf("decoded %+v", e)
	}
}
