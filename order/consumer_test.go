package order

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

type dlqSink struct {
	mu   sync.Mutex
	msgs []Record
	errs []error
}

func (d *dlqSink) DeadLetter(_ context.Context, m Record, cause error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.msgs = append(d.msgs, m)
	d.errs = append(d.errs, cause)
	return nil
}

func (d *dlqSink) count() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.msgs) }

type notes struct {
	mu  sync.Mutex
	got []Result
}

func (n *notes) Notify(_ context.Context, r Result) {
	n.mu.Lock()
	n.got = append(n.got, r)
	n.mu.Unlock()
}
func (n *notes) count() int { n.mu.Lock(); defer n.mu.Unlock(); return len(n.got) }

// downSwitch is the health check of a database that is down while on.
type downSwitch struct {
	on    atomic.Bool
	fails atomic.Int64
}

func (d *downSwitch) health(context.Context) error {
	if d.on.Load() {
		return errors.New("injected: ping failed")
	}
	return nil
}

// poisonTrigger makes every message_dedup INSERT for reservation resv fail,
// on SQLite, MySQL/MariaDB and PostgreSQL.
func poisonTrigger(t *testing.T, db *gorm.DB, resv string) {
	t.Helper()
	var qs []string
	switch db.Dialector.Name() {
	case "sqlite":
		qs = []string{"CREATE TRIGGER poison BEFORE INSERT ON message_dedup WHEN NEW.reservation_id = '" + resv +
			"' BEGIN SELECT RAISE(ABORT, 'injected poison'); END"}
	case "postgres":
		qs = []string{"CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.reservation_id = '" + resv +
			"' THEN RAISE EXCEPTION 'injected poison'; END IF; RETURN NEW; END $$",
			"CREATE TRIGGER poison BEFORE INSERT ON message_dedup FOR EACH ROW EXECUTE FUNCTION poison()"}
	default:
		qs = []string{"CREATE TRIGGER poison BEFORE INSERT ON message_dedup FOR EACH ROW BEGIN IF NEW.reservation_id = '" + resv +
			"' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected poison'; END IF; END"}
	}
	for _, q := range qs {
		require.NoError(t, db.Exec(q).Error)
	}
}

func TestConsumeClaimBatchAndEffects(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 5, 1)
		led := newLedger()
		var kms []Record
		for i := 0; i < 8; i++ {
			m := msg(i, "1", num(100+i))
			led.reserve("1", Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1})
			kms = append(kms, kmsg(t, int64(i), m))
		}
		kms = append(kms, kmsg(t, 8, msg(2, "1", "102"))) // redelivery
		sched := map[string]time.Time{}
		var smu sync.Mutex
		n := &notes{}
		results := &memResults{}
		c, err := NewConsumer(newProc(t, db), led, WithBatchSize(4), WithNotifier(n), WithResults(results),
			WithScheduler(schedulerFunc(func(_ context.Context, no string, at time.Time) error {
				smu.Lock()
				sched[no] = at
				smu.Unlock()
				return nil
			})))
		require.NoError(t, err)
		sess := &fakeSession{ctx: context.Background()}
		require.NoError(t, runClaim(t, c, sess, kms))

		assert.EqualValues(t, 8, sess.lastMarked())
		orders := countOrders(t, db, "")
		assert.EqualValues(t, 5, orders)
		assert.Equal(t, 3, led.releases(), "sold-out reservations released")
		// orders = accepted − releases
		assert.EqualValues(t, 8-led.releases(), orders)
		checkConservation(t, db, "1", 5)
		assert.Len(t, sched, 5, "one cancellation scheduled per new order")
		assert.Equal(t, 9, n.count(), "every delivery notified (at least once)")
		succ, failed := 0, 0
		for i := 0; i < 8; i++ {
			r := results.get("1", num(100+i))
			switch r.Status {
			case StatusSuccess:
				succ++
				assert.NotEmpty(t, r.OrderNo)
			case StatusFailed:
				failed++
				assert.Equal(t, ReasonSoldOut, r.Reason)
			}
		}
		assert.Equal(t, 5, succ)
		assert.Equal(t, 3, failed)
		st := c.stats()
		assert.EqualValues(t, 9, st.BatchMessages+st.OneByOne)
	})
}

func TestConsumeClaimPoison(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 10, 1)
		led := newLedger()
		kms := []Record{
			kmsg(t, 0, msg(0, "1", "100")),
			{Topic: "orders", Offset: 1, Value: []byte("{garbage")},
			kmsg(t, 2, msg(2, "1", "102")),
		}

		t.Run("dead-lettered", func(t *testing.T) {
			dlq := &dlqSink{}
			c, err := NewConsumer(newProc(t, db), led, WithDeadLetter(dlq))
			require.NoError(t, err)
			sess := &fakeSession{ctx: context.Background()}
			require.NoError(t, runClaim(t, c, sess, kms))
			assert.Equal(t, 1, dlq.count())
			assert.True(t, isPermanent(dlq.errs[0]))
			assert.EqualValues(t, 2, sess.lastMarked())
			assert.EqualValues(t, 2, countOrders(t, db, ""))
		})

		t.Run("no sink stops the claim", func(t *testing.T) {
			c, err := NewConsumer(newProc(t, db), led)
			require.NoError(t, err)
			sess := &fakeSession{ctx: context.Background()}
			err = runClaim(t, c, sess, kms)
			require.ErrorIs(t, err, ErrNoDeadLetter)
			assert.EqualValues(t, -1, sess.lastMarked(), "nothing marked past the poison")
		})
	})
}

func TestConsumeClaimPoisonAfterAttempts(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 10, 1)
		// Rows of reservation "r-1" always fail (a trigger) although the DB is healthy.
		poisonTrigger(t, db, "r-1")
		dlq := &dlqSink{}
		var errs atomic.Int64
		c, err := NewConsumer(newProc(t, db), newLedger(), WithDeadLetter(dlq), WithMaxAttempts(3),
			WithBackoff(time.Millisecond, 2*time.Millisecond), WithOnError(func(context.Context, error) { errs.Add(1) }))
		require.NoError(t, err)
		sess := &fakeSession{ctx: context.Background()}
		require.NoError(t, runClaim(t, c, sess, []Record{kmsg(t, 0, msg(0, "1", "100")), kmsg(t, 1, msg(1, "1", "101")), kmsg(t, 2, msg(2, "1", "102"))}))
		require.Equal(t, 1, dlq.count())
		assert.EqualValues(t, 1, dlq.msgs[0].Offset)
		assert.True(t, isPermanent(dlq.errs[0]))
		assert.EqualValues(t, 2, countOrders(t, db, ""), "neighbours of the poison message committed")
		assert.EqualValues(t, 2, sess.lastMarked())
		assert.EqualValues(t, 1+3, errs.Load(), "one batch failure + three attempts")
		checkConservation(t, db, "1", 10)
	})
}

func TestConsumeClaimDBDownMidBatch(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 100, 1)
		var down downSwitch
		// The order table is gone: the dedup rows of the transaction are written,
		// then the order INSERT fails and everything must roll back.
		require.NoError(t, db.Migrator().DropTable(&Order{}))
		down.on.Store(true)
		led := newLedger()
		var kms []Record
		for i := 0; i < 20; i++ {
			m := msg(i, "1", num(100+i))
			led.reserve("1", Reservation{ID: m.ReservationID})
			kms = append(kms, kmsg(t, int64(i), m))
		}
		dlq := &dlqSink{}
		c, err := NewConsumer(newProc(t, db), led, WithBatchSize(20), WithDeadLetter(dlq), WithMaxAttempts(2),
			WithBackoff(time.Millisecond, 5*time.Millisecond), WithHealthCheck(down.health),
			WithOnError(func(context.Context, error) { down.fails.Add(1) }))
		require.NoError(t, err)
		sess := &fakeSession{ctx: context.Background()}
		done := make(chan error, 1)
		go func() { done <- runClaim(t, c, sess, kms) }()

		eventually(t, 10*time.Second, func() bool { return down.fails.Load() >= 5 }, "retries while down")
		// While down: nothing committed, nothing marked, stock untouched.
		assert.EqualValues(t, -1, sess.lastMarked())
		var dd int64
		require.NoError(t, db.Model(&Dedup{}).Count(&dd).Error)
		assert.EqualValues(t, 0, dd)
		assert.EqualValues(t, 100, dbStock(t, db, "1"))

		require.NoError(t, AutoMigrate(context.Background(), db)) // the DB is back
		down.on.Store(false)
		require.NoError(t, <-done)
		assert.EqualValues(t, 19, sess.lastMarked())
		assert.EqualValues(t, 20, countOrders(t, db, ""), "no loss")
		assert.Equal(t, 0, dlq.count(), "DB down is not poison")
		assert.Equal(t, 0, led.releases())
		checkConservation(t, db, "1", 100)
	})
}

func TestConsumerReleaseFailureLeftToReconciler(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 0, 1) // sold out in the DB
		led := newLedger()
		led.reserve("1", Reservation{ID: "r-0"})
		led.setFail(errors.New("redis down"))
		var errs atomic.Int64
		c, err := NewConsumer(newProc(t, db), led, WithReleaseAttempts(2),
			WithBackoff(time.Millisecond, time.Millisecond), WithOnError(func(context.Context, error) { errs.Add(1) }))
		require.NoError(t, err)
		sess := &fakeSession{ctx: context.Background()}
		require.NoError(t, runClaim(t, c, sess, []Record{kmsg(t, 0, msg(0, "1", "100"))}))
		assert.EqualValues(t, 0, sess.lastMarked())
		assert.EqualValues(t, 1, errs.Load())
		led.mu.Lock()
		assert.Equal(t, 2, led.calls)
		led.mu.Unlock()
		// redelivery re-issues the release (the dedup row says FAILED)
		led.setFail(nil)
		require.NoError(t, runClaim(t, c, sess, []Record{kmsg(t, 0, msg(0, "1", "100"))}))
		assert.Equal(t, 1, led.releases())
	})
}

func TestNewConsumerValidates(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		p := newProc(t, db)
		_, err := NewConsumer(nil, newLedger())
		assert.Error(t, err)
		_, err = NewConsumer(p, nil)
		assert.Error(t, err)
		_, err = NewConsumer(p, newLedger(), WithBatchSize(0))
		assert.Error(t, err)
		_, err = NewProcessor(nil, newGen(t, 1))
		assert.Error(t, err)
	})
}

// memResults is a [ResultWriter] in memory (status.Results in production).
type memResults struct {
	mu sync.Mutex
	m  map[[2]string]Result
}

func (r *memResults) SetMany(_ context.Context, rs []Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[[2]string]Result{}
	}
	for _, x := range rs {
		r.m[[2]string{x.Activity, x.User}] = x
	}
	return nil
}

func (r *memResults) get(activity, user string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[[2]string{activity, user}]
}

// schedulerFunc adapts a function to [Scheduler].
type schedulerFunc func(ctx context.Context, orderNo string, at time.Time) error

func (f schedulerFunc) Schedule(ctx context.Context, orderNo string, at time.Time) error {
	return f(ctx, orderNo, at)
}

// consumerStats are the consumer's counters, read by the tests.
type consumerStats struct{ BatchMessages, OneByOne int64 }

func (c *Consumer) stats() consumerStats {
	return consumerStats{BatchMessages: c.batchMsgs.Load(), OneByOne: c.oneByOne.Load()}
}
