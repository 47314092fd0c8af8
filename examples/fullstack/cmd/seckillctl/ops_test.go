package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The URL the service logs for its admin API is what --addr takes, as it
// is: the service started as main.go starts it (its logger, its admin
// listener), the CLI run against the logged URL. Before, the log said
// http://host:port without the /admin/ path, and that URL answered
// not_found (HTTP 404).
func TestCLIReachesTheLoggedAdminURL(t *testing.T) {
	tok := strings.Repeat("t", 40)
	cfg := app.DefaultConfig() // embedded: miniredis, kfake, SQLite
	cfg.Addr, cfg.AdminAddr, cfg.AdminToken = "127.0.0.1:0", "127.0.0.1:0", tok
	cfg.StartIn = 0
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.New(ctx, cfg, app.NewLogger(&logs, "info"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	if _, err := a.Start(); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="admin API listening".* url=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no admin URL in the log:\n%s", logs.String())
	}
	var out, errb bytes.Buffer
	env := map[string]string{envToken: tok}
	code := runWith([]string{"--addr", m[1], "outbox", "stats"}, &out, &errb, func(k string) string { return env[k] }, &http.Client{})
	if code != 0 || !hasLine(out.String(), "pending", "0") {
		t.Fatalf("--addr %s: exit %d, stdout %q, stderr %q", m[1], code, out.String(), errb.String())
	}
	// The same address from the one variable both sides read.
	out.Reset()
	errb.Reset()
	env[envAddr] = m[1]
	code = runWith([]string{"outbox", "stats"}, &out, &errb, func(k string) string { return env[k] }, &http.Client{})
	if code != 0 {
		t.Fatalf("$%s=%s: exit %d, stderr %q", envAddr, m[1], code, errb.String())
	}
}

// noDial is an http.Client that fails the test if the CLI sends anything.
func noDial(t *testing.T) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("the CLI sent %s %s", r.Method, r.URL)
		return nil, http.ErrUseLastResponse
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Without an address the CLI says what to pass, and sends the token
// nowhere (before, it sent it to http://127.0.0.1:8080/admin/, the public
// listener's default address).
func TestCLIWithoutAddrSaysWhatToPass(t *testing.T) {
	var out, errb bytes.Buffer
	code := runWith([]string{"stats", "a1"}, &out, &errb, func(k string) string { return map[string]string{envToken: token}[k] }, noDial(t))
	if code != 2 || !strings.Contains(errb.String(), "--addr") || !strings.Contains(errb.String(), envAddr) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// The base URL works with and without the /admin/ path.
func TestCLIAddrWithOrWithoutAdminPath(t *testing.T) {
	s := newServer(t)
	for _, addr := range []string{s.srv.URL, s.srv.URL + "/", s.srv.URL + "/admin", s.srv.URL + "/admin/", strings.TrimPrefix(s.srv.URL, "http://")} {
		var out, errb bytes.Buffer
		code := runWith([]string{"--addr", addr, "outbox", "stats"}, &out, &errb,
			func(k string) string { return map[string]string{envToken: token}[k] }, s.srv.Client())
		if code != 0 {
			t.Errorf("--addr %s: exit %d, stderr %q", addr, code, errb.String())
		}
	}
}

// N5: plain http only to a loopback address; the token never crosses a
// network in clear.
func TestCLIRefusesPlainHTTPBeyondLoopback(t *testing.T) {
	for _, addr := range []string{"http://10.0.0.7:9090/admin/", "http://admin.example.com/admin/", "10.0.0.7:9090", "http://0.0.0.0:9090/admin/"} {
		var out, errb bytes.Buffer
		code := runWith([]string{"--addr", addr, "stats", "a1"}, &out, &errb,
			func(k string) string { return map[string]string{envToken: token}[k] }, noDial(t))
		if code != 2 || !strings.Contains(errb.String(), "https") {
			t.Errorf("--addr %s: exit %d, stderr %q; want a usage error asking for https", addr, code, errb.String())
		}
	}
	// https anywhere, http on loopback: accepted.
	for _, addr := range []string{"https://admin.example.com/admin/", "http://localhost:9090/admin/", "http://[::1]:9090/admin/", "http://127.0.0.2:9090/admin/"} {
		var got string
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r.URL.String()
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"pending":0,"failed":0}`))}, nil
		})}
		var out, errb bytes.Buffer
		code := runWith([]string{"--addr", addr, "outbox", "stats"}, &out, &errb,
			func(k string) string { return map[string]string{envToken: token}[k] }, hc)
		if code != 0 || !strings.HasSuffix(got, "/admin/outbox/stats") {
			t.Errorf("--addr %s: exit %d, stderr %q, sent to %q", addr, code, errb.String(), got)
		}
	}
}

// N5: a redirect is not followed: the Authorization header would go along
// (net/http keeps it on the same host, even from https to http).
func TestCLIDoesNotFollowRedirects(t *testing.T) {
	var reached []string
	var mu sync.Mutex
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"pending":0,"failed":0}`)
	}))
	defer target.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redir.Close()
	var out, errb bytes.Buffer
	code := runWith([]string{"--addr", redir.URL + "/admin/", "outbox", "stats"}, &out, &errb,
		func(k string) string { return map[string]string{envToken: token}[k] }, &http.Client{})
	mu.Lock()
	defer mu.Unlock()
	if code != 1 || len(reached) != 0 || !strings.Contains(errb.String(), "redirect") {
		t.Fatalf("exit %d, stderr %q, the redirect target got %q", code, errb.String(), reached)
	}
}

// N5: the token comes from a file rather than argv; --token still works
// but warns.
func TestCLITokenFileAndTokenFlagWarning(t *testing.T) {
	s := newServer(t)
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := s.ctlEnv(map[string]string{}, "--token-file", p, "outbox", "stats")
	if code != 0 || !hasLine(out, "pending", "0") {
		t.Fatalf("--token-file: exit %d, stderr %q", code, errs)
	}
	code, _, errs = s.ctlEnv(map[string]string{}, "--token", token, "outbox", "stats")
	if code != 0 || !strings.Contains(errs, "--token") || !strings.Contains(errs, envToken) {
		t.Fatalf("--token: exit %d, stderr %q; want it to work with a warning", code, errs)
	}
}

// A ban without --duration prints when it ends, and the help states the
// default length.
func TestCLIBanPrintsItsEnd(t *testing.T) {
	s := newServer(t)
	out := s.mustRun("ban", "user", "7", "--reason", "bot")
	// admintest.Memory bans for an hour when no duration is given.
	want := testenv.Epoch().Add(time.Hour).Format(time.RFC3339)
	if !strings.Contains(out, "ban ends "+want) {
		t.Fatalf("ban output:\n%s\nwant a line \"ban ends %s\"", out, want)
	}
	help := s.mustRun("ban", "--help")
	if !strings.Contains(help, "1m for a first offence") || !strings.Contains(help, "24h") {
		t.Fatalf("ban help does not state the default:\n%s", help)
	}
}

// N5: --token-file - reads the token from stdin.
func TestCLITokenFromStdin(t *testing.T) {
	s := newServer(t)
	var out, errb bytes.Buffer
	code := runIO([]string{"--addr", s.addr, "--token-file", "-", "outbox", "stats"}, strings.NewReader(token+"\n"), &out, &errb,
		func(string) string { return "" }, s.srv.Client())
	if code != 0 || !hasLine(out.String(), "pending", "0") || errb.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// The dry run's plan digest is printed, and an apply with another is
// refused.
func TestCLIReconcilePlan(t *testing.T) {
	s := newServer(t)
	s.mustRun("load", "a1", "--stock", "3")
	if err := s.mem.Reserve("a1", admin.Reservation{ID: "r1", User: "u1", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	var dry admin.ReconcileAnswer
	decode(t, s.mustRun("reconcile", "a1", "-o", "json"), &dry)
	if len(dry.Plan) != 64 {
		t.Fatalf("dry run %+v", dry)
	}
	code, _, errs := s.ctl("reconcile", "a1", "--apply", "--dry-run-id", dry.DryRunID, "--plan", strings.Repeat("f", 64))
	if code != 1 || !strings.Contains(errs, "plan_changed") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	out := s.mustRun("reconcile", "a1", "--apply", "--dry-run-id", dry.DryRunID, "--plan", dry.Plan)
	if !hasLine(out, "report.release", "r1") || !hasLine(out, "plan", dry.Plan) {
		t.Fatalf("apply:\n%s", out)
	}
}

// bans pages: --limit and --after, with the next cursor printed.
func TestCLIBansPaged(t *testing.T) {
	s := newServer(t)
	s.mustRun("ban", "user", "u1", "--reason", "bot")
	s.mustRun("ban", "user", "u2", "--reason", "bot")
	out := s.mustRun("bans", "--kind", "user", "--limit", "1")
	if !strings.Contains(out, "u1") || strings.Contains(out, "u2") || !hasLine(out, "next", "user:u1") {
		t.Fatalf("first page:\n%s", out)
	}
	out = s.mustRun("bans", "--kind", "user", "--limit", "1", "--after", "user:u1")
	if !strings.Contains(out, "u2") || strings.Contains(out, "next") {
		t.Fatalf("second page:\n%s", out)
	}
}
