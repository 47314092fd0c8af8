package app_test

import (
	"context"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/waitroom"
)

// The fault battery's queue scenarios: two instances admit from one room;
// one dies (killHook: every Redis command of it fails from a point on, as
// a process killed between two commands: a script ran whole or not at
// all), or Redis restarts with its data mid-queue. The counts: every
// joiner admitted exactly once by the room (each user's own Poll says
// admitted), admitted + waiting + abandoned = joined (no place lost
// silently), and the admission log holds no user twice and only admitted
// users (a batch whose instance died before logging it is the only gap).

// killHook fails every command once dead is set.
type killHook struct{ dead *atomic.Bool }

var errKilled = errors.New("instance killed")

func (h killHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.dead.Load() {
			return nil, errKilled
		}
		return next(ctx, network, addr)
	}
}
func (h killHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.dead.Load() {
			cmd.SetErr(errKilled)
			return errKilled
		}
		return next(ctx, cmd)
	}
}
func (h killHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.dead.Load() {
			return errKilled
		}
		return next(ctx, cmds)
	}
}

// twoQueueInstances starts A (embedded) and B on A's Redis, both in queue
// mode with one secret (one commitment), and returns a room on the same
// keys for the test's joins and polls.
func twoQueueInstances(t *testing.T, rate float64, hookB redis.Hook) (a, b *app.App, room *waitroom.Room, rdb *redis.Client) {
	cfg := embeddedConfig(10, 5)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, rate
	cfg.Secret = strings.Repeat("s", 40)
	cfg.SQLitePath = filepath.Join(t.TempDir(), "shop.db")
	a, _ = startApp(t, cfg)
	cfgB := sharedSale(t, cfg, a)
	if hookB != nil {
		app.HookRedis(&cfgB, hookB)
	}
	b, _ = startApp(t, cfgB)
	rdb = redis.NewClient(&redis.Options{Addr: app.Miniredis(a).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	room, err := waitroom.New(rdb, []waitroom.Key{{ID: "t", Secret: []byte(strings.Repeat("k", 32))}}, waitroom.WithKeyPrefix(cfg.KeyPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return a, b, room, rdb
}

// sharedSale is cfg for a second instance beside a: A's Redis and A's
// database (SQLitePath), so B joins A's activity — its start too, as
// processes sharing a database do (with a database of its own B's sale
// would start at B's own startup, truncated to the second: a second later
// than A's, now and then, and the started room refuses to move its
// start) — with a broker log of its own.
func sharedSale(t *testing.T, cfg app.Config, a *app.App) app.Config {
	cfg.RedisAddr = app.Miniredis(a).Addr()
	cfg.KafkaDataDir = t.TempDir()
	return cfg
}

// joinAll joins n users ("q1".."qn") after the start and returns their
// tickets.
func joinAll(t *testing.T, room *waitroom.Room, sale string, n int) map[string]string {
	ctx := context.Background()
	tickets := map[string]string{}
	for i := 1; i <= n; i++ {
		u := "q" + strconv.Itoa(i)
		tk, err := room.Join(ctx, sale, u)
		if err != nil {
			t.Fatalf("join %s: %v", u, err)
		}
		tickets[u] = tk
	}
	return tickets
}

// checkQueue counts the queue's invariants once every user is admitted.
func checkQueue(t *testing.T, a *app.App, room *waitroom.Room, sale string, tickets map[string]string) {
	t.Helper()
	ctx := context.Background()
	until(t, time.Minute, "every user admitted", func() bool {
		st, err := app.FairStatsOf(ctx, a)
		return err == nil && st.Admitted == int64(len(tickets))
	})
	st, err := app.FairStatsOf(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Admitted+st.Waiting+st.Abandoned != int64(len(tickets)) {
		t.Fatalf("admitted %d + waiting %d + abandoned %d != joined %d: a place lost", st.Admitted, st.Waiting, st.Abandoned, len(tickets))
	}
	for u, tk := range tickets {
		p, err := room.Poll(ctx, waitroom.Credential{Sale: sale, User: u, Token: tk})
		if err != nil || p.State != waitroom.Admitted {
			t.Fatalf("user %s: %v %v, want admitted", u, p.State, err)
		}
	}
	pub, err := app.FairPublished(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	// Each batch is one Admit script, contiguous in the queue; two
	// instances may log their batches in the other order, so the batches
	// are put in the order of their first user.
	num := func(u string) int { n, _ := strconv.Atoi(u[1:]); return n }
	batches := slices.Clone(pub.Batches)
	slices.SortStableFunc(batches, func(x, y []string) int { return num(x[0]) - num(y[0]) })
	seen := map[string]bool{}
	var order []int
	for _, b := range batches {
		for _, u := range b {
			if seen[u] {
				t.Fatalf("user %s admitted twice (log %v)", u, pub.Batches)
			}
			if _, ok := tickets[u]; !ok {
				t.Fatalf("unknown user %s in the log", u)
			}
			seen[u] = true
			order = append(order, num(u))
		}
	}
	if missing := len(tickets) - len(seen); missing > 0 {
		t.Logf("%d admissions not in the log (a batch whose instance died before logging it)", missing)
	}
	if !slices.IsSorted(order) { // joined after the start: first in, first out
		t.Fatalf("admissions out of join order: %v", order)
	}
}

// TestQueueInstanceKilledWhileAdmitting: B dies while both admit; A goes
// on; nobody is admitted twice, no place is lost.
func TestQueueInstanceKilledWhileAdmitting(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	var dead atomic.Bool
	a, b, room, _ := twoQueueInstances(t, 100, killHook{dead: &dead})
	t.Cleanup(func() { dead.Store(false) }) // revived before its shutdown (cleanups run last in, first out)
	sale := app.ActivityID(a)
	tickets := joinAll(t, room, sale, 300)
	until(t, time.Minute, "B admitting", func() bool { return app.FairAdmits(b) > 0 })
	dead.Store(true) // killed between two commands
	until(t, time.Minute, "A admitting after B died", func() bool { return app.FairAdmits(a) > 0 })
	checkQueue(t, a, room, sale, tickets)
	t.Logf("admitted by A %v, by B %v before it died", app.FairAdmits(a), app.FairAdmits(b))
}

// TestQueueRedisRestartMidQueue: Redis goes away mid-queue and comes back
// with its data (a failover to a replica that has every write, or a
// restart from an fsynced AOF): admission stops while it is away and goes
// on after; nobody is admitted twice, no place is lost.
func TestQueueRedisRestartMidQueue(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	a, _, room, _ := twoQueueInstances(t, 100, nil)
	sale := app.ActivityID(a)
	tickets := joinAll(t, room, sale, 300)
	mini := app.Miniredis(a)
	until(t, time.Minute, "admitting", func() bool {
		st, err := app.FairStatsOf(context.Background(), a)
		return err == nil && st.Admitted > 50
	})
	mini.Close()
	time.Sleep(300 * time.Millisecond) // Redis away: stands for the failover's gap, not synchronisation
	if err := mini.Restart(); err != nil {
		t.Fatal(err)
	}
	checkQueue(t, a, room, sale, tickets)
}

// TestQueueRateTwoInstances measures the admission rate of one room with
// two instances admitting, against a real Redis (a measurement: set
// FULLSTACK_FAIR_RATE=1 and SECKILL_REDIS_ADDR): within ±5 % of the set
// rate over the steady part.
func TestQueueRateTwoInstances(t *testing.T) {
	addr := os.Getenv("SECKILL_REDIS_ADDR")
	if addr == "" || os.Getenv("FULLSTACK_FAIR_RATE") == "" {
		t.Skip("a measurement: set FULLSTACK_FAIR_RATE=1 and SECKILL_REDIS_ADDR")
	}
	for _, n := range []int{1, 2, 4} {
		t.Run(strconv.Itoa(n)+"-instances", func(t *testing.T) {
			const rate, users = 200.0, 2400
			prefix := "waitx-rate-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
			t.Cleanup(func() { cleanPrefix(addr, prefix) })
			var apps []*app.App
			for range n {
				cfg := embeddedConfig(10, 5)
				cfg.RedisAddr, cfg.KeyPrefix = addr, prefix
				cfg.SaleMode, cfg.QueueRate = app.SaleQueue, rate
				cfg.Secret = strings.Repeat("s", 40)
				a, _ := startApp(t, cfg)
				apps = append(apps, a)
			}
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = rdb.Close() })
			room, err := waitroom.New(rdb, []waitroom.Key{{ID: "t", Secret: []byte(strings.Repeat("k", 32))}}, waitroom.WithKeyPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			sale := app.ActivityID(apps[0])
			if err := app.PauseQueue(context.Background(), apps[0], true); err != nil {
				t.Fatal(err)
			}
			joinAll(t, room, sale, users)
			if err := app.PauseQueue(context.Background(), apps[0], false); err != nil {
				t.Fatal(err)
			}
			// From 10 % to 90 % admitted: the rate between.
			var t1, t2 time.Time
			var a1, a2 int64
			until(t, 2*time.Minute, "90 % admitted", func() bool {
				st, err := room.Stats(context.Background(), sale)
				if err != nil {
					return false
				}
				if t1.IsZero() && st.Admitted >= users/10 {
					t1, a1 = time.Now(), st.Admitted
				}
				if st.Admitted >= users*9/10 {
					t2, a2 = time.Now(), st.Admitted
					return true
				}
				return false
			})
			got := float64(a2-a1) / t2.Sub(t1).Seconds()
			errPct := 100 * (got/rate - 1)
			t.Logf("%d instances: %.1f admissions/s for a set rate of %.0f (%+.2f %%)", n, got, rate, errPct)
			if math.Abs(errPct) > 5 {
				t.Errorf("rate error %+.2f %% with %d instances, want within ±5 %%", errPct, n)
			}
			var per []float64
			for _, a := range apps {
				per = append(per, app.FairAdmits(a))
			}
			t.Logf("admitted per instance: %v", per)
		})
	}
}

// TestQueueSecondInstanceWithoutSharedSecret: without the admin API each
// process commits to a seed of its own; a second process (or a restart)
// after the start joins the first one's commitment instead of failing.
func TestQueueSecondInstanceWithoutSharedSecret(t *testing.T) {
	cfg := embeddedConfig(10, 5)
	cfg.SaleMode = app.SaleQueue
	cfg.SQLitePath = filepath.Join(t.TempDir(), "shop.db")
	a, _ := startApp(t, cfg)
	before, err := app.FairStatsOf(context.Background(), a)
	if err != nil || before.Commitment == "" {
		t.Fatalf("stats %+v %v", before, err)
	}
	b, _ := startApp(t, sharedSale(t, cfg, a))
	after, err := app.FairStatsOf(context.Background(), b)
	if err != nil || after.Commitment != before.Commitment {
		t.Fatalf("B's commitment %q (%v), want A's %q", after.Commitment, err, before.Commitment)
	}
}

// TestQueueRedisLostMidQueue: Redis comes back EMPTY mid-queue (a restart
// without its data, a failover to a replica that had nothing): the room
// is rebuilt (the worker configures it again, with the same commitment,
// and places its empty pre-queue: the sale has started), every user who
// lost their place is told so (the poll answers 403 "queue": join again)
// and can rejoin, first in, first out; a pass given before the loss no
// longer buys; nobody is admitted twice in the rebuilt room, and every
// rejoined user is admitted.
func TestQueueRedisLostMidQueue(t *testing.T) {
	cfg := embeddedConfig(20, 5)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, 20
	a, base := startApp(t, cfg)
	ctx := context.Background()
	before, err := app.FairStatsOf(ctx, a)
	if err != nil || before.Commitment == "" {
		t.Fatalf("stats %+v %v", before, err)
	}
	if err := app.PauseQueue(ctx, a, true); err != nil {
		t.Fatal(err)
	}
	const n = 8
	bearers, tickets := make([]string, n), make([]string, n)
	for i := range n {
		_, m := fairCall(t, base, "POST", "/api/login", "", nil, map[string]string{"username": "user" + strconv.Itoa(i+1)})
		bearers[i], _ = m["token"].(string)
		code, m := fairCall(t, base, "POST", "/api/queue/join", bearers[i], nil, struct{}{})
		if code != 200 {
			t.Fatalf("join user%d: %d %v", i+1, code, m)
		}
		tickets[i], _ = m["ticket"].(string)
	}
	// user1 is admitted (alone: the cap of one batch), then Redis loses everything.
	if err := app.PauseQueue(ctx, a, false); err != nil {
		t.Fatal(err)
	}
	var pass string
	until(t, time.Minute, "user1 admitted", func() bool {
		_, m := fairCall(t, base, "GET", "/api/queue/poll", bearers[0], map[string]string{"X-Queue-Ticket": tickets[0]}, nil)
		pass, _ = m["pass"].(string)
		return m["state"] == "admitted"
	})
	// Quiesce the admitter before the loss: paused, and every batch the
	// room admitted is in the log. A batch admitted by the lost room and
	// logged after the flush would otherwise land in the rebuilt room's
	// log (CI saw [1 2] twice): the documented gap of a lossy failover
	// (RELIABILITY), not what this test checks.
	if err := app.PauseQueue(ctx, a, true); err != nil {
		t.Fatal(err)
	}
	until(t, time.Minute, "every admitted batch logged", func() bool {
		st, err := app.FairStatsOf(ctx, a)
		pub, perr := app.FairPublished(ctx, a)
		if err != nil || perr != nil {
			return false
		}
		logged := 0
		for _, b := range pub.Batches {
			logged += len(b)
		}
		return int64(logged) == st.Admitted
	})
	app.Miniredis(a).FlushAll()
	// Told: every poll with the old ticket answers "join again".
	for i := range n {
		if code, m := fairCall(t, base, "GET", "/api/queue/poll", bearers[i], map[string]string{"X-Queue-Ticket": tickets[i]}, nil); code != 403 || m["status"] != "queue" {
			t.Fatalf("user%d's poll after the loss: %d %v, want 403 queue (join again)", i+1, code, m)
		}
	}
	// The pass given before the loss does not buy.
	if code, st, _ := fairBuy(t, base, bearers[0], map[string]string{"X-Queue-Pass": pass}); code == 200 {
		t.Fatalf("a pass from before the loss took a token (%s)", st)
	}
	// Rejoin (the room is rebuilt by the worker: joins succeed again).
	for i := range n {
		until(t, time.Minute, "user"+strconv.Itoa(i+1)+" rejoined", func() bool {
			code, m := fairCall(t, base, "POST", "/api/queue/join", bearers[i], nil, struct{}{})
			tickets[i], _ = m["ticket"].(string)
			return code == 200
		})
	}
	for i := range n {
		until(t, time.Minute, "user"+strconv.Itoa(i+1)+" admitted again", func() bool {
			_, m := fairCall(t, base, "GET", "/api/queue/poll", bearers[i], map[string]string{"X-Queue-Ticket": tickets[i]}, nil)
			return m["state"] == "admitted"
		})
	}
	after, err := app.FairStatsOf(ctx, a)
	if err != nil || after.Commitment != before.Commitment || after.Admitted != n || after.Waiting != 0 {
		t.Fatalf("rebuilt room %+v %v: want the same commitment %q, %d admitted, none waiting", after, err, before.Commitment, n)
	}
	pub, err := app.FairPublished(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var order []string
	for _, b := range pub.Batches {
		for _, u := range b {
			if seen[u] {
				t.Fatalf("user %s admitted twice in the rebuilt room: %v", u, pub.Batches)
			}
			seen[u] = true
			order = append(order, u)
		}
	}
	want := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	if !slices.Equal(order, want) {
		t.Fatalf("the rebuilt room admitted %v, want the rejoin order %v", order, want)
	}
}
