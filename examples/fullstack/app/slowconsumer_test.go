package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
)

// slowGrace is the reconciler's grace in the slow-consumer tests; time
// passes on the reconciler's clock and Redis's (pinned), never waited for.
const slowGrace = time.Minute

// slowSale is an embedded sale whose reconciler and Redis run on one test
// clock, with its buyers' accepted reservations.
type slowSale struct {
	t        *testing.T
	a        *app.App
	clock    *testenv.Clock
	stock    int64
	accepted map[string]string // reservation → buyer
	next     int               // the next demo user
}

func startSlowSale(t *testing.T, users int, stock int64) *slowSale {
	t.Helper()
	cfg := embeddedConfig(users, stock)
	cfg.ReconcileGrace = slowGrace
	cfg.ReconcileEvery = time.Hour // the test runs the passes
	cfg.UserRate = 1000
	clock := testenv.NewClock(time.Time{})
	app.SetReconcileClock(&cfg, clock)
	a, _ := startApp(t, cfg)
	// Reservations take their time from Redis TIME: pinned at t0, the
	// moment the reconciler's clock starts from (the sale is open then).
	t0 := time.Now().Truncate(time.Millisecond)
	app.Miniredis(a).SetTime(t0)
	clock.Set(t0)
	return &slowSale{t: t, a: a, clock: clock, stock: stock, accepted: map[string]string{}, next: 1}
}

// buy makes n new demo buyers buy one unit each; every one is accepted.
func (s *slowSale) buy(n int) []string {
	s.t.Helper()
	ctx := context.Background()
	var resvs []string
	for range n {
		user := strconv.Itoa(s.next)
		s.next++
		at, err := app.Credentials(ctx, s.a, user)
		require.NoError(s.t, err)
		var b [8]byte
		_, _ = rand.Read(b[:])
		at.RequestID = hex.EncodeToString(b[:])
		out := app.Checkout(s.a).Buy(ctx, &at)
		require.Equal(s.t, checkout.Accepted, out.Kind, "buyer %s: %+v", user, out)
		s.accepted[out.Reservation] = user
		resvs = append(resvs, out.Reservation)
	}
	return resvs
}

// waitOrders waits (Kafka delivery has no clock to move) until every
// accepted reservation has an order in the DB.
func (s *slowSale) waitOrders() {
	s.t.Helper()
	deadline := time.Now().Add(drainBound)
	for {
		n := s.count("SELECT COUNT(*) FROM seckill_order WHERE reservation_id IN ?", slices.Collect(maps.Keys(s.accepted)))
		if n == int64(len(s.accepted)) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d of %d accepted reservations have an order after %v", n, len(s.accepted), drainBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *slowSale) count(q string, args ...any) int64 {
	s.t.Helper()
	var n int64
	require.NoError(s.t, app.DB(s.a).Raw(q, args...).Scan(&n).Error)
	return n
}

// lagPasses moves the clock by 4 graces, a grace at a time, and runs a
// reconcile pass after each: none releases anything, every reservation of
// held is pending, and its buyer reads "queued".
func (s *slowSale) lagPasses(held []string) {
	s.t.Helper()
	ctx := context.Background()
	for i := range 4 {
		s.clock.Advance(slowGrace)
		rep, err := app.Reconcile(ctx, s.a)
		require.NoError(s.t, err)
		require.Empty(s.t, rep.Released, "pass %d, %v after the reservations: a message still in Kafka is never released", i+1, time.Duration(i+1)*slowGrace)
		require.Empty(s.t, rep.ReleaseErrors)
		assert.Subset(s.t, rep.Pending, held, "pass %d", i+1)
		for _, r := range held {
			st, err := app.BuyerResult(ctx, s.a, s.accepted[r], r)
			require.NoError(s.t, err)
			require.Equal(s.t, "queued", st, "reservation %s after %v", r, time.Duration(i+1)*slowGrace)
		}
	}
}

// settle waits for every order, runs a last pass 10 graces on and counts:
// 0 FAILED (results and dedup rows), one live order per accepted buy, the
// stock conserved in Redis and in SQL.
func (s *slowSale) settle() {
	s.t.Helper()
	ctx := context.Background()
	s.waitOrders()
	s.clock.Advance(10 * slowGrace)
	rep, err := app.Reconcile(ctx, s.a)
	require.NoError(s.t, err)
	assert.Empty(s.t, rep.Released)
	assert.Equal(s.t, len(s.accepted), rep.Matched)
	assert.True(s.t, rep.Conserved)

	assert.Zero(s.t, s.count("SELECT COUNT(*) FROM message_dedup WHERE outcome = ?", string(order.StatusFailed)), "FAILED outcomes")
	assert.EqualValues(s.t, len(s.accepted), s.count("SELECT COUNT(*) FROM seckill_order WHERE status <> ?", order.OrderCancelled), "live orders")
	assert.EqualValues(s.t, len(s.accepted), s.count("SELECT COUNT(DISTINCT reservation_id) FROM seckill_order"), "one order per reservation")
	for r, user := range s.accepted {
		st, err := app.BuyerResult(ctx, s.a, user, r)
		require.NoError(s.t, err)
		assert.Equal(s.t, "created", st, "reservation %s", r)
	}
	iv, err := s.a.Invariants(ctx)
	require.NoError(s.t, err)
	assert.Equal(s.t, s.stock, iv.DBStock+iv.LiveOrders, "SQL: stock + live orders = initial (%+v)", iv)
	assert.Equal(s.t, s.stock, iv.RedisRemain+iv.RedisLive, "Redis: remaining + held = initial (%+v)", iv)
	assert.EqualValues(s.t, len(s.accepted), iv.RedisLive, "every accepted buy still held in Redis, as an order")
	assert.True(s.t, iv.Settled, "%+v", iv)
}

// The worker killed mid-sale for 4× the reconcile grace, reconcile passes
// meanwhile, then restarted: 0 FAILED, every accepted buy an order, the
// stock conserved. Before #25 the first pass past the grace released
// every reservation whose message was still in Kafka (the reconciler's
// Pending saw the outbox only) and those buyers read "failed".
func TestSlowConsumerKilledWorker(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	s := startSlowSale(t, 40, 30)
	s.buy(8)
	s.waitOrders()
	require.NoError(t, app.KillConsumer(s.a))
	held := s.buy(12) // beyond the committed offsets, nobody consuming
	s.lagPasses(held)
	_, err := app.JoinConsumer(t, s.a, nil) // the worker restarts
	require.NoError(t, err)
	s.buy(6)
	s.settle()
}

// A rebalance storm mid-sale: members join and leave the group again and
// again while none gets to consume (each claim held until its session is
// revoked), for 4× the grace with reconcile passes meanwhile; then a
// member consumes: 0 FAILED, every accepted buy an order, stock conserved.
func TestSlowConsumerRebalanceStorm(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	s := startSlowSale(t, 40, 30)
	s.buy(8)
	s.waitOrders()
	require.NoError(t, app.KillConsumer(s.a))
	hold := make(chan struct{})
	_, err := app.JoinConsumer(t, s.a, hold) // stays in the group through the storm
	require.NoError(t, err)
	var held []string
	for round := range 4 {
		m, err := app.JoinConsumer(t, s.a, hold) // a member joins: rebalance
		require.NoError(t, err)
		held = append(held, s.buy(3)...)
		m.Leave() // and leaves: rebalance
		s.lagPassesAt(held, round)
	}
	close(hold) // the storm is over: the member that stayed consumes
	s.buy(4)
	s.settle()
}

// lagPassesAt is one pass of lagPasses: a grace on, nothing released, held
// pending and queued.
func (s *slowSale) lagPassesAt(held []string, round int) {
	s.t.Helper()
	ctx := context.Background()
	s.clock.Advance(slowGrace)
	rep, err := app.Reconcile(ctx, s.a)
	require.NoError(s.t, err)
	require.Empty(s.t, rep.Released, "round %d: a message still in Kafka is never released", round)
	require.Empty(s.t, rep.ReleaseErrors)
	assert.Subset(s.t, rep.Pending, held, fmt.Sprintf("round %d", round))
	for _, r := range held {
		st, err := app.BuyerResult(ctx, s.a, s.accepted[r], r)
		require.NoError(s.t, err)
		require.Equal(s.t, "queued", st, "reservation %s, round %d", r, round)
	}
}

// A message the outbox relay published (Kafka refused the hand-off, the
// buy went to the outbox) while the worker is down: once its outbox row is
// sent, the outbox no longer reports it; the relay's acknowledgement
// recorded its position, so the reconciler keeps it for 4× the grace; the
// worker restarts: 0 FAILED, every accepted buy an order.
func TestSlowConsumerRelayedMessage(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	s := startSlowSale(t, 20, 10)
	s.buy(2)
	s.waitOrders()
	require.NoError(t, app.KillConsumer(s.a))
	down := app.FailKafka(s.a)
	down(true)
	held := s.buy(4) // into the outbox
	ctx := context.Background()
	pending, _, err := app.Backlog(ctx, s.a)
	require.NoError(t, err)
	require.EqualValues(t, 4, pending, "the hand-offs went to the outbox")
	down(false)
	deadline := time.Now().Add(drainBound)
	for pending > 0 { // the relay's loop publishes them
		require.True(t, time.Now().Before(deadline), "outbox not relayed within %v", drainBound)
		time.Sleep(20 * time.Millisecond)
		pending, _, err = app.Backlog(ctx, s.a)
		require.NoError(t, err)
	}
	s.lagPasses(held)
	_, err = app.JoinConsumer(t, s.a, nil)
	require.NoError(t, err)
	s.settle()
}
