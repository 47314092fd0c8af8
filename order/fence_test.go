package order_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
)

// dedupRows counts message_dedup rows of a reservation, read straight from SQL.
func dedupRows(t testing.TB, db *gorm.DB, resv string) (n int64, outcome, reason string) {
	t.Helper()
	var rows []order.Dedup
	require.NoError(t, db.Raw("SELECT * FROM message_dedup WHERE reservation_id = ?", resv).Scan(&rows).Error)
	if len(rows) > 0 {
		outcome, reason = rows[0].Outcome, rows[0].Reason
	}
	return int64(len(rows)), outcome, reason
}

func userLive(t testing.TB, db *gorm.DB, act, user string) (orders, units int64) {
	t.Helper()
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM seckill_order WHERE activity_id = ? AND user_id = ? AND status <> ?",
		act, user, order.OrderCancelled).Scan(&orders).Error)
	require.NoError(t, db.Raw("SELECT COALESCE(SUM(qty),0) FROM seckill_order WHERE activity_id = ? AND user_id = ? AND status <> ?",
		act, user, order.OrderCancelled).Scan(&units).Error)
	return orders, units
}

// A consumer lagging past the reconcile grace: the reconciler releases the
// reservation, the unit is sold again, then the late message arrives. Before
// the fence, with stock 1 the late message took the DB unit of the second
// buyer (who was told queued and ended FAILED), and with a cap of 2 one
// buyer ended with 3 live orders.
func TestLateMessageAfterReconcileDeductsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("stock 1, cap 1", func(t *testing.T) {
		t.Parallel()
		eachDB(t, func(t *testing.T, db *gorm.DB) {
			addActivity(t, db, "1", 1, 1)
			clock := newClock()
			led := newLedger()
			p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
			require.NoError(t, err)

			late := msg(1, "1", "101") // buyer A: reserved, message stuck behind a backlog
			led.reserve("1", Reservation{ID: late.ReservationID, User: "101", Qty: 1, At: clock.Now()})
			clock.Add(3 * time.Minute)
			rec, err := reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithClock(clock), reconcile.WithGrace(2*time.Minute))
			require.NoError(t, err)
			rep, err := rec.Reconcile(ctx, "1")
			require.NoError(t, err)
			require.Equal(t, []string{late.ReservationID}, rep.Released)

			// buyer B gets the unit that came back, and its order
			b := msg(2, "1", "102")
			led.reserve("1", Reservation{ID: b.ReservationID, User: "102", Qty: 1, At: clock.Now()})
			ob, err := p.Handle(ctx, b)
			require.NoError(t, err)
			require.Equal(t, order.StatusSuccess, ob.Status)

			// A's message finally arrives
			oa, err := p.Handle(ctx, late)
			require.NoError(t, err)
			assert.Equal(t, order.StatusFailed, oa.Status)
			assert.Equal(t, handoff.ReasonReleased, oa.Reason)
			assert.Equal(t, order.StatusFailed, oa.Status, "releasing again is harmless (idempotent) and finishes an unfinished release")

			assert.EqualValues(t, 1, countOrders(t, db, ""), "one order: B's")
			assert.EqualValues(t, 1, countOrders(t, db, "user_id = ?", "102"))
			assert.EqualValues(t, 0, dbStock(t, db, "1"))
			checkConservation(t, db, "1", 1)
			n, outcome, reason := dedupRows(t, db, late.ReservationID)
			assert.EqualValues(t, 1, n, "one outcome row for A's reservation: the fence")
			assert.Equal(t, string(order.StatusFailed), outcome)
			assert.Equal(t, handoff.ReasonReleased, reason)
			assert.Equal(t, 1, led.releasedByID()[late.ReservationID])
		})
	})

	t.Run("cap 2: no buyer above the cap", func(t *testing.T) {
		t.Parallel()
		eachDB(t, func(t *testing.T, db *gorm.DB) {
			addActivity(t, db, "1", 10, 2)
			clock := newClock()
			led := newLedger()
			p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
			require.NoError(t, err)
			const u = "7"
			late := msg(1, "1", u)
			led.reserve("1", Reservation{ID: late.ReservationID, User: u, Qty: 1, At: clock.Now()})
			clock.Add(time.Hour)
			rec, err := reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithClock(clock), reconcile.WithGrace(2*time.Minute))
			require.NoError(t, err)
			_, err = rec.Reconcile(ctx, "1")
			require.NoError(t, err)
			// Redis gave the buyer their hold back: they buy twice more
			for i := 2; i <= 3; i++ {
				o, err := p.Handle(ctx, msg(i, "1", u))
				require.NoError(t, err)
				require.Equal(t, order.StatusSuccess, o.Status)
			}
			o, err := p.Handle(ctx, late)
			require.NoError(t, err)
			assert.Equal(t, order.StatusFailed, o.Status)
			orders, units := userLive(t, db, "1", u)
			assert.EqualValues(t, 2, orders)
			assert.EqualValues(t, 2, units)
			checkConservation(t, db, "1", 10)
		})
	})
}

// The database holds caps above 1 by itself (Redis may have lost its
// buyers hash): single messages and batches alike.
func TestCapAboveOneHeldInDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			eachDB(t, func(t *testing.T, db *gorm.DB) {
				addActivity(t, db, "1", 100, 3)
				p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(newClock()))
				require.NoError(t, err)
				// user 5 buys qty 2, then qty 1, then qty 1 (over the cap of 3),
				// each in its own batch with other buyers.
				qtys := []int64{2, 1, 1}
				var last order.Outcome
				for round, q := range qtys {
					var msgs []order.Message
					for k := 0; k < 4; k++ {
						m := msg(round*10+k, "1", num(1000+round*10+k))
						if k == 0 {
							m.UserID, m.Qty = "5", q
						}
						msgs = append(msgs, m)
					}
					if !batch {
						msgs = msgs[:1]
					}
					outs, err := p.Process(ctx, msgs)
					require.NoError(t, err)
					for _, o := range outs[1:] {
						require.Equal(t, order.StatusSuccess, o.Status, "other buyers are not failed by user 5")
					}
					last = outs[0]
				}
				assert.Equal(t, order.StatusFailed, last.Status)
				assert.Equal(t, order.ReasonLimit, last.Reason)
				assert.Equal(t, order.StatusFailed, last.Status)
				orders, units := userLive(t, db, "1", "5")
				assert.EqualValues(t, 2, orders)
				assert.EqualValues(t, 3, units)
				checkConservation(t, db, "1", 100)
			})
		})
	}
}

// A release and a consumption of the same reservation racing: exactly one
// wins for every reservation, and Redis is released only for those that
// never became an order.
func TestFenceRace(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		const n = 60
		addActivity(t, db, "1", n, 1)
		clock := newClock()
		led := newLedger()
		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		f, err := handoff.NewFence(db, led, handoff.WithClock(clock))
		require.NoError(t, err)
		var consumed, fenced, refused sync.Map
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			m := msg(i, "1", num(500+i))
			led.reserve("1", Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1, At: clock.Now()})
			wg.Add(2)
			go func() {
				defer wg.Done()
				for {
					o, err := p.Handle(ctx, m)
					if err != nil { // SQLite busy under contention: a retry is what the consumer does
						continue
					}
					if o.Status == order.StatusSuccess {
						consumed.Store(m.ReservationID, true)
					}
					return
				}
			}()
			go func() {
				defer wg.Done()
				for {
					err := f.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", User: m.UserID, ReservationID: m.ReservationID})
					switch {
					case err == nil:
						fenced.Store(m.ReservationID, true)
					case errors.Is(err, handoff.ErrConsumed):
						refused.Store(m.ReservationID, true)
					default:
						continue
					}
					return
				}
			}()
		}
		wg.Wait()
		released := led.releasedByID()
		var nc, nf int
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("r-%d", i)
			_, c := consumed.Load(id)
			_, fe := fenced.Load(id)
			_, rf := refused.Load(id)
			require.True(t, c != fe, "%s: consumed=%v fenced=%v: exactly one wins", id, c, fe)
			require.Equal(t, c, rf, "%s: a release of a consumed reservation is refused", id)
			var orders int64
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM seckill_order WHERE reservation_id = ?", id).Scan(&orders).Error)
			if c {
				nc++
				assert.EqualValues(t, 1, orders)
				assert.Zero(t, released[id], "%s: consumed, never released", id)
			} else {
				nf++
				assert.Zero(t, orders)
				assert.Equal(t, 1, released[id], "%s: fenced and released once", id)
			}
		}
		assert.Equal(t, n, nc+nf)
		checkConservation(t, db, "1", n)
		t.Logf("%d consumed, %d released", nc, nf)
	})
}

// A publish that reported an error but reached Kafka, with the outbox down
// too: the Submitter releases through the fence, and the message, when it is
// consumed, deducts nothing. Before, the unit was released and sold twice.
func TestSubmitUncertainPublishIsFenced(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 5, 1)
		clock := newClock()
		led := newLedger()
		f, err := handoff.NewFence(db, led, handoff.WithClock(clock))
		require.NoError(t, err)
		var delivered []order.Message
		pub := handoff.Publisher(func(_ context.Context, m order.Message) error {
			delivered = append(delivered, m)        // it got through…
			return errors.New("kafka: i/o timeout") // …but the reply was lost
		})
		fb := handoff.Fallback(func(context.Context, order.Message) error { return errors.New("outbox: db down") })
		s, err := handoff.NewSubmitter(pub, fb, f, handoff.WithClock(clock))
		require.NoError(t, err)
		m := msg(1, "1", "9")
		led.reserve("1", Reservation{ID: m.ReservationID, User: "9", Qty: 1, At: clock.Now()})
		_, err = s.Submit(ctx, m)
		require.ErrorIs(t, err, handoff.ErrRetry)
		require.Len(t, delivered, 1)
		assert.Equal(t, 1, led.releasedByID()[m.ReservationID])

		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		o, err := p.Handle(ctx, delivered[0])
		require.NoError(t, err)
		assert.Equal(t, order.StatusFailed, o.Status)
		assert.Equal(t, handoff.ReasonHandoff, o.Reason)
		assert.EqualValues(t, 0, countOrders(t, db, ""))
		assert.EqualValues(t, 5, dbStock(t, db, "1"))
	})
}

// Results never contradict the database: a QUEUED entry whose order
// committed (the result write lost in a crash) and a SUCCESS whose order
// was cancelled since are answered from the database, and repaired.
func TestResultsFollowTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			eachDB(t, func(t *testing.T, db *gorm.DB) {
				addActivity(t, db, "1", 10, 1)
				clock := newClock()
				prefix := testenv.Prefix(t) + string(kind) + ":"
				r, err := status.NewResults(rdb, db, status.WithKeyPrefix(prefix), status.WithClock(clock), status.WithResultTTL(time.Hour))
				require.NoError(t, err)
				p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
				require.NoError(t, err)

				m := msg(1, "1", "7")
				require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "7", Status: order.StatusQueued, ReservationID: m.ReservationID}))
				got, err := r.Reservation(ctx, status.ResultQuery{Activity: "1", User: "7", ReservationID: m.ReservationID})
				require.NoError(t, err)
				assert.Equal(t, order.StatusQueued, got.Status, "in flight: queued")

				o, err := p.Handle(ctx, m) // committed; the process dies before writing the result
				require.NoError(t, err)
				got, err = r.Get(ctx, "1", "7")
				require.NoError(t, err)
				assert.Equal(t, order.StatusSuccess, got.Status)
				assert.Equal(t, o.OrderNo, got.OrderNo)
				raw, err := rdb.HGet(ctx, prefix+"{a:1}:result:7", "status").Result()
				require.NoError(t, err)
				assert.Equal(t, string(order.StatusSuccess), raw, "the stale entry was repaired")

				require.NoError(t, db.Exec("UPDATE seckill_order SET status = ?, live_slot = NULL WHERE order_no = ?", order.OrderCancelled, o.OrderNo).Error)
				got, err = r.Reservation(ctx, status.ResultQuery{Activity: "1", User: "7", ReservationID: m.ReservationID})
				require.NoError(t, err)
				assert.Equal(t, order.StatusFailed, got.Status)
				assert.Equal(t, status.ReasonCancelled, got.Reason)

				// a released reservation reads FAILED with its reason
				led := newLedger()
				f, err := handoff.NewFence(db, led, handoff.WithClock(clock))
				require.NoError(t, err)
				m2 := msg(2, "1", "8")
				require.NoError(t, r.Set(ctx, order.Result{Activity: "1", User: "8", Status: order.StatusQueued, ReservationID: m2.ReservationID}))
				require.NoError(t, f.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", User: "8", ReservationID: m2.ReservationID}))
				got, err = r.Get(ctx, "1", "8")
				require.NoError(t, err)
				assert.Equal(t, order.StatusFailed, got.Status)
				assert.Equal(t, handoff.ReasonReleased, got.Reason)

				unknown, err := r.Reservation(ctx, status.ResultQuery{Activity: "1", User: "8", ReservationID: "r-nobody"})
				require.NoError(t, err)
				assert.Equal(t, order.StatusNone, unknown.Status)
				// another buyer's reservation tells this one nothing
				other, err := r.Reservation(ctx, status.ResultQuery{Activity: "1", User: "8", ReservationID: m.ReservationID})
				require.NoError(t, err)
				assert.Equal(t, order.StatusNone, other.Status)
				assert.Empty(t, other.OrderNo)
			})
		})
	}
}
