package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/admin/admintest"
	"github.com/seckillkit/seckill/internal/testenv"
)

const token = "cli-test-token-0123456789abcdefghijkl"

// server is the admin handler over an admintest.Memory (a test double of
// the library, fit only for the HTTP layer and the CLI) with its audit log
// on SQLite, served on loopback.
type server struct {
	t    *testing.T
	mem  *admintest.Memory
	srv  *httptest.Server
	addr string
	rows func() int64
}

func newServer(t *testing.T) *server {
	t.Helper()
	db := testenv.SQLite(t)
	mem := admintest.NewMemory()
	clock := testenv.NewEpochClock(0)
	mem.Clock = clock
	auth, err := admin.BearerToken(token, []byte("cli-test-label-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.New(mem, db, auth, admin.WithPrefix("/admin/"), admin.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AutoMigrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := &server{t: t, mem: mem, srv: srv, addr: srv.URL + "/admin/"}
	s.rows = func() int64 {
		var n int64
		if err := db.Table("seckill_admin_audit").Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	return s
}

// ctl runs seckillctl in-process with the token in the environment.
func (s *server) ctl(args ...string) (code int, stdout, stderr string) {
	s.t.Helper()
	return s.ctlEnv(map[string]string{envToken: token}, args...)
}

func (s *server) ctlEnv(env map[string]string, args ...string) (int, string, string) {
	s.t.Helper()
	var out, errb bytes.Buffer
	code := runWith(append([]string{"--addr", s.addr}, args...), &out, &errb, func(k string) string { return env[k] }, s.srv.Client())
	return code, out.String(), errb.String()
}

func (s *server) mustRun(args ...string) string {
	s.t.Helper()
	code, out, errs := s.ctl(args...)
	if code != 0 {
		s.t.Fatalf("seckillctl %v: exit %d, stderr %s", args, code, errs)
	}
	return out
}

func TestCLIEveryOperation(t *testing.T) {
	s := newServer(t)
	s.mustRun("load", "a1", "--stock", "10", "--limit", "2", "--start", "2030-01-02T00:00:00Z", "--end", "2030-01-03T00:00:00Z")
	if err := s.mem.Reserve("a1", admin.Reservation{ID: "r1", User: "u1", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.mem.Reserve("a1", admin.Reservation{ID: "r2", User: "u2", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.mem.Order("a1", "r2"); err != nil {
		t.Fatal(err)
	}

	out := s.mustRun("stats", "a1")
	if !hasLine(out, "redis.remaining", "8") || !hasLine(out, "db.orders", "1") {
		t.Fatalf("stats table:\n%s", out)
	}
	var st admin.Stats
	decode(t, s.mustRun("stats", "a1", "-o", "json"), &st)
	if st.Redis.Remaining != 8 || st.Redis.Held != 2 || st.Redis.PerUserLimit != 2 {
		t.Fatalf("stats json %+v", st)
	}

	out = s.mustRun("pause", "a1")
	if !hasLine(out, "paused", "false", "true") {
		t.Fatalf("pause table:\n%s", out)
	}
	for range 2 {
		s.mustRun("topup", "a1", "5", "--idempotency-key", "cli-topup-1")
	}
	if n := s.mem.Calls("topup"); n != 1 {
		t.Fatalf("topup with one key acted %d times", n)
	}
	s.mustRun("resume", "a1")
	out = s.mustRun("withdraw", "a1", "3")
	if !hasLine(out, "remaining", "13", "10") {
		t.Fatalf("withdraw table:\n%s", out)
	}

	out = s.mustRun("reservations", "a1", "u1")
	if !strings.Contains(out, "reservations:") || !hasLine(out, "r1", "u1", "1", "held", testenv.Epoch().Format(time.RFC3339)) {
		t.Fatalf("reservations table:\n%s", out)
	}
	var story admin.Story
	decode(t, s.mustRun("story", "a1", "r2", "-o", "json"), &story)
	if story.Order == nil || story.Ledger == nil || story.Ledger.State != "consumed" {
		t.Fatalf("story %+v", story)
	}

	var dry admin.ReconcileAnswer
	decode(t, s.mustRun("reconcile", "a1", "-o", "json"), &dry)
	if dry.DryRunID == "" || strings.Join(dry.Report.Release, ",") != "r1" {
		t.Fatalf("dry run %+v", dry)
	}
	out = s.mustRun("reconcile", "a1", "--apply", "--dry-run-id", dry.DryRunID)
	if !hasLine(out, "report.release", "r1") || !hasLine(out, "report.dry_run", "false") {
		t.Fatalf("reconcile table:\n%s", out)
	}

	s.mem.AddOutbox(11, "FAILED")
	s.mem.AddOutbox(12, "FAILED")
	if out = s.mustRun("outbox", "stats"); !hasLine(out, "failed", "2") {
		t.Fatalf("outbox stats:\n%s", out)
	}
	if out = s.mustRun("outbox", "retry", "11", "12"); !hasLine(out, "requeued", "2") {
		t.Fatalf("outbox retry:\n%s", out)
	}

	s.mustRun("ban", "user", "u9", "--reason", "bot", "--duration", "2h")
	if out = s.mustRun("bans", "--kind", "user"); !hasLine(out, "user", "u9", "bot", testenv.Epoch().Add(2*time.Hour).Format(time.RFC3339), "false") {
		t.Fatalf("bans:\n%s", out)
	}
	s.mustRun("unban", "user", "u9")
	var bans admin.BansAnswer
	decode(t, s.mustRun("bans", "-o", "json"), &bans)
	if len(bans.Bans) != 0 {
		t.Fatalf("bans after unban %+v", bans)
	}

	// load, pause, topup (once), resume, withdraw, reconcile, retry, ban, unban
	if n := s.rows(); n != 9 {
		t.Fatalf("%d audit rows, want 9", n)
	}
	var page admin.AuditPage
	decode(t, s.mustRun("audit", "--limit", "500", "-o", "json"), &page)
	if len(page.Entries) != 9 || page.Entries[0].Action != "unban" || page.Entries[8].Action != "load" {
		t.Fatalf("audit %+v", page)
	}
	decode(t, s.mustRun("audit", "--activity", "a1", "--limit", "2", "-o", "json"), &page)
	if len(page.Entries) != 2 || page.Next == 0 || page.Entries[0].Action != "reconcile" {
		t.Fatalf("audit page %+v", page)
	}
	out = s.mustRun("audit", "--activity", "a1")
	if !strings.Contains(out, "ACTION") || !strings.Contains(out, "withdraw") || strings.Contains(out, "{") {
		t.Fatalf("audit table:\n%s", out)
	}
}

func TestCLIErrors(t *testing.T) {
	s := newServer(t)
	s.mustRun("load", "a1", "--stock", "2")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		msg  string
	}{
		// The server's error answer: its status and message, the HTTP status.
		{"server conflict", nil, []string{"withdraw", "a1", "5"}, 1,
			"seckillctl: conflict: the action conflicts with the current state (HTTP 409)\n"},
		{"server not found", nil, []string{"pause", "nope"}, 1,
			"seckillctl: not_found: not found (HTTP 404)\n"},
		{"server invalid id", nil, []string{"stats", "a!1"}, 1,
			"seckillctl: invalid_argument: activity: want 1..64 bytes of [A-Za-z0-9._@+-] (HTTP 400)\n"},
		{"no dry run", nil, []string{"reconcile", "a1", "--apply", "--dry-run-id", "feedfeedfeedfeedfeedfeedfeedfeed"}, 1,
			"seckillctl: dry_run_required: run a dry run of this activity first and apply it with its dry_run_id before it expires (HTTP 409)\n"},
		{"wrong token", map[string]string{envToken: "wrong-token-wrong-token-wrong-token"}, []string{"stats", "a1"}, 1,
			"seckillctl: unauthorized: authentication required (HTTP 401)\n"},
		{"no token", map[string]string{}, []string{"stats", "a1"}, 2, "SECKILL_ADMIN_TOKEN"},
		{"apply without id", nil, []string{"reconcile", "a1", "--apply"}, 2, "--dry-run-id"},
		{"bad n", nil, []string{"topup", "a1", "many"}, 2, "positive integer"},
		{"missing arg", nil, []string{"topup", "a1"}, 2, "usage"},
		{"unknown command", nil, []string{"explode"}, 2, "unknown command"},
		{"outbox without subcommand", nil, []string{"outbox"}, 2, "stats or retry"},
		{"unknown flag", nil, []string{"stats", "a1", "--nope"}, 2, "unknown flag"},
		{"load without stock", nil, []string{"load", "a2"}, 2, "stock"},
		{"bad output", nil, []string{"stats", "a1", "-o", "yaml"}, 2, "table or json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = map[string]string{envToken: token}
			}
			code, out, errs := s.ctlEnv(env, tc.args...)
			ok := strings.Contains(errs, tc.msg)
			if code == 1 {
				ok = errs == tc.msg
			}
			if code != tc.code || !ok || out != "" {
				t.Fatalf("exit %d stderr %q stdout %q; want exit %d and %q", code, errs, out, tc.code, tc.msg)
			}
		})
	}
	if n := s.mem.Calls("withdraw") + s.mem.Calls("reconcile_apply"); n != 1 {
		t.Fatalf("backend calls %d, want the one refused withdraw", n)
	}
	// load + the refused withdraw and pause (failed rows); nothing else.
	if n := s.rows(); n != 3 {
		t.Fatalf("%d audit rows, want 3", n)
	}
}

// An error answer is printed as its status and message with the HTTP
// status; an answer not in the admin API's error shape (another server, a
// proxy's page, the shape the admin API answered before it took the buyer
// API's) is named as such.
func TestCLIPrintsErrorAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		http int
		body string
		want string
	}{
		{"error answer", 503, `{"status":"unavailable","message":"a backing store is unavailable; retry later"}`,
			"seckillctl: unavailable: a backing store is unavailable; retry later (HTTP 503)\n"},
		{"member added later", 409, `{"status":"conflict","message":"m","retry_after":3}`,
			"seckillctl: conflict: m (HTTP 409)\n"},
		{"old shape", 409, `{"error":{"code":"conflict","message":"m"}}`,
			"seckillctl: http_409: not an admin API answer (HTTP 409)\n"},
		{"no status", 500, `{"message":"m"}`,
			"seckillctl: http_500: not an admin API answer (HTTP 500)\n"},
		{"not JSON", 502, "<html>Bad Gateway</html>",
			"seckillctl: http_502: not an admin API answer (HTTP 502)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case paths <- r.URL.Path:
				default:
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.http)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			var out, errb bytes.Buffer
			code := runWith([]string{"--addr", srv.URL + "/admin/", "stats", "a1"}, &out, &errb,
				func(k string) string { return map[string]string{envToken: token}[k] }, srv.Client())
			if code != 1 || errb.String() != tc.want || out.Len() != 0 {
				t.Fatalf("exit %d stderr %q stdout %q; want exit 1 and %q", code, errb.String(), out.String(), tc.want)
			}
			if p := <-paths; p != "/admin/activities/a1/stats" {
				t.Fatalf("request path %q", p)
			}
		})
	}
}

// The token is taken from --token too, and the address from the
// environment.
func TestCLITokenFlagAndAddrEnv(t *testing.T) {
	s := newServer(t)
	var out, errb bytes.Buffer
	code := runWith([]string{"--token", token, "outbox", "stats"}, &out, &errb,
		func(k string) string { return map[string]string{envAddr: s.addr}[k] }, s.srv.Client())
	if code != 0 || !hasLine(out.String(), "pending", "0") {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
}

// hasLine reports whether a line of out has exactly the given cells.
func hasLine(out string, cells ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == strings.Join(cells, " ") {
			return true
		}
	}
	return false
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
}
