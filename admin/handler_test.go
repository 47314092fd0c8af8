package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/admin/admintest"
	"github.com/seckillkit/seckill/internal/testenv"
)

// A pause and a replay of it with the same Idempotency-Key are one action
// and one audit row; the same key on another request is refused.
func TestPauseReplayedIsOneActionOneRow(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.load("a1", 10)

		first := f.post("/admin/activities/a1/pause", `{}`, "k-pause-1")
		var ch admin.Change
		f.mustOK(first, &ch)
		if ch.Before.Paused || !ch.After.Paused || ch.After.Remaining != 10 {
			t.Fatalf("change %+v", ch)
		}
		again := f.post("/admin/activities/a1/pause", `{}`, "k-pause-1")
		f.mustOK(again, nil)
		if again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay answered %s (replayed=%q), first %s", again.body, again.header.Get("Idempotent-Replayed"), first.body)
		}
		if n := f.mem.Calls("pause"); n != 1 {
			t.Fatalf("pause reached the backend %d times, want 1", n)
		}
		// The same key for a different request acts not and writes nothing.
		f.mustError(f.post("/admin/activities/a1/resume", `{}`, "k-pause-1"), http.StatusUnprocessableEntity, admin.CodeKeyReused)
		if n := f.mem.Calls("resume"); n != 0 {
			t.Fatalf("resume reached the backend %d times", n)
		}

		rows := f.rows()
		if len(rows) != 2 { // load + pause
			t.Fatalf("%d audit rows, want 2: %+v", len(rows), rows)
		}
		p := rows[1]
		if p.Action != "pause" || p.Activity != "a1" || p.Status != admin.AuditOK || p.HTTPStatus != 200 ||
			p.IdempotencyKey == nil || *p.IdempotencyKey != "k-pause-1" || !strings.HasPrefix(p.Operator, "token:") ||
			p.RequestID != first.header.Get("X-Request-ID") {
			t.Fatalf("pause row %+v", p)
		}
		if jsonField(t, p.StateBefore, "paused") != false || jsonField(t, p.StateAfter, "paused") != true {
			t.Fatalf("before %s after %s", p.StateBefore, p.StateAfter)
		}
		if strings.TrimSpace(first.body) != p.Response {
			t.Fatalf("stored answer %s, sent %s", p.Response, first.body)
		}
		if rows[0].IdempotencyKey != nil {
			t.Fatalf("load without a key stored key %q", *rows[0].IdempotencyKey)
		}
		// Keys are per operator: another operator's same key is a new action.
		h2, err := admin.New(f.mem, db, func(*http.Request) (string, error) { return "alice", nil }, admin.WithPrefix("/admin/"))
		if err != nil {
			t.Fatal(err)
		}
		g := &fixture{t: t, h: h2, db: db, mem: f.mem, table: auditTable}
		g.mustOK(g.post("/admin/activities/a1/pause", `{}`, "k-pause-1"), nil)
		if n := f.mem.Calls("pause"); n != 2 {
			t.Fatalf("alice's pause reached the backend %d times in all, want 2", n)
		}
		if rows = f.rows(); len(rows) != 3 || rows[2].Operator != "alice" {
			t.Fatalf("rows after alice's pause: %+v", rows)
		}
	})
}

// Concurrent requests with one key: one action, one row; every other answer
// is the replay or 409 in_progress.
func TestConcurrentSameKeyActsOnce(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.load("a1", 100)
		const n = 8
		var wg sync.WaitGroup
		codes := make([]int, n)
		for i := range n {
			wg.Go(func() {
				codes[i] = f.post("/admin/activities/a1/topup", `{"n":5}`, "k-topup").status
			})
		}
		wg.Wait()
		for _, c := range codes {
			if c != http.StatusOK && c != http.StatusConflict {
				t.Fatalf("answers %v", codes)
			}
		}
		if c := f.mem.Calls("topup"); c != 1 {
			t.Fatalf("topup reached the backend %d times", c)
		}
		var s admin.Stats
		f.mustOK(f.get("/admin/activities/a1/stats"), &s)
		if s.Redis.Remaining != 105 || s.Redis.Total != 105 {
			t.Fatalf("stats %+v", s.Redis)
		}
		if rows := f.rows(); len(rows) != 2 {
			t.Fatalf("%d audit rows, want 2", len(rows))
		}
	})
}

func TestAuthRefusals(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	before := len(f.rows())
	for _, tc := range []struct {
		name, token, path, method string
	}{
		{"no token, action", "-", "/admin/activities/a1/pause", http.MethodPost},
		{"wrong token, action", "s3cret-admin-token-for-tests-012345678Z", "/admin/activities/a1/pause", http.MethodPost},
		{"wrong token, read", "nope", "/admin/activities/a1/stats", http.MethodGet},
		{"no token, unknown route", "-", "/admin/nothing", http.MethodGet},
		{"no token, audit", "-", "/admin/audit", http.MethodGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(req{method: tc.method, path: tc.path, body: `{}`, token: tc.token})
			f.mustError(r, http.StatusUnauthorized, admin.CodeUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
	if n := f.mem.Calls("pause") + f.mem.Calls("stats"); n != 0 {
		t.Fatalf("refused requests reached the backend %d times", n)
	}
	if n := len(f.rows()); n != before {
		t.Fatalf("refused requests wrote %d audit rows", n-before)
	}

	// A hook's ErrForbidden is 403; an empty operator is refused.
	db := testenv.SQLite(t)
	for _, tc := range []struct {
		auth   admin.Authenticator
		status int
		code   string
	}{
		{func(*http.Request) (string, error) { return "", fmt.Errorf("role viewer: %w", admin.ErrForbidden) }, 403, admin.CodeForbidden},
		{func(*http.Request) (string, error) { return "", nil }, 401, admin.CodeUnauthorized},
		{func(*http.Request) (string, error) { return "bad\noperator", nil }, 401, admin.CodeUnauthorized},
		{func(*http.Request) (string, error) { return strings.Repeat("x", 129), nil }, 401, admin.CodeUnauthorized},
	} {
		h, err := admin.New(f.mem, db, tc.auth)
		if err != nil {
			t.Fatal(err)
		}
		g := &fixture{t: t, h: h, db: db, mem: f.mem, table: auditTable}
		g.mustError(g.do(req{method: http.MethodPost, path: "/activities/a1/pause", body: `{}`}), tc.status, tc.code)
	}
	if n := f.mem.Calls("pause"); n != 0 {
		t.Fatalf("refused requests reached the backend %d times", n)
	}
}

func TestNewRefusesBadArguments(t *testing.T) {
	db := testenv.SQLite(t)
	mem := admintest.NewMemory()
	auth, err := admin.BearerToken(testToken, testLabelKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.BearerToken("short", testLabelKey); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Fatalf("short secret: %v", err)
	}
	for name, f := range map[string]func() error{
		"nil auth":    func() error { _, err := admin.New(mem, db, nil); return err },
		"nil backend": func() error { _, err := admin.New(nil, db, auth); return err },
		"nil db":      func() error { _, err := admin.New(mem, nil, auth); return err },
		"bad table":   func() error { _, err := admin.New(mem, db, auth, admin.WithTable("Audit; drop")); return err },
		"long table":  func() error { _, err := admin.New(mem, db, auth, admin.WithTable(strings.Repeat("a", 49))); return err },
		"bad prefix":  func() error { _, err := admin.New(mem, db, auth, admin.WithPrefix("admin")); return err },
		"nil clock":   func() error { _, err := admin.New(mem, db, auth, admin.WithClock(nil)); return err },
		"zero body":   func() error { _, err := admin.New(mem, db, auth, admin.WithMaxBody(0)); return err },
		"zero window": func() error { _, err := admin.New(mem, db, auth, admin.WithDryRunWindow(0)); return err },
		// A nil logger is bad configuration, as everywhere in the library
		// (it was ignored: the default logger took its place).
		"nil logger":   func() error { _, err := admin.New(mem, db, auth, admin.WithLogger(nil)); return err },
		"zero timeout": func() error { _, err := admin.New(mem, db, auth, admin.WithActionTimeout(0)); return err },
	} {
		if err := f(); !errors.Is(err, admin.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := admin.New(mem, db, auth, nil, admin.WithTable("ops_audit")); err != nil {
		t.Fatalf("nil option: %v", err)
	}
}

// Bad input: the JSON error shape, nothing reaches the backend, no audit row.
func TestBadInput(t *testing.T) {
	f := newFixture(t, nil, admin.WithMaxBody(256))
	f.load("a1", 10)
	f.mem.AddOutbox(1, "FAILED")
	rowsBefore := len(f.rows())
	callsBefore := map[string]int{}
	ops := []string{"load", "pause", "resume", "topup", "withdraw", "reconcile_dry", "reconcile_apply", "outbox_retry", "ban", "unban", "stats", "reservations", "story", "bans"}
	for _, op := range ops {
		callsBefore[op] = f.mem.Calls(op)
	}
	long := strings.Repeat("a", 65)
	P, G := http.MethodPost, http.MethodGet
	for _, tc := range []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"id alphabet", req{method: P, path: "/admin/activities/a%21b/pause", body: `{}`}, 400, admin.CodeInvalidArgument},
		{"id too long", req{method: P, path: "/admin/activities/" + long + "/pause", body: `{}`}, 400, admin.CodeInvalidArgument},
		{"read id", req{method: G, path: "/admin/activities/a%20b/stats"}, 400, admin.CodeInvalidArgument},
		{"story id", req{method: G, path: "/admin/activities/a1/reservations/r%2Fx"}, 404, admin.CodeNotFound},
		{"no content type", req{method: P, path: "/admin/activities/a1/pause", body: `{}`, contentType: "-"}, 415, admin.CodeUnsupportedMedia},
		{"text content type", req{method: P, path: "/admin/activities/a1/pause", body: `{}`, contentType: "text/plain"}, 415, admin.CodeUnsupportedMedia},
		{"unknown field", req{method: P, path: "/admin/activities/a1/pause", body: `{"force":true}`}, 400, admin.CodeBadRequest},
		{"unknown field topup", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":1,"m":2}`}, 400, admin.CodeBadRequest},
		{"malformed", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":`}, 400, admin.CodeBadRequest},
		{"trailing", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":1}{"n":2}`}, 400, admin.CodeBadRequest},
		{"wrong type", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":"1"}`}, 400, admin.CodeBadRequest},
		{"overflow", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":99999999999999999999}`}, 400, admin.CodeBadRequest},
		{"too large", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":1` + strings.Repeat(" ", 300) + `}`}, 413, admin.CodePayloadTooLarge},
		{"n zero", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":0}`}, 400, admin.CodeInvalidArgument},
		{"n missing", req{method: P, path: "/admin/activities/a1/withdraw", body: `{}`}, 400, admin.CodeInvalidArgument},
		{"n negative", req{method: P, path: "/admin/activities/a1/withdraw", body: `{"n":-3}`}, 400, admin.CodeInvalidArgument},
		{"n past 2^53", req{method: P, path: "/admin/activities/a1/topup", body: `{"n":9007199254740992}`}, 400, admin.CodeInvalidArgument},
		{"load no stock", req{method: P, path: "/admin/activities/a2/load", body: `{"per_user_limit":1}`}, 400, admin.CodeInvalidArgument},
		{"load end before start", req{method: P, path: "/admin/activities/a2/load", body: `{"stock":1,"start":"2030-01-02T00:00:00Z","end":"2030-01-01T00:00:00Z"}`}, 400, admin.CodeInvalidArgument},
		{"load bad time", req{method: P, path: "/admin/activities/a2/load", body: `{"stock":1,"start":"tomorrow"}`}, 400, admin.CodeBadRequest},
		{"retry none", req{method: P, path: "/admin/outbox/retry", body: `{"ids":[]}`}, 400, admin.CodeInvalidArgument},
		{"retry zero id", req{method: P, path: "/admin/outbox/retry", body: `{"ids":[1,0]}`}, 400, admin.CodeInvalidArgument},
		{"ban kind", req{method: P, path: "/admin/ban", body: `{"kind":"card","id":"u1","reason":"bot"}`}, 400, admin.CodeInvalidArgument},
		{"ban ip", req{method: P, path: "/admin/ban", body: `{"kind":"ip","id":"10.0.0.300","reason":"bot"}`}, 400, admin.CodeInvalidArgument},
		{"ban user id", req{method: P, path: "/admin/ban", body: `{"kind":"user","id":"u 1","reason":"bot"}`}, 400, admin.CodeInvalidArgument},
		{"ban no reason", req{method: P, path: "/admin/ban", body: `{"kind":"user","id":"u1"}`}, 400, admin.CodeInvalidArgument},
		{"ban duration", req{method: P, path: "/admin/ban", body: `{"kind":"user","id":"u1","reason":"bot","duration":"forever"}`}, 400, admin.CodeInvalidArgument},
		{"ban duration long", req{method: P, path: "/admin/ban", body: `{"kind":"user","id":"u1","reason":"bot","duration":"87601h"}`}, 400, admin.CodeInvalidArgument},
		{"unban kind", req{method: P, path: "/admin/unban", body: `{"kind":"","id":"u1"}`}, 400, admin.CodeInvalidArgument},
		{"bans kind", req{method: G, path: "/admin/bans?kind=card"}, 400, admin.CodeInvalidArgument},
		{"reconcile id without apply", req{method: P, path: "/admin/activities/a1/reconcile", body: `{"dry_run_id":"x"}`}, 400, admin.CodeInvalidArgument},
		{"idempotency key too long", req{method: P, path: "/admin/activities/a1/pause", body: `{}`, key: strings.Repeat("k", 129)}, 400, admin.CodeInvalidArgument},
		{"unknown route", req{method: G, path: "/admin/activities/a1/nothing"}, 404, admin.CodeNotFound},
		{"outside prefix", req{method: G, path: "/other/activities/a1/stats"}, 404, admin.CodeNotFound},
		{"GET on an action", req{method: G, path: "/admin/activities/a1/pause"}, 405, admin.CodeMethodNotAllowed},
		{"POST on a read", req{method: P, path: "/admin/activities/a1/stats", body: `{}`}, 405, admin.CodeMethodNotAllowed},
		{"unknown query", req{method: G, path: "/admin/activities/a1/stats?verbose=1"}, 400, admin.CodeBadRequest},
		{"query on an action", req{method: P, path: "/admin/activities/a1/pause?force=1", body: `{}`}, 400, admin.CodeBadRequest},
		{"repeated query", req{method: G, path: "/admin/bans?kind=user&kind=ip"}, 400, admin.CodeBadRequest},
		{"reservations no user", req{method: G, path: "/admin/activities/a1/reservations"}, 400, admin.CodeInvalidArgument},
		{"reservations bad user", req{method: G, path: "/admin/activities/a1/reservations?user=" + long}, 400, admin.CodeInvalidArgument},
		{"audit limit", req{method: G, path: "/admin/audit?limit=0"}, 400, admin.CodeInvalidArgument},
		{"audit limit big", req{method: G, path: "/admin/audit?limit=501"}, 400, admin.CodeInvalidArgument},
		{"audit before", req{method: G, path: "/admin/audit?before=x"}, 400, admin.CodeInvalidArgument},
		{"audit activity", req{method: G, path: "/admin/audit?activity="}, 400, admin.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(tc.r)
			f.mustError(r, tc.status, tc.code)
			if tc.status == 405 && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
	for _, op := range ops {
		if f.mem.Calls(op) != callsBefore[op] {
			t.Errorf("bad input reached the backend's %s", op)
		}
	}
	if n := len(f.rows()); n != rowsBefore {
		t.Fatalf("bad input wrote %d audit rows", n-rowsBefore)
	}
}

// Backend errors: mapped to their code, no internal text sent, recorded as
// a failed action.
func TestBackendErrors(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.load("a1", 3)
		f.mem.Fail["topup"] = errors.New("dial tcp 10.1.2.3:6379: password=hunter2 refused")
		r := f.post("/admin/activities/a1/topup", `{"n":5}`, "")
		f.mustError(r, http.StatusInternalServerError, admin.CodeInternal)
		if strings.Contains(r.body, "hunter2") || strings.Contains(r.body, "10.1.2.3") {
			t.Fatalf("internal error text sent: %s", r.body)
		}
		f.mustError(f.post("/admin/activities/a1/withdraw", `{"n":4}`, ""), http.StatusConflict, admin.CodeConflict)
		f.mustError(f.post("/admin/activities/zz/pause", `{}`, ""), http.StatusNotFound, admin.CodeNotFound)
		f.mustError(f.get("/admin/activities/zz/stats"), http.StatusNotFound, admin.CodeNotFound)

		rows := f.rows()
		if len(rows) != 4 {
			t.Fatalf("%d rows, want load + 3 failed", len(rows))
		}
		for i, want := range []struct{ action, code string }{{"topup", admin.CodeInternal}, {"withdraw", admin.CodeConflict}, {"pause", admin.CodeNotFound}} {
			got := rows[i+1]
			if got.Action != want.action || got.Status != admin.AuditFailed || got.ErrorCode != want.code || strings.Contains(got.Response, "hunter2") {
				t.Errorf("row %d: %+v", i+1, got)
			}
		}
		var s admin.Stats
		f.mustOK(f.get("/admin/activities/a1/stats"), &s)
		if s.Redis.Remaining != 3 {
			t.Fatalf("failed actions changed the stock: %+v", s.Redis)
		}
	})
}

// A mutation whose attempt row cannot be written is refused, untouched.
func TestActionRefusedWithoutAuditRow(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	auth, _ := admin.BearerToken(testToken, testLabelKey)
	h, err := admin.New(f.mem, f.db, auth, admin.WithTable("not_migrated"))
	if err != nil {
		t.Fatal(err)
	}
	g := &fixture{t: t, h: h, db: f.db, mem: f.mem}
	g.mustError(g.do(req{method: http.MethodPost, path: "/activities/a1/pause", body: `{}`}), http.StatusServiceUnavailable, admin.CodeAuditUnavailable)
	g.mustError(g.do(req{method: http.MethodPost, path: "/activities/a1/pause", body: `{}`, key: "k1"}), http.StatusServiceUnavailable, admin.CodeAuditUnavailable)
	if n := f.mem.Calls("pause"); n != 0 {
		t.Fatalf("pause acted %d times without an audit row", n)
	}
	var s admin.Stats
	f.mustOK(f.get("/admin/activities/a1/stats"), &s)
	if s.Redis.Paused {
		t.Fatal("paused without an audit row")
	}
}

// Reconcile applies only a fresh dry run of the same activity, once.
func TestReconcileRequiresDryRun(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, admin.WithDryRunWindow(time.Minute))
		f.load("a1", 10)
		f.load("a2", 10)
		for _, id := range []string{"r1", "r2", "r3"} {
			if err := f.mem.Reserve("a1", admin.Reservation{ID: id, User: "u-" + id, Qty: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.mem.Order("a1", "r2"); err != nil {
			t.Fatal(err)
		}
		rows0 := len(f.rows())
		path := "/admin/activities/a1/reconcile"

		f.mustError(f.post(path, `{"apply":true}`, ""), http.StatusConflict, admin.CodeDryRunRequired)
		f.mustError(f.post(path, `{"apply":true,"dry_run_id":"0123456789abcdef0123456789abcdef"}`, ""), http.StatusConflict, admin.CodeDryRunRequired)

		var other admin.ReconcileAnswer
		f.mustOK(f.post("/admin/activities/a2/reconcile", `{}`, ""), &other)
		f.mustError(f.post(path, `{"apply":true,"dry_run_id":"`+other.DryRunID+`"}`, ""), http.StatusConflict, admin.CodeDryRunRequired)

		var dry admin.ReconcileAnswer
		f.mustOK(f.post(path, `{}`, ""), &dry)
		if !dry.Report.DryRun || dry.Report.Drift != 2 || len(dry.Report.Release) != 2 || dry.DryRunID == "" {
			t.Fatalf("dry run %+v", dry)
		}
		f.clock.Add(time.Minute) // the window is [issue, issue+1m)
		f.mustError(f.post(path, `{"apply":true,"dry_run_id":"`+dry.DryRunID+`"}`, ""), http.StatusConflict, admin.CodeDryRunRequired)
		if n := f.mem.Calls("reconcile_apply"); n != 0 {
			t.Fatalf("reconcile applied %d times without a valid dry run", n)
		}
		if n := len(f.rows()); n != rows0 {
			t.Fatalf("refused reconciles wrote %d rows", n-rows0)
		}

		f.mustOK(f.post(path, `{}`, ""), &dry)
		f.clock.Add(59 * time.Second)
		var done admin.ReconcileAnswer
		f.mustOK(f.post(path, `{"apply":true,"dry_run_id":"`+dry.DryRunID+`"}`, "k-rec"), &done)
		if done.Report.DryRun || done.Released != 2 || strings.Join(done.Report.Release, ",") != "r1,r3" {
			t.Fatalf("apply %+v", done)
		}
		// A replay answers the same; the used ID does not apply again.
		f.mustOK(f.post(path, `{"apply":true,"dry_run_id":"`+dry.DryRunID+`"}`, "k-rec"), nil)
		f.mustError(f.post(path, `{"apply":true,"dry_run_id":"`+dry.DryRunID+`"}`, ""), http.StatusConflict, admin.CodeDryRunRequired)
		if n := f.mem.Calls("reconcile_apply"); n != 1 {
			t.Fatalf("reconcile applied %d times", n)
		}
		var s admin.Stats
		f.mustOK(f.get("/admin/activities/a1/stats"), &s)
		if s.Redis.Remaining != 9 || s.Redis.Held != 1 {
			t.Fatalf("after reconcile %+v", s.Redis)
		}
		rows := f.rows()
		if len(rows) != rows0+1 {
			t.Fatalf("%d new rows, want 1", len(rows)-rows0)
		}
		rec := rows[len(rows)-1]
		if rec.Action != "reconcile" || rec.Status != admin.AuditOK || !strings.Contains(rec.Params, dry.DryRunID) ||
			jsonField(t, rec.StateBefore, "dry_run") != true || jsonField(t, rec.StateAfter, "dry_run") != false {
			t.Fatalf("reconcile row %+v", rec)
		}
	})
}

// Every action writes one row; the log reads back paged and filtered.
func TestAuditLogOfEveryAction(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.mem.AddOutbox(7, "FAILED")
		f.mem.AddOutbox(8, "SENT")
		f.load("a1", 10)
		f.mustOK(f.post("/admin/activities/a1/pause", `{}`, ""), nil)
		f.mustOK(f.post("/admin/activities/a1/resume", ``, ""), nil) // an empty body is {}
		f.mustOK(f.post("/admin/activities/a1/topup", `{"n":5}`, ""), nil)
		var ch admin.Change
		f.mustOK(f.post("/admin/activities/a1/withdraw", `{"n":2}`, ""), &ch)
		if ch.Before.Total != 15 || ch.After.Total != 13 || ch.After.Remaining != 13 {
			t.Fatalf("withdraw %+v", ch)
		}
		var dry admin.ReconcileAnswer
		f.mustOK(f.post("/admin/activities/a1/reconcile", `{}`, ""), &dry)
		f.mustOK(f.post("/admin/activities/a1/reconcile", `{"apply":true,"dry_run_id":"`+dry.DryRunID+`"}`, ""), nil)
		var rr admin.OutboxRetryResult
		f.mustOK(f.post("/admin/outbox/retry", `{"ids":[8,7,7]}`, ""), &rr)
		if rr.Requeued != 1 || rr.Before.Failed != 1 || rr.After.Failed != 0 || rr.After.Pending != 1 {
			t.Fatalf("retry %+v", rr)
		}
		var bc admin.BanChange
		f.mustOK(f.post("/admin/ban", `{"kind":"ip","id":"::ffff:10.0.0.1","reason":"bot","duration":"90m"}`, ""), &bc)
		if bc.Before != nil || bc.After == nil || bc.After.ID != "10.0.0.1" {
			t.Fatalf("ban %+v", bc)
		}
		var bans admin.BansAnswer
		f.mustOK(f.get("/admin/bans?kind=ip"), &bans)
		if len(bans.Bans) != 1 {
			t.Fatalf("bans %+v", bans)
		}
		f.mustOK(f.post("/admin/unban", `{"kind":"ip","id":"10.0.0.1"}`, ""), &bc)
		if bc.Before == nil || bc.After != nil {
			t.Fatalf("unban %+v", bc)
		}
		f.load("a2", 1)

		rows := f.rows()
		want := []string{"load", "pause", "resume", "topup", "withdraw", "reconcile", "outbox_retry", "ban", "unban", "load"}
		if len(rows) != len(want) {
			t.Fatalf("%d rows, want %d", len(rows), len(want))
		}
		for i, r := range rows {
			if r.Action != want[i] || r.Status != admin.AuditOK {
				t.Fatalf("row %d: %+v", i, r)
			}
		}
		if rows[6].Target != "outbox" || !strings.Contains(rows[6].Params, `[7,8]`) || rows[7].Target != "ip:10.0.0.1" {
			t.Fatalf("targets: %+v / %+v", rows[6], rows[7])
		}

		// Pages of 4, newest first.
		var all []admin.AuditEntry
		next := ""
		for pages := 0; ; pages++ {
			var p admin.AuditPage
			f.mustOK(f.get("/admin/audit?limit=4"+next), &p)
			all = append(all, p.Entries...)
			if p.Next == 0 {
				if pages != 2 {
					t.Fatalf("%d pages", pages+1)
				}
				break
			}
			next = fmt.Sprintf("&before=%d", p.Next)
		}
		if len(all) != len(want) {
			t.Fatalf("paged %d entries", len(all))
		}
		for i, e := range all {
			if e.Action != want[len(want)-1-i] || e.ID != rows[len(rows)-1-i].ID {
				t.Fatalf("entry %d: %+v", i, e)
			}
		}
		if all[len(all)-1].StartedAt.Unix() != testenv.Epoch().Unix() {
			t.Fatalf("started_at %v, want the test clock's %v", all[len(all)-1].StartedAt, testenv.Epoch())
		}
		var a1 admin.AuditPage
		f.mustOK(f.get("/admin/audit?activity=a1&limit=500"), &a1)
		if len(a1.Entries) != 6 || a1.Next != 0 {
			t.Fatalf("a1 entries %d", len(a1.Entries))
		}
		var before, after map[string]any
		_ = json.Unmarshal(a1.Entries[1].Before, &before) // withdraw
		_ = json.Unmarshal(a1.Entries[1].After, &after)
		if a1.Entries[1].Action != "withdraw" || before["total"] != 15.0 || after["total"] != 13.0 {
			t.Fatalf("withdraw entry %+v", a1.Entries[1])
		}
	})
}

// The read routes answer from the backend.
func TestReads(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	if err := f.mem.Reserve("a1", admin.Reservation{ID: "r1", User: "u1", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.mem.Order("a1", "r1"); err != nil {
		t.Fatal(err)
	}
	f.mem.AddOutbox(3, "FAILED")
	var rs admin.ReservationsAnswer
	f.mustOK(f.get("/admin/activities/a1/reservations?user=u1"), &rs)
	if len(rs.Reservations) != 1 || rs.Reservations[0].ID != "r1" {
		t.Fatalf("reservations %+v", rs)
	}
	f.mustOK(f.get("/admin/activities/a1/reservations?user=u2"), &rs)
	if rs.Reservations == nil || len(rs.Reservations) != 0 {
		t.Fatalf("no reservations: %+v", rs)
	}
	var st admin.Story
	f.mustOK(f.get("/admin/activities/a1/reservations/r1"), &st)
	if st.Ledger == nil || st.Order == nil || st.Outbox != nil || st.Order.OrderNo != "o-r1" {
		t.Fatalf("story %+v", st)
	}
	f.mustError(f.get("/admin/activities/a1/reservations/r9"), http.StatusNotFound, admin.CodeNotFound)
	var ob admin.OutboxStats
	f.mustOK(f.get("/admin/outbox/stats"), &ob)
	if ob.Failed != 1 {
		t.Fatalf("outbox %+v", ob)
	}
	if n := len(f.rows()); n != 1 {
		t.Fatalf("reads wrote audit rows: %d", n)
	}
}

// A client that has gone is no reason to cut an action: the backend runs on
// a detached context, so action and audit row agree.
func TestActionDetachedFromClient(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	ctx, cancel := context.WithCancel(context.Background())
	f.mem.Fail["pause"] = nil
	blocking := &ctxCheck{Memory: f.mem, cancel: cancel}
	auth, _ := admin.BearerToken(testToken, testLabelKey)
	h, err := admin.New(blocking, f.db, auth)
	if err != nil {
		t.Fatal(err)
	}
	g := &fixture{t: t, h: h, db: f.db, mem: f.mem, table: auditTable}
	r := g.doCtx(ctx, req{method: http.MethodPost, path: "/activities/a1/pause", body: `{}`})
	g.mustOK(r, nil)
	if !blocking.sawLive {
		t.Fatal("the backend ran on the client's cancelled context")
	}
	rows := f.rows()
	if last := rows[len(rows)-1]; last.Action != "pause" || last.Status != admin.AuditOK {
		t.Fatalf("row %+v", last)
	}
}

// ctxCheck cancels the client's context as the action starts and records
// whether the context the action got is still live.
type ctxCheck struct {
	*admintest.Memory
	cancel  func()
	sawLive bool
}

func (c *ctxCheck) Pause(ctx context.Context, id string) (admin.Change, error) {
	c.cancel()
	c.sawLive = ctx.Err() == nil
	return c.Memory.Pause(ctx, id)
}

// The attempt row is in the table before the backend acts, and a repeat of
// the key while the action runs is 409 in_progress, not a second action.
func TestAttemptRowPrecedesAction(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.load("a1", 10)
		probe := &duringPause{Memory: f.mem, f: f}
		auth, _ := admin.BearerToken(testToken, testLabelKey)
		h, err := admin.New(probe, db, auth, admin.WithPrefix("/admin/"))
		if err != nil {
			t.Fatal(err)
		}
		probe.h = h
		g := &fixture{t: t, h: h, db: db, mem: f.mem, table: auditTable}
		g.mustOK(g.post("/admin/activities/a1/pause", `{}`, "k-slow"), nil)
		if probe.seen == nil || probe.seen.Action != "pause" || probe.seen.Status != admin.AuditAttempt {
			t.Fatalf("row seen during the action: %+v", probe.seen)
		}
		if probe.repeat.status != http.StatusConflict || !strings.Contains(probe.repeat.body, admin.CodeInProgress) {
			t.Fatalf("repeat during the action: %d %s", probe.repeat.status, probe.repeat.body)
		}
		if n := f.mem.Calls("pause"); n != 1 {
			t.Fatalf("pause acted %d times", n)
		}
		rows := f.rows()
		if len(rows) != 2 || rows[1].Status != admin.AuditOK || rows[1].ID != probe.seen.ID {
			t.Fatalf("rows %+v", rows)
		}
	})
}

// duringPause reads the audit table and repeats the request from inside
// the backend's Pause.
type duringPause struct {
	*admintest.Memory
	f      *fixture
	h      *admin.Handler
	seen   *auditRow
	repeat resp
}

func (d *duringPause) Pause(ctx context.Context, id string) (admin.Change, error) {
	rows := d.f.rows()
	if len(rows) > 0 {
		d.seen = &rows[len(rows)-1]
	}
	g := &fixture{t: d.f.t, h: d.h}
	d.repeat = g.post("/admin/activities/a1/pause", `{}`, "k-slow")
	return d.Memory.Pause(ctx, id)
}

// TestActionOfCarriesTheAuditRow: a mutating Backend call sees the audited
// action (admin.ActionOf): an ID unique per action and stable across a
// replay (the audit row's), the operator and the request ID — what a
// Backend uses as the idempotency key of what it writes.
func TestActionOfCarriesTheAuditRow(t *testing.T) {
	f := newFixture(t, nil)
	f.load("a1", 10)
	f.mustOK(f.post("/admin/activities/a1/topup", `{"n":2}`, "k-1"), nil)
	f.mustOK(f.post("/admin/activities/a1/topup", `{"n":2}`, "k-1"), nil) // replay: no second action
	f.mustOK(f.post("/admin/activities/a1/withdraw", `{"n":1}`, ""), nil)
	if len(f.mem.Actions) != 2 {
		t.Fatalf("%d actions reached the backend, want 2: %+v", len(f.mem.Actions), f.mem.Actions)
	}
	var ids []uint64
	if err := f.db.Table(f.table).Where("action IN ?", []string{"topup", "withdraw"}).Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("%d audit rows of top-ups and withdrawals, want 2", len(ids))
	}
	for i, a := range f.mem.Actions {
		if want := "audit-" + strconv.FormatUint(ids[i], 10); a.ID != want || a.Operator == "" {
			t.Errorf("action %d: %+v, want ID %s and an operator", i, a, want)
		}
	}
	if _, ok := admin.ActionOf(context.Background()); ok {
		t.Error("ActionOf outside a mutation reports an action")
	}
}
