package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/lifecycle"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/reconcile"
)

type cancelFixture struct {
	db    *gorm.DB
	led   *ledger
	clock *fixedClock
	proc  *order.Processor
	c     *Canceller
	rdb   redis.UniversalClient
	key   string // the delay queue
	nos   []string
}

// newCancelFixture writes n orders (users 100..) on activity 1 with stock.
func newCancelFixture(t *testing.T, db *gorm.DB, stock int64, n int, opts ...CancellerOption) *cancelFixture {
	t.Helper()
	f := &cancelFixture{db: db, led: newLedger(), clock: newClock()}
	addActivity(t, f.db, "1", stock, 1)
	var err error
	f.proc, err = order.NewProcessor(f.db, newGen(t, 1), order.WithClock(f.clock))
	require.NoError(t, err)
	f.rdb = testenv.Redis(t)
	prefix := testenv.Prefix(t)
	f.key = cancelQueueKey(prefix)
	opts = append([]CancellerOption{WithClock(f.clock), WithKeyPrefix(prefix)}, opts...)
	f.c, err = NewCanceller(f.db, f.rdb, f.led, opts...)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		m := msg(i, "1", num(100+i))
		f.led.reserve("1", Reservation{ID: m.ReservationID})
		out, err := f.proc.Handle(context.Background(), m)
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)
		f.nos = append(f.nos, out.OrderNo)
	}
	return f
}

func (f *cancelFixture) status(t *testing.T, no string) order.Order {
	t.Helper()
	var o order.Order
	require.NoError(t, f.db.Where("order_no = ?", no).First(&o).Error)
	return o
}

func TestCancelAndDoubleCancel(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCancelFixture(t, db, 10, 2)
		require.NoError(t, f.c.Cancel(ctx, f.nos[0]))
		o := f.status(t, f.nos[0])
		assert.Equal(t, order.OrderCancelled, o.Status)
		assert.Nil(t, o.LiveSlot)
		assert.NotNil(t, o.CancelTime)
		assert.Equal(t, 1, f.led.releases())

		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), ErrAlreadyCancelled)
		assert.Equal(t, 1, f.led.releases(), "release is idempotent")
		assert.ErrorIs(t, f.c.Cancel(ctx, "nope"), ErrOrderNotFound)
		checkConservation(t, f.db, "1", 10)

		// cap 1: after a cancellation the user may buy again
		m := msg(50, "1", "100")
		out, err := f.proc.Handle(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, order.StatusSuccess, out.Status)
		checkConservation(t, f.db, "1", 10)
	})
}

func TestPay(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var refunds atomic.Int64
		f := newCancelFixture(t, db, 10, 3, WithOnPayCancelled(func(_ context.Context, o order.Order) {
			refunds.Add(1)
		}))
		require.NoError(t, f.c.Pay(ctx, f.nos[0]))
		assert.ErrorIs(t, f.c.Pay(ctx, f.nos[0]), ErrAlreadyPaid, "double pay")
		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), ErrAlreadyPaid)
		assert.Equal(t, order.OrderPaid, f.status(t, f.nos[0]).Status)

		require.NoError(t, f.c.Cancel(ctx, f.nos[1]))
		assert.ErrorIs(t, f.c.Pay(ctx, f.nos[1]), ErrOrderCancelled)
		assert.EqualValues(t, 1, refunds.Load())

		// payment window passed, not cancelled yet: Pay cancels and refunds
		f.clock.Add(31 * time.Minute)
		assert.ErrorIs(t, f.c.Pay(ctx, f.nos[2]), ErrOrderCancelled)
		assert.Equal(t, order.OrderCancelled, f.status(t, f.nos[2]).Status)
		assert.EqualValues(t, 2, refunds.Load())
		assert.ErrorIs(t, f.c.Pay(ctx, "nope"), ErrOrderNotFound)

		assert.Equal(t, 2, f.led.releases())
		checkConservation(t, f.db, "1", 10)
	})
}

func TestCancelRacingPay(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		const n = 40
		var refunds atomic.Int64
		f := newCancelFixture(t, db, 100, n, WithOnPayCancelled(func(context.Context, order.Order) { refunds.Add(1) }))
		var paid, cancelled, payLost, cancelLost, payRefused atomic.Int64
		var wg sync.WaitGroup
		for _, no := range f.nos {
			wg.Add(4)
			for k := 0; k < 2; k++ { // double pay and double cancel, concurrently
				go func() {
					defer wg.Done()
					switch err := f.c.Pay(ctx, no); {
					case err == nil:
						paid.Add(1)
					case errors.Is(err, ErrOrderCancelled):
						payRefused.Add(1)
						payLost.Add(1)
					case errors.Is(err, ErrAlreadyPaid):
						payLost.Add(1)
					default:
						t.Error(err)
					}
				}()
				go func() {
					defer wg.Done()
					switch err := f.c.Cancel(ctx, no); {
					case err == nil:
						cancelled.Add(1)
					case errors.Is(err, ErrAlreadyPaid), errors.Is(err, ErrAlreadyCancelled):
						cancelLost.Add(1)
					default:
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		assert.EqualValues(t, n, paid.Load()+cancelled.Load(), "exactly one winner per order")
		assert.EqualValues(t, 3*n, payLost.Load()+cancelLost.Load())
		var dbPaid, dbCancelled int64
		require.NoError(t, f.db.Model(&order.Order{}).Where("status = ?", order.OrderPaid).Count(&dbPaid).Error)
		require.NoError(t, f.db.Model(&order.Order{}).Where("status = ?", order.OrderCancelled).Count(&dbCancelled).Error)
		assert.Equal(t, paid.Load(), dbPaid)
		assert.Equal(t, cancelled.Load(), dbCancelled)
		assert.EqualValues(t, cancelled.Load(), f.led.releases(), "one release per cancellation")
		// every payment that lost to a cancellation was refunded
		assert.LessOrEqual(t, refunds.Load(), payLost.Load())
		assert.Equal(t, payRefused.Load(), refunds.Load(), "one refund per payment refused as cancelled")
		// orders = accepted − releases; DB stock + live orders = initial
		assert.EqualValues(t, n-f.led.releases(), countOrders(t, f.db, "status <> ?", order.OrderCancelled))
		checkConservation(t, f.db, "1", 100)
	})
}

func TestDelayQueueAndScanBackstop(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCancelFixture(t, db, 10, 4)
		// orders 0..2 scheduled, order 3 not (its schedule was "lost")
		for _, no := range f.nos[:3] {
			o := f.status(t, no)
			require.NoError(t, f.c.Schedule(ctx, no, o.ExpireTime))
		}
		require.NoError(t, f.c.Pay(ctx, f.nos[1]))

		n, err := f.c.CancelDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "nothing due yet")

		f.clock.Add(30*time.Minute + time.Second)
		n, err = f.c.CancelDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n, "0 and 2 cancelled; 1 is paid")
		n, err = f.c.CancelDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "entries claimed once")

		n, err = f.c.ScanExpired(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the unscheduled order is found by the scan")
		assert.Equal(t, order.OrderCancelled, f.status(t, f.nos[3]).Status)
		assert.Equal(t, 3, f.led.releases())
		checkConservation(t, f.db, "1", 10)
	})
}

func TestCancelReleaseFailureRetried(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCancelFixture(t, db, 10, 1, WithBackoff(time.Millisecond, time.Second))
		require.NoError(t, f.c.Schedule(ctx, f.nos[0], f.status(t, f.nos[0]).ExpireTime))
		f.clock.Add(31 * time.Minute)
		f.led.setFail(errors.New("redis down"))
		n, err := f.c.CancelDue(ctx)
		assert.ErrorIs(t, err, ErrReleasePending)
		assert.Equal(t, 1, n)
		assert.Equal(t, order.OrderCancelled, f.status(t, f.nos[0]).Status)
		checkConservation(t, f.db, "1", 10)

		f.led.setFail(nil)
		f.clock.Add(time.Second)
		n, err = f.c.CancelDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "already cancelled; only the release was re-issued")
		assert.Equal(t, 1, f.led.releases())
	})
}

func TestCancellerRunClose(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newCancelFixture(t, db, 10, 3, WithPollInterval(5*time.Millisecond), WithScanInterval(5*time.Millisecond))
		done := make(chan error, 1)
		go func() { done <- f.c.Run(context.Background()) }()
		f.clock.Add(time.Hour)
		eventually(t, 10*time.Second, func() bool { return f.led.releases() == 3 }, "background cancellation")
		// A second Run while the first runs: the shared "already running".
		assert.ErrorIs(t, f.c.Run(context.Background()), lifecycle.ErrRunning)
		require.NoError(t, f.c.Close())
		require.NoError(t, <-done)
		assert.ErrorIs(t, f.c.Run(context.Background()), ErrClosed)
		assert.ErrorIs(t, f.c.Run(context.Background()), lifecycle.ErrClosed, "the sentinel every package shares")
		require.NoError(t, f.c.Close())
		checkConservation(t, f.db, "1", 10)
	})
}

func TestConsumerSchedulesOnCanceller(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		f := newCancelFixture(t, db, 10, 0)
		var kms []order.Record
		for i := 0; i < 3; i++ {
			kms = append(kms, kmsg(t, int64(i), msg(i, "1", num(200+i))))
		}
		c, err := order.NewConsumer(f.proc, f.led, order.WithScheduler(f.c))
		require.NoError(t, err)
		require.NoError(t, runClaim(t, c, &fakeSession{ctx: context.Background()}, kms))
		f.clock.Add(31 * time.Minute)
		n, err := f.c.CancelDue(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 3, n, fmt.Sprint("scheduled by the consumer"))
		checkConservation(t, f.db, "1", 10)
	})
}

// A delay-queue entry scored before the order's expire_time (a skewed or
// buggy node scheduled it) must not cancel the order: the DB row's
// expire_time is the truth. The entry is moved to the real expiry, and the
// order is cancelled only then.
func TestCancelDueTrustsDBExpiry(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCancelFixture(t, db, 10, 2)
		expire := f.status(t, f.nos[0]).ExpireTime
		require.True(t, expire.After(f.clock.Now().Add(29*time.Minute)))
		early := f.clock.Now().Add(-time.Minute)
		for _, no := range f.nos {
			require.NoError(t, f.c.Schedule(ctx, no, early))
		}
		require.NoError(t, f.c.Pay(ctx, f.nos[1]))

		n, err := f.c.CancelDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "nothing is due by the DB")
		assert.Equal(t, order.OrderCreated, f.status(t, f.nos[0]).Status, "unexpired order left alone")
		assert.Equal(t, order.OrderPaid, f.status(t, f.nos[1]).Status)
		assert.Equal(t, 0, f.led.releases())
		score, err := f.rdb.ZScore(ctx, f.key, f.nos[0]).Result()
		require.NoError(t, err, "the entry is rescheduled, not dropped")
		assert.EqualValues(t, expire.UnixMilli(), score, "rescheduled at the DB expire_time")
		assert.ErrorIs(t, f.rdb.ZScore(ctx, f.key, f.nos[1]).Err(), redis.Nil, "a paid order's entry is dropped")
		checkConservation(t, f.db, "1", 10)

		// the scan backstop does not cancel it early either
		n, err = f.c.ScanExpired(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n)

		f.clock.Add(30*time.Minute + time.Second)
		n, err = f.c.CancelDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "cancelled at its real expiry")
		assert.Equal(t, order.OrderCancelled, f.status(t, f.nos[0]).Status)
		assert.Equal(t, 1, f.led.releases())
		checkConservation(t, f.db, "1", 10)
	})
}

// Pay on an expired, unscheduled order cancels it; when the Redis release
// fails the order is still CANCELLED with the DB stock restored once, the
// error says so, and the delay queue retries the release exactly once.
func TestPayExpiredReleaseFails(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var refunds atomic.Int64
		f := newCancelFixture(t, db, 10, 2, WithOnPayCancelled(func(context.Context, order.Order) { refunds.Add(1) }))
		f.clock.Add(31 * time.Minute)
		f.led.setFail(errors.New("redis down"))

		err := f.c.Pay(ctx, f.nos[0])
		assert.ErrorIs(t, err, ErrOrderCancelled, "the payment must be refunded")
		assert.ErrorIs(t, err, ErrReleasePending, "the failed release is not swallowed")
		assert.EqualValues(t, 1, refunds.Load())
		assert.Equal(t, order.OrderCancelled, f.status(t, f.nos[0]).Status)
		assert.Equal(t, 0, f.led.releases())
		checkConservation(t, f.db, "1", 10)
		_, err = f.rdb.ZScore(ctx, f.key, f.nos[0]).Result()
		require.NoError(t, err, "put on the delay queue to retry the release")

		// a retry while Redis is still down restores nothing twice
		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), ErrAlreadyCancelled)
		checkConservation(t, f.db, "1", 10)

		f.led.setFail(nil)
		f.clock.Add(time.Minute)
		n, err := f.c.CancelDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "already cancelled: only the release is re-issued")
		assert.Equal(t, 1, f.led.releases())
		n, err = f.c.ScanExpired(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the other expired order; the first is not cancelled twice")
		assert.Equal(t, 2, f.led.releases())
		checkConservation(t, f.db, "1", 10)

		rec, err := reconcile.NewReconciler(f.db, f.led.Reservations, f.led, reconcile.WithClock(f.clock))
		require.NoError(t, err)
		rep, err := rec.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Empty(t, rep.Released, "nothing left to release")
		assert.Equal(t, 2, f.led.releases())
		assert.Equal(t, map[string]int{"r-0": 1, "r-1": 1}, f.led.releasedByID())
	})
}

// Without a delay queue the Reconciler releases the reservation that Pay's
// cancellation could not, exactly once.
func TestPayExpiredReleaseLeftToReconciler(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		led, clock := newLedger(), newClock()
		addActivity(t, db, "1", 10, 1)
		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		m := msg(0, "1", "100")
		led.reserve("1", Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1, At: clock.Now()})
		out, err := p.Handle(ctx, m)
		require.NoError(t, err)
		c, err := NewCanceller(db, nil, led, WithClock(clock))
		require.NoError(t, err)

		clock.Add(31 * time.Minute)
		led.setFail(errors.New("redis down"))
		err = c.Pay(ctx, out.OrderNo)
		assert.ErrorIs(t, err, ErrOrderCancelled)
		assert.ErrorIs(t, err, ErrReleasePending)
		checkConservation(t, db, "1", 10)
		assert.Equal(t, 0, led.releases())

		led.setFail(nil)
		rec, err := reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithClock(clock))
		require.NoError(t, err)
		for i := 0; i < 2; i++ {
			rep, err := rec.Reconcile(ctx, "1")
			require.NoError(t, err)
			if i == 0 {
				assert.Equal(t, []string{m.ReservationID}, rep.Released)
			} else {
				assert.Empty(t, rep.Released, "released once")
			}
			assert.True(t, rep.Conserved)
		}
		assert.Equal(t, 1, led.releases())
		checkConservation(t, db, "1", 10)
	})
}
