package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/waitroom"
	"github.com/seckillkit/seckill/waitroom/draw"
)

// fairCall is one API call with extra headers.
func fairCall(t *testing.T, base, method, path, bearer string, hdr map[string]string, body any) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// until polls cond (every 20 ms) until it holds; fails after bound.
func until(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fairBuy takes a captcha, the access token (with hdr) and the path, and
// buys; it returns the token answer's code and status, and the buy's code.
func fairBuy(t *testing.T, base, bearer string, hdr map[string]string) (tokCode int, tokStatus string, buyCode int) {
	t.Helper()
	_, m := fairCall(t, base, "GET", "/api/captcha?image=none", bearer, nil, nil)
	id, _ := m["id"].(string)
	ans, _ := m["demo_answer"].(string)
	tokCode, m = fairCall(t, base, "POST", "/api/activity/token", bearer, hdr, struct{}{})
	if tokCode != 200 {
		st, _ := m["status"].(string)
		return tokCode, st, 0
	}
	tok, _ := m["token"].(string)
	_, m = fairCall(t, base, "GET", "/api/activity/path", bearer, nil, nil)
	path, _ := m["path"].(string)
	buyCode, _ = fairCall(t, base, "POST", path, bearer, nil, map[string]string{"token": tok, "captcha_id": id, "captcha": ans, "request_id": "r1"})
	return tokCode, "", buyCode
}

// TestQueueModeEndToEnd: in queue mode the access token needs the
// admission pass; users who join after the start are admitted first in,
// first out (the admission log, read back from Redis, is the join order
// with no user twice); an admitted user buys; another user's pass and a
// pass after the buy (Done) are refused.
func TestQueueModeEndToEnd(t *testing.T) {
	cfg := embeddedConfig(10, 10)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, 20
	queueEndToEnd(t, cfg)
}

// TestQueueModeOnCluster is TestQueueModeEndToEnd on the real Redis
// Cluster: every key the fair glue touches next to the room's must be in
// the room's slot, or a script or a multi-key command fails there.
func TestQueueModeOnCluster(t *testing.T) {
	cfg := embeddedConfig(10, 10)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, 20
	queueEndToEnd(t, onCluster(t, cfg))
}

// onCluster moves cfg onto the real Redis Cluster under a fresh key
// prefix (and MariaDB when SECKILL_MYSQL_DSN is set), or skips.
func onCluster(t *testing.T, cfg app.Config) app.Config {
	t.Helper()
	addrs := os.Getenv("SECKILL_REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		t.Skip("SECKILL_REDIS_CLUSTER_ADDRS not set: no real Redis Cluster")
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	cfg.RedisCluster = strings.Split(addrs, ",")
	cfg.KeyPrefix = "tfq" + tag + ":"
	if dsn := os.Getenv("SECKILL_MYSQL_DSN"); dsn != "" {
		cfg.MySQLDSN = dsn
		cfg.MySQLDatabase = "seckill_fq_" + tag
		cfg.DropDatabaseOnClose = true
	}
	t.Cleanup(func() { cleanClusterPrefix(cfg.RedisCluster, cfg.KeyPrefix) })
	return cfg
}

func queueEndToEnd(t *testing.T, cfg app.Config) {
	a, base := startApp(t, cfg)
	ctx := context.Background()

	var code int
	var m map[string]any
	_, act := fairCall(t, base, "GET", "/api/activity", "", nil, nil)
	if act["sale_mode"] != "queue" {
		t.Fatalf("activity sale_mode = %v, want queue", act["sale_mode"])
	}
	const n = 6
	bearers, tickets := make([]string, n), make([]string, n)
	for i := range n {
		_, m = fairCall(t, base, "POST", "/api/login", "", nil, map[string]string{"username": "user" + strconv.Itoa(i+1)})
		bearers[i], _ = m["token"].(string)
		code, m = fairCall(t, base, "POST", "/api/queue/join", bearers[i], nil, struct{}{})
		if code != 200 || m["ticket"] == "" {
			t.Fatalf("join user%d: %d %v", i+1, code, m)
		}
		tickets[i], _ = m["ticket"].(string)
	}
	// Not admitted (or not yet asked): the token is refused without a pass.
	if code, _, _ := fairBuy(t, base, bearers[0], nil); code != 403 {
		t.Fatalf("token without a pass: %d, want 403", code)
	}
	passes := make([]string, n)
	for i := range n {
		until(t, 30*time.Second, "admission of user"+strconv.Itoa(i+1), func() bool {
			code, m = fairCall(t, base, "GET", "/api/queue/poll", bearers[i], map[string]string{"X-Queue-Ticket": tickets[i]}, nil)
			if code != 200 {
				t.Fatalf("poll user%d: %d %v", i+1, code, m)
			}
			passes[i], _ = m["pass"].(string)
			return m["state"] == "admitted"
		})
	}
	// Another user's pass is refused; a forged one too.
	if code, st, _ := fairBuy(t, base, bearers[1], map[string]string{"X-Queue-Pass": passes[0]}); code != 403 || st != "queue" {
		t.Fatalf("another user's pass: %d %q, want 403 queue", code, st)
	}
	if code, _, _ := fairBuy(t, base, bearers[1], map[string]string{"X-Queue-Pass": passes[1] + "x"}); code != 403 {
		t.Fatalf("altered pass: %d, want 403", code)
	}
	if tc, st, bc := fairBuy(t, base, bearers[0], map[string]string{"X-Queue-Pass": passes[0]}); tc != 200 || bc != 202 {
		t.Fatalf("admitted user's buy: token %d %q, buy %d", tc, st, bc)
	}
	// The buy freed the slot (Done): the pass is spent.
	if code, st, _ := fairBuy(t, base, bearers[0], map[string]string{"X-Queue-Pass": passes[0]}); code != 403 || st != "queue" {
		t.Fatalf("spent pass: %d %q, want 403 queue", code, st)
	}
	pub, err := app.FairPublished(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var admitted []string
	for _, b := range pub.Batches {
		admitted = append(admitted, b...)
	}
	seen := map[string]bool{}
	for _, u := range admitted {
		if seen[u] {
			t.Fatalf("user %s admitted twice: %v", u, pub.Batches)
		}
		seen[u] = true
	}
	// Every join came after the start: no pre-queue, first in, first out.
	want := []string{"1", "2", "3", "4", "5", "6"}
	if len(pub.Order) != 0 || !slices.Equal(admitted, want) {
		t.Fatalf("pre-queue %v, admission order %v, want none and the join order %v", pub.Order, admitted, want)
	}
	st, err := app.FairStatsOf(ctx, a)
	if err != nil || st.Admitted != n || st.Waiting != 0 {
		t.Fatalf("stats %+v %v: want %d admitted, none waiting", st, err, n)
	}
	checkFairCounts(t, a)
}

// checkFairCounts reads the invariants' fair counts once the buys
// settled: nobody admitted twice, no place lost, every buyer admitted.
func checkFairCounts(t *testing.T, a *app.App) {
	t.Helper()
	var iv app.Invariants
	until(t, time.Minute, "the buys settled", func() bool {
		var err error
		iv, err = a.Invariants(context.Background())
		return err == nil && iv.Settled && iv.LiveOrders > 0
	})
	c := iv.Fair
	if c == nil {
		t.Fatal("no fair counts in a fair mode's invariants")
	}
	if c.AdmittedTwice != 0 || c.BuyersNotAdmitted != 0 {
		t.Fatalf("fair counts %+v: want nobody admitted twice, every buyer admitted", *c)
	}
	if c.Mode == app.SaleQueue && c.Admitted+c.Waiting+c.Abandoned != c.Joined {
		t.Fatalf("fair counts %+v: a place lost", *c)
	}
}

// TestDrawModeEndToEnd: entries before the start, the draw at the start
// (verified with draw.Verify from what the sale publishes), exactly Stock
// winners who alone may take a token; a winner who does not buy in time is
// replaced from the waitlist, loses, and the replacement buys.
func TestDrawModeEndToEnd(t *testing.T) {
	// Not parallel: its entries must come in before a start 6 s away,
	// which other tests' load can take away.
	drawEndToEnd(t, drawConfig())
}

// TestDrawModeOnCluster is TestDrawModeEndToEnd on the real Redis
// Cluster.
func TestDrawModeOnCluster(t *testing.T) {
	drawEndToEnd(t, onCluster(t, drawConfig()))
}

func drawConfig() app.Config {
	cfg := embeddedConfig(10, 2)
	// The pay deadline is long: no buyer here races it. The test lapses
	// w2's on demand (LapseDrawDeadline); a 3 s one lapsed under load
	// before the losers had asked, and one was handed w2's place.
	cfg.SaleMode, cfg.DrawDeadline = app.SaleDraw, time.Hour
	cfg.StartIn, cfg.PathLead = 6*time.Second, 6*time.Second
	return cfg
}

func drawEndToEnd(t *testing.T, cfg app.Config) {
	a, base := startApp(t, cfg)
	ctx := context.Background()
	const n = 6
	bearers := map[string]string{} // user ID → bearer
	for i := range n {
		_, m := fairCall(t, base, "POST", "/api/login", "", nil, map[string]string{"username": "user" + strconv.Itoa(i+1)})
		b, _ := m["token"].(string)
		code, m := fairCall(t, base, "POST", "/api/draw/enter", b, nil, struct{}{})
		if code != 200 || m["status"] != "entered" {
			t.Fatalf("enter user%d: %d %v", i+1, code, m)
		}
		bearers[strconv.Itoa(i+1)] = b
	}
	var pub app.Published
	until(t, 30*time.Second, "the draw", func() bool {
		var err error
		pub, err = app.FairPublished(ctx, a)
		return err == nil && len(pub.Order) == n && pub.Seed != ""
	})
	seed, _ := hex.DecodeString(pub.Seed)
	if err := draw.Verify(draw.VerifyParams{Seed: seed, Commitment: pub.Commitment, Entries: pub.Entries, Stock: 2, Winners: pub.Order[:2]}); err != nil {
		t.Fatalf("the published draw does not verify: %v", err)
	}
	if waitroom.Commit(seed) != pub.Commitment {
		t.Fatal("seed does not match the commitment")
	}
	w1, w2 := pub.Order[0], pub.Order[1]
	// w1 buys; w2 does not, and once its deadline lapsed is replaced by
	// the first of the waitlist.
	if tc, st, bc := fairBuy(t, base, bearers[w1], nil); tc != 200 || bc != 202 {
		t.Fatalf("winner's buy: token %d %q, buy %d", tc, st, bc)
	}
	// A loser, or the waitlist before a replacement, is refused the token.
	for _, u := range pub.Order[2:] {
		if code, st, _ := fairBuy(t, base, bearers[u], nil); code != 403 || st != "not_drawn" {
			t.Fatalf("loser %s's token: %d %q, want 403 not_drawn", u, code, st)
		}
	}
	outcome := func(u string) string {
		_, m := fairCall(t, base, "GET", "/api/draw/outcome", bearers[u], nil, nil)
		s, _ := m["status"].(string)
		return s
	}
	if got := outcome(w2); got != "winner" {
		t.Fatalf("the unpaid winner within the deadline is %q, want winner", got)
	}
	if err := app.LapseDrawDeadline(ctx, a, w2); err != nil {
		t.Fatal(err)
	}
	until(t, 30*time.Second, "the unpaid winner replaced", func() bool { return outcome(w2) == "lost" })
	if got := outcome(w1); got != "winner" {
		t.Fatalf("the winner who bought is %q, want winner", got)
	}
	r := pub.Order[2]
	if got := outcome(r); got != "winner" {
		t.Fatalf("the first of the waitlist is %q, want winner", got)
	}
	if code, st, _ := fairBuy(t, base, bearers[w2], nil); code != 403 || st != "not_drawn" {
		t.Fatalf("replaced winner's token: %d %q, want 403 not_drawn", code, st)
	}
	if tc, st, bc := fairBuy(t, base, bearers[r], nil); tc != 200 || bc != 202 {
		t.Fatalf("replacement's buy: token %d %q, buy %d", tc, st, bc)
	}
	winners := 0
	for _, u := range pub.Order {
		if outcome(u) == "winner" {
			winners++
		}
	}
	if winners != 2 {
		t.Fatalf("%d winners, want the stock (2)", winners)
	}
	checkFairCounts(t, a)
	if iv, _ := a.Invariants(ctx); iv.Fair.Admitted != 2 || iv.LiveOrders != 2 {
		t.Fatalf("fair counts %+v, %d live orders: want 2 winners, 2 orders", *iv.Fair, iv.LiveOrders)
	}
}

// TestFCFSModeUnchanged: the default mode has no fair route and no
// sale_mode in /api/activity.
func TestFCFSModeUnchanged(t *testing.T) {
	a, base := startApp(t, embeddedConfig(2, 1))
	_, act := fairCall(t, base, "GET", "/api/activity", "", nil, nil)
	if _, ok := act["sale_mode"]; ok {
		t.Fatalf("fcfs /api/activity has sale_mode: %v", act)
	}
	if _, body := getText(t, base+"/metrics", ""); strings.Contains(body, "seckill_fair_") {
		t.Error("fcfs /metrics has seckill_fair_ metrics")
	}
	if iv, err := a.Invariants(context.Background()); err != nil || iv.Fair != nil {
		t.Fatalf("fcfs invariants have fair counts: %+v %v", iv.Fair, err)
	}
	_, m := fairCall(t, base, "POST", "/api/login", "", nil, map[string]string{"username": "user1"})
	b, _ := m["token"].(string)
	for _, p := range []string{"/api/queue/join", "/api/draw/enter"} {
		if code, _ := fairCall(t, base, "POST", p, b, nil, struct{}{}); code != 404 {
			t.Errorf("fcfs %s: %d, want 404", p, code)
		}
	}
}

// TestQueuePreQueueVerified: users who join before the start are admitted
// in the order of the verifiable shuffle: the admission log equals the
// published order, which waitroom.VerifyOrder recomputes from the seed
// and the entries.
func TestQueuePreQueueVerified(t *testing.T) {
	// Not parallel: its joins must come before a start 6 s away, which
	// other tests' load can take away.
	cfg := embeddedConfig(10, 10)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, 50
	// Every join must come before the start (2 s was too short under
	// -race on a loaded machine: the joins came after it, first in, first
	// out, and no pre-queue was placed).
	cfg.StartIn, cfg.PathLead = 6*time.Second, 6*time.Second
	a, base := startApp(t, cfg)
	ctx := context.Background()
	const n = 8
	for i := range n {
		_, m := fairCall(t, base, "POST", "/api/login", "", nil, map[string]string{"username": "user" + strconv.Itoa(i+1)})
		b, _ := m["token"].(string)
		if code, m := fairCall(t, base, "POST", "/api/queue/join", b, nil, struct{}{}); code != 200 || m["state"] != "waiting" {
			t.Fatalf("join user%d: %d %v", i+1, code, m)
		}
	}
	var pub app.Published
	until(t, 30*time.Second, "every pre-queue entry admitted", func() bool {
		var err error
		pub, err = app.FairPublished(ctx, a)
		k := 0
		for _, b := range pub.Batches {
			k += len(b)
		}
		return err == nil && k == n
	})
	seed, _ := hex.DecodeString(pub.Seed)
	if err := waitroom.VerifyOrder(seed, pub.Commitment, pub.Entries, pub.Order); err != nil {
		t.Fatalf("the published pre-queue does not verify: %v", err)
	}
	var admitted []string
	for _, b := range pub.Batches {
		admitted = append(admitted, b...)
	}
	if !slices.Equal(admitted, pub.Order) {
		t.Fatalf("admission order %v, want the verified order %v", admitted, pub.Order)
	}
}

// TestConfigSaleMode: the flag and its environment variable, and the
// validation of each mode's settings.
func TestConfigSaleMode(t *testing.T) {
	cleanEnv(t)
	t.Setenv("SECKILL_SALE_MODE", "queue")
	t.Setenv("SECKILL_QUEUE_RATE", "12.5")
	c := app.DefaultConfig()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-queue-cap", "7"}); err != nil {
		t.Fatal(err)
	}
	if c.SaleMode != app.SaleQueue || c.QueueRate != 12.5 || c.QueueCap != 7 || c.Validate() != nil {
		t.Fatalf("parsed %q %v %d, validate %v", c.SaleMode, c.QueueRate, c.QueueCap, c.Validate())
	}
	if d := app.DefaultConfig(); d.SaleMode != app.SaleFCFS || d.Validate() != nil {
		t.Fatalf("default sale mode %q, %v", d.SaleMode, d.Validate())
	}
	for _, mode := range []string{app.SaleQueue, app.SaleDraw} { // on a Cluster too
		c := app.DefaultConfig()
		c.SaleMode, c.QueueRate, c.RedisCluster = mode, 10, []string{"127.0.0.1:7000"}
		if err := c.Validate(); err != nil {
			t.Errorf("sale mode %s on a Cluster: %v", mode, err)
		}
	}
	for _, bad := range []func(*app.Config){
		func(c *app.Config) { c.SaleMode = "lottery" },
		func(c *app.Config) { c.SaleMode, c.QueueRate, c.QueueCap = app.SaleQueue, 0, 0 },
		func(c *app.Config) { c.SaleMode, c.QueueRate = app.SaleQueue, -1 },
		func(c *app.Config) { c.SaleMode, c.DrawDeadline = app.SaleDraw, 0 },
	} {
		c := app.DefaultConfig()
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("%+v validated", c.SaleMode)
		}
	}
}

// TestQueuePausesWithTheSale: the admin API's pause of the activity pauses
// the queue's admission, and its resume resumes it.
func TestQueuePausesWithTheSale(t *testing.T) {
	cfg := embeddedConfig(10, 5)
	cfg.SaleMode = app.SaleQueue
	a, _ := startApp(t, cfg)
	ctx := context.Background()
	b := app.AdminBackend(t, a)
	for _, paused := range []bool{true, false} {
		var err error
		if paused {
			_, err = b.Pause(ctx, app.ActivityID(a))
		} else {
			_, err = b.Resume(ctx, app.ActivityID(a))
		}
		if err != nil {
			t.Fatal(err)
		}
		if st, err := app.FairStatsOf(ctx, a); err != nil || st.Paused != paused {
			t.Fatalf("queue paused = %v (%v) after the sale's pause = %v", st.Paused, err, paused)
		}
	}
}

// getText is a GET with an optional bearer; it returns the code and body.
func getText(t *testing.T, url, bearer string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestQueueOperatorPlane: the queue's metrics on /metrics, and its admin
// routes behind the admin token (401 without, 404 for another activity,
// 400 for a commitment that is not one).
func TestQueueOperatorPlane(t *testing.T) {
	cfg := embeddedConfig(10, 5)
	cfg.SaleMode = app.SaleQueue
	cfg.AdminAddr, cfg.AdminToken = "127.0.0.1:0", strings.Repeat("a", 40)
	a, base := startApp(t, cfg)
	until(t, time.Minute, "the fair gauges", func() bool {
		_, body := getText(t, base+"/metrics", "")
		return strings.Contains(body, "seckill_fair_waiting 0") && strings.Contains(body, "seckill_fair_rate 0") // no commitment yet: not configured
	})
	admin := a.AdminURL() + app.AdminPath + "queue/"
	if code, _ := getText(t, admin+"1/stats", ""); code != 401 {
		t.Errorf("stats without the token: %d, want 401", code)
	}
	if code, _ := getText(t, admin+"2/stats", cfg.AdminToken); code != 404 {
		t.Errorf("stats of another activity: %d, want 404", code)
	}
	code, body := getText(t, admin+"1/stats", cfg.AdminToken)
	if code != 200 || !strings.Contains(body, `"mode":"queue"`) {
		t.Errorf("stats: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", admin+"1/commit", strings.NewReader(`{"commitment":"not-a-hash"}`))
	req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("commit of a bad commitment: %d, want 400", resp.StatusCode)
	}
	// A commitment configures the room with the flags' rate.
	req, _ = http.NewRequest("POST", admin+"1/commit", strings.NewReader(`{"commitment":"`+waitroom.Commit([]byte(strings.Repeat("z", 32)))+`"}`))
	req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, body := getText(t, admin+"1/stats", cfg.AdminToken); resp.StatusCode != 200 || code != 200 || !strings.Contains(body, `"rate":50`) {
		t.Errorf("after the commitment (%d): stats %d %s", resp.StatusCode, code, body)
	}
}
