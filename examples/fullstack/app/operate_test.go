package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/operate"
)

// adminClient speaks the admin API (the library's admin package).
type adminClient struct {
	t     *testing.T
	base  string
	token string
}

func (c *adminClient) call(ctx context.Context, method, path, body, key string, out any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/admin/"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestOperateLiveSale runs the load generator against a live sale and,
// scripted into its buy phase through the admin API, pauses the sale,
// tops it up by 20 units and resumes it. Then it counts: every buyer asked
// during the pause was told "paused" (not sold out), the extra units were
// sold, the invariants hold with the units on sale = initial + top-up in
// Redis, the DB row and the DB's adjustment ledger, each action is one
// audit row, a replayed top-up changes nothing, the reconciler's dry run
// finds no drift — and the HTML report shows the pause and the top-up. On
// real Redis and MariaDB when SECKILL_REDIS_ADDR and SECKILL_MYSQL_DSN are
// set, embedded otherwise.
func TestOperateLiveSale(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	const users, stock, topUp = 1500, 40, 20
	cfg := embeddedConfig(users+1, stock) // the crowd, and one probe buyer
	if addr, dsn := os.Getenv("SECKILL_REDIS_ADDR"), os.Getenv("SECKILL_MYSQL_DSN"); addr != "" && dsn != "" {
		tag := randHex(5)
		cfg.RedisAddr, cfg.KeyPrefix = addr, "top"+tag+":"
		cfg.MySQLDSN, cfg.MySQLDatabase, cfg.DropDatabaseOnClose = dsn, "seckill_op_"+tag, true
		t.Cleanup(func() { cleanPrefix(addr, cfg.KeyPrefix) })
	}
	cfg.AdminAddr, cfg.AdminToken = "127.0.0.1:0", randHex(24)
	a, url := startApp(t, cfg)
	adm := &adminClient{t: t, base: a.AdminURL(), token: cfg.AdminToken}
	if a.AdminURL() == "" {
		t.Fatal("the admin API did not start")
	}
	act := a.Config().ActivityID
	actPath := fmt.Sprintf("activities/%d/", act)

	// A buyer outside the crowd, with credentials taken before the crowd
	// empties the token pool, to see what a buy answers while paused.
	probe := login(t, url, fmt.Sprintf("user%d", users+1))
	cid, ans, tok, path := probe.creds()
	var pausedAnswer string
	steps := []load.Step{
		{At: 20, Name: "pause", Do: func(ctx context.Context) error {
			if err := adm.call(ctx, "POST", actPath+"pause", "{}", "op-pause", nil); err != nil {
				return err
			}
			code, m := probe.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
			pausedAnswer = fmt.Sprintf("%d %s", code, probe.str(m, "status"))
			return nil
		}},
		{At: 400, Name: fmt.Sprintf("top-up +%d", topUp), Do: func(ctx context.Context) error {
			return adm.call(ctx, "POST", actPath+"topup", fmt.Sprintf(`{"n":%d}`, topUp), "op-topup", nil)
		}},
		{At: 400, Name: "resume", Do: func(ctx context.Context) error {
			return adm.call(ctx, "POST", actPath+"resume", "{}", "op-resume", nil)
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadBound)
	defer cancel()
	rep, err := load.Run(ctx, load.Config{Target: url, Users: users, Concurrency: 16, Drain: drainBound, Steps: steps})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("\n%s", rep)

	for _, v := range rep.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	if pausedAnswer != "503 paused" {
		t.Errorf("a buy while paused answered %q, want 503 paused", pausedAnswer)
	}
	// Requests 20..399 were sent while paused: each got "paused" unless
	// the stock had sold out before (then "sold_out" answers in-process).
	if rep.Outcomes["paused"] == 0 {
		t.Errorf("no buyer was told paused: %v", rep.Outcomes)
	}
	iv := rep.Server
	if iv.Adjusted != topUp || iv.Total != stock+topUp || iv.RedisTotal != stock+topUp {
		t.Errorf("units on sale: adjusted %d, DB total %d, Redis total %d; want %d, %d, %d", iv.Adjusted, iv.Total, iv.RedisTotal, topUp, stock+topUp, stock+topUp)
	}
	if iv.Sold() != stock+topUp || iv.DBStock != 0 || iv.RedisRemain != 0 {
		t.Errorf("sold %d of %d (DB stock %d, Redis remaining %d): the top-up was not sold", iv.Sold(), stock+topUp, iv.DBStock, iv.RedisRemain)
	}

	// One audit row per action; a replayed top-up (same key) acts no more.
	if err := adm.call(ctx, "POST", actPath+"topup", fmt.Sprintf(`{"n":%d}`, topUp), "op-topup", nil); err != nil {
		t.Fatal(err)
	}
	var audit struct {
		Entries []struct {
			Action string `json:"action"`
			Status string `json:"status"`
		} `json:"entries"`
	}
	if err := adm.call(ctx, "GET", "audit?activity="+fmt.Sprint(act), "", "", &audit); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range audit.Entries {
		got[e.Action+"/"+e.Status]++
	}
	if got["pause/ok"] != 1 || got["topup/ok"] != 1 || got["resume/ok"] != 1 || len(audit.Entries) != 3 {
		t.Errorf("audit log %v, want one ok row each of pause, topup, resume", got)
	}
	var total int64
	if err := app.DB(a).Model(&order.Activity{}).Where("id = ?", fmt.Sprint(act)).Pluck("total_stock", &total).Error; err != nil {
		t.Fatal(err)
	}
	adj, err := operate.Adjustments(ctx, app.DB(a), fmt.Sprint(act))
	if err != nil {
		t.Fatal(err)
	}
	if total != stock+topUp || len(adj) != 1 || adj[0].Delta != topUp {
		t.Errorf("after a replayed top-up: total_stock %d, adjustments %+v; want %d and one of +%d", total, adj, stock+topUp, topUp)
	}

	// The reconciler's dry run: nothing to repair.
	var rec struct {
		DryRunID string `json:"dry_run_id"`
		Report   struct {
			DryRun    bool     `json:"dry_run"`
			Drift     int64    `json:"drift"`
			Conserved bool     `json:"conserved"`
			Release   []string `json:"release"`
		} `json:"report"`
	}
	if err := adm.call(ctx, "POST", actPath+"reconcile", "{}", "", &rec); err != nil {
		t.Fatal(err)
	}
	if r := rec.Report; !r.DryRun || rec.DryRunID == "" || r.Drift != 0 || !r.Conserved || len(r.Release) != 0 {
		t.Errorf("reconcile dry run after the sale: %+v, want a dry run with no drift and nothing to release", rec)
	}

	// The report shows the pause and the top-up.
	var html bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, mark := range []string{"pause", "top-up", "resume"} {
		if !strings.Contains(html.String(), mark) {
			t.Errorf("the HTML report does not show %q", mark)
		}
	}
	if p := os.Getenv("FULLSTACK_OPERATE_REPORT"); p != "" {
		_ = os.WriteFile(filepath.Clean(p), html.Bytes(), 0o644)
	}
}

// TestAdjustUndoesTheFirstStore: a top-up goes to the DB first and then to
// Redis; when the Redis step fails (here: the activity is frozen), the DB
// step is undone by an opposite ledger entry, so the two stores never stay
// apart. Before, the DB kept the extra units (total_stock 20 above Redis's).
func TestAdjustUndoesTheFirstStore(t *testing.T) {
	cfg := embeddedConfig(10, 40)
	// The preloader rebuilds (unfreezes) a frozen sale on its 5 s poll; the
	// freeze below must last until the top-up (CI: a tick came between).
	app.SetPreloadEvery(&cfg, time.Hour)
	a, _ := startApp(t, cfg)
	ctx := admin.WithAction(context.Background(), admin.Action{ID: "audit-undo-test", Operator: "test"})
	act := fmt.Sprint(a.Config().ActivityID)
	if err := app.Stock(a).Freeze(ctx, act); err != nil {
		t.Fatal(err)
	}
	if _, err := app.AdminBackend(t, a).TopUp(ctx, act, 20); err == nil {
		t.Fatal("a top-up of a frozen activity succeeded")
	}
	var total int64
	if err := app.DB(a).Model(&order.Activity{}).Where("id = ?", act).Pluck("total_stock", &total).Error; err != nil {
		t.Fatal(err)
	}
	adj, err := operate.Adjustments(ctx, app.DB(a), act)
	if err != nil {
		t.Fatal(err)
	}
	net := int64(0)
	for _, x := range adj {
		net += x.Delta
	}
	st, err := app.Stock(a).Stats(ctx, act)
	if err != nil {
		t.Fatal(err)
	}
	if total != 40 || net != 0 || len(adj) != 2 || st.Total != 40 {
		t.Errorf("after a failed top-up: DB total_stock %d, ledger %+v (net %d), Redis total %d; want 40, +20 and its undo, 40", total, adj, net, st.Total)
	}
}
