package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// TestCLIQueueCommitStartVerify: the operator's path of a queue sale —
// queue seed, commit before the start, start (reveal) with a wrong seed
// refused and the right one taken, stats, and verify recomputing the
// admissions from the published record.
func TestCLIQueueCommitStartVerify(t *testing.T) {
	tok := strings.Repeat("t", 40)
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.AdminAddr, cfg.AdminToken = "127.0.0.1:0", "127.0.0.1:0", tok
	cfg.SaleMode, cfg.QueueRate, cfg.Demo = app.SaleQueue, 50, true
	// The commit and the joins must come before the start, the service's
	// own startup included: 6 s (2 s is short under -race on a loaded box).
	cfg.StartIn, cfg.PathLead, cfg.DemoUsers = 6*time.Second, 6*time.Second, 10
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
	base, err := a.Start()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="admin API listening".* url=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no admin URL in the log:\n%s", logs.String())
	}
	env := map[string]string{envToken: tok, envAddr: m[1]}
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runWith(args, &out, &errb, func(k string) string { return env[k] }, &http.Client{})
		return code, out.String(), errb.String()
	}
	dir := t.TempDir()
	seedFile, other := filepath.Join(dir, "seed"), filepath.Join(dir, "other")
	if code, out, errs := cli("queue", "seed", seedFile); code != 0 || len(strings.TrimSpace(out)) != 64 {
		t.Fatalf("queue seed: %d %q %q", code, out, errs)
	}
	if code, _, errs := cli("queue", "seed", other); code != 0 {
		t.Fatalf("queue seed: %d %q", code, errs)
	}
	if code, _, errs := cli("queue", "commit", "1", "--seed-file", seedFile); code != 0 {
		t.Fatalf("queue commit: %d %q", code, errs)
	}
	const n = 5
	for i := range n {
		b := post(t, base, "/api/login", "", map[string]string{"username": "user" + strconv.Itoa(i+1)})["token"]
		if got := post(t, base, "/api/queue/join", b, struct{}{}); got["state"] != "waiting" {
			t.Fatalf("join: %v", got)
		}
	}
	if code, _, _ := cli("queue", "start", "1", "--seed-file", other); code == 0 {
		t.Fatal("queue start with a seed that does not match the commitment succeeded")
	}
	if code, _, errs := cli("queue", "start", "1", "--seed-file", seedFile); code != 0 {
		t.Fatalf("queue start: %d %q", code, errs)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ := cli("-o", "json", "queue", "stats", "1")
		var st struct{ Admitted int64 }
		_ = json.Unmarshal([]byte(out), &st)
		if st.Admitted == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every user admitted: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out, errs := cli("queue", "verify", "1")
	if code != 0 || !strings.Contains(out, "verified: pre-queue of 5") || !strings.Contains(out, "5 admitted") {
		t.Fatalf("queue verify: %d %q %q", code, out, errs)
	}
}

func post(t *testing.T, base, path, bearer string, body any) map[string]string {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	s := map[string]string{}
	for k, v := range out {
		s[k], _ = v.(string)
	}
	return s
}
