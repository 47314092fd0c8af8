package outbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/lifecycle"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// recorder is a Publisher that records deliveries and can fail on demand.
type recorder struct {
	mu    sync.Mutex
	got   map[string]int // msg_id -> deliveries
	order []Message
	fail  func(m Message) (deliver bool, err error)
	calls atomic.Int64
}

func newRecorder() *recorder { return &recorder{got: map[string]int{}} }

func (r *recorder) Publish(ctx context.Context, m Message) error {
	r.calls.Add(1)
	deliver, err := true, error(nil)
	if r.fail != nil {
		deliver, err = r.fail(m)
	}
	if deliver {
		r.mu.Lock()
		r.got[m.MsgID]++
		r.order = append(r.order, m)
		r.mu.Unlock()
	}
	return err
}

func (r *recorder) deliveries() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.got {
		distinct++
		total += n
	}
	return
}

func writeN(t testing.TB, db *gorm.DB, w *Writer, n int, topic string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	msgs := make([]Message, 0, 100)
	flush := func() {
		require.NoError(t, db.Transaction(func(tx *gorm.DB) error { return w.Write(context.Background(), tx, msgs...) }))
		msgs = msgs[:0]
	}
	for i := range n {
		id := fmt.Sprintf("m-%05d", i)
		ids = append(ids, id)
		msgs = append(msgs, Message{MsgID: id, Topic: topic, Key: fmt.Sprintf("u%d", i%17), Payload: []byte(id)})
		if len(msgs) == cap(msgs) {
			flush()
		}
	}
	if len(msgs) > 0 {
		flush()
	}
	return ids
}

func drain(t testing.TB, r *Relay) (b Batch) {
	t.Helper()
	for range 10_000 {
		one, err := r.RunOnce(context.Background())
		require.NoError(t, err)
		if one.Claimed == 0 {
			return b
		}
		b.Claimed += one.Claimed
		b.Sent += one.Sent
		b.Retried += one.Retried
		b.Failed += one.Failed
	}
	t.Fatal("relay never drained")
	return b
}

func TestRelayDeliversAll(t *testing.T) {
	t.Parallel()
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			t.Parallel()
			eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
				clk := newFakeClock()
				w, err := NewWriter(WithClock(clk))
				require.NoError(t, err)
				ids := writeN(t, db, w, 150, "orders")

				rec := newRecorder()
				var sentHook atomic.Int64
				r, err := NewRelay(db, rec, WithClock(clk), WithBatchSize(40), WithPublishConcurrency(conc),
					WithOnSent(func(_ context.Context, m Message) {
						sentHook.Add(1)
						assert.Equal(t, StatusSent, m.Status)
					}))
				require.NoError(t, err)
				b := drain(t, r)
				assert.Equal(t, Batch{Claimed: 150, Sent: 150}, b)
				assert.EqualValues(t, 150, sentHook.Load())

				distinct, total := rec.deliveries()
				assert.Equal(t, 150, distinct)
				assert.Equal(t, 150, total)
				for _, id := range ids {
					assert.Equal(t, 1, rec.got[id], id)
				}
				// Per key, table order is kept (within and across batches here).
				last := map[string]string{}
				for _, m := range rec.order {
					assert.Equal(t, 1, m.Attempts)
					assert.Greater(t, m.MsgID, last[m.Key], "key %s out of order", m.Key)
					last[m.Key] = m.MsgID
				}
				for _, row := range allRows(t, db) {
					assert.Equal(t, StatusSent, row.Status)
					require.NotNil(t, row.SentAt)
					assert.True(t, row.SentAt.Equal(clk.Now()))
					assert.True(t, strings.HasPrefix(row.LeaseOwner, r.id+"-"), "token of the marking batch: %q", row.LeaseOwner)
				}
				bl, err := r.backlog(context.Background())
				require.NoError(t, err)
				assert.Equal(t, Backlog{}, bl)
			})
		})
	}
}

func TestRelayBackoffThenFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))
		require.NoError(t, w.Write(ctx, db, Message{Topic: "orders", Key: "u1", MsgID: "x"}))

		rec := newRecorder()
		rec.fail = func(Message) (bool, error) { return false, errors.New("broker down") }
		type retry struct {
			attempts int
			next     time.Time
		}
		var retries []retry
		var failed []Message
		r, err := NewRelay(db, rec, WithClock(clk), WithJitter(0), WithBackoff(time.Second, 5*time.Second),
			WithMaxAttempts(5),
			WithOnRetry(func(_ context.Context, m Message, err error, next time.Time) {
				assert.EqualError(t, err, "broker down")
				retries = append(retries, retry{m.Attempts, next})
			}),
			WithOnFailed(func(_ context.Context, m Message, err error) { failed = append(failed, m) }))
		require.NoError(t, err)

		// Expected delays after attempts 1..4: 1s, 2s, 4s, 5s (capped).
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second} {
			b, err := r.RunOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, Batch{Claimed: 1, Retried: 1}, b, "attempt %d", i+1)
			require.Len(t, retries, i+1)
			assert.Equal(t, i+1, retries[i].attempts)
			assert.True(t, retries[i].next.Equal(clk.Now().Add(want)), "attempt %d next %v", i+1, retries[i].next)
			row := allRows(t, db)[0]
			assert.Equal(t, "broker down", row.LastError)
			assert.True(t, row.NextAttemptAt.Equal(clk.Now().Add(want)))

			// Not due a microsecond early.
			clk.Advance(want - time.Microsecond)
			b, err = r.RunOnce(ctx)
			require.NoError(t, err)
			require.Zero(t, b.Claimed, "claimed early after attempt %d", i+1)
			clk.Advance(time.Microsecond)
		}
		b, err := r.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 1, Failed: 1}, b)
		require.Len(t, failed, 1)
		assert.Equal(t, 5, failed[0].Attempts)
		assert.Equal(t, StatusFailed, failed[0].Status)
		assert.EqualValues(t, 5, rec.calls.Load())

		clk.Advance(time.Hour)
		b, err = r.RunOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, b.Claimed, "FAILED rows are never claimed")
		bl, err := Stats(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, Backlog{Failed: 1}, bl)

		// Requeue gives a fresh budget; a healthy broker then delivers it.
		rec.fail = nil
		n, err := r.Requeue(ctx, failed[0].ID, 12345)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		b, err = r.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 1, Sent: 1}, b)
		assert.Equal(t, 1, rec.got["x"])
	})
}

func TestRelayBackoffJitter(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		r, err := NewRelay(db, newRecorder(), WithBackoff(100*time.Millisecond, time.Minute), WithJitter(0.5))
		require.NoError(t, err)
		seen := map[time.Duration]bool{}
		for attempt := 1; attempt <= 12; attempt++ {
			full := min(100*time.Millisecond<<(attempt-1), time.Minute)
			for range 50 {
				d := r.backoff(attempt)
				require.GreaterOrEqual(t, d, full/2, "attempt %d", attempt)
				require.LessOrEqual(t, d, full, "attempt %d", attempt)
				seen[d] = true
			}
		}
		assert.Greater(t, len(seen), 100, "jitter spreads delays")
		// No overflow for absurd attempt counts.
		assert.LessOrEqual(t, r.backoff(1_000_000), time.Minute)
		assert.Greater(t, r.backoff(1_000_000), time.Duration(0))
	})
}

// A relay that stalls past its lease (or crashes) loses its rows to
// another relay: the row is delivered twice (documented duplicate), never
// lost, and the stale relay's late outcome cannot undo the other's.
func TestRelayLeaseExpiryHandsOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))
		writeN(t, db, w, 3, "orders")

		recA, recB := newRecorder(), newRecorder()
		a, err := NewRelay(db, recA, WithClock(clk), WithLease(10*time.Second))
		require.NoError(t, err)
		b, err := NewRelay(db, recB, WithClock(clk), WithLease(10*time.Second))
		require.NoError(t, err)

		// A claims and stalls (we hold its batch instead of publishing).
		tokenA := "stalled-A"
		msgs, err := a.claim(ctx, dbTime(clk.Now()), tokenA)
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		for _, m := range msgs {
			assert.Equal(t, tokenA, m.LeaseOwner)
			assert.Equal(t, 1, m.Attempts)
		}

		// B sees nothing while the lease holds.
		clk.Advance(10*time.Second - time.Microsecond)
		got, err := b.RunOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, got.Claimed)

		// Lease over: B takes the rows and delivers them.
		clk.Advance(time.Microsecond)
		got, err = b.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 3, Sent: 3}, got)

		// Had A been stopped instead, its release must not touch B's rows
		// (nor give back an attempt): they count as lost, not released.
		stopped, stop := context.WithCancel(ctx)
		stop()
		canceled := []error{context.Canceled, context.Canceled, context.Canceled}
		res, err := a.settle(stopped, msgs, canceled, tokenA)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 3, LeaseLost: 3}, res)
		for _, row := range allRows(t, db) {
			assert.Equal(t, StatusSent, row.Status)
			assert.Equal(t, 2, row.Attempts)
		}

		// A wakes up: its first message failed, the others went out (so
		// they were delivered twice). Its failure must not reopen a SENT row,
		// and it must not count (or report) B's marks as its own.
		errs := []error{errors.New("late failure"), nil, nil}
		var retried, sent atomic.Int64
		a.o.onRetry = func(context.Context, Message, error, time.Time) { retried.Add(1) }
		a.o.onSent = func(context.Context, Message) { sent.Add(1) }
		res, err = a.settle(ctx, msgs, errs, tokenA)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 3, LeaseLost: 3}, res)
		assert.Zero(t, retried.Load())
		assert.Zero(t, sent.Load())
		for _, row := range allRows(t, db) {
			assert.Equal(t, StatusSent, row.Status)
			assert.Equal(t, 2, row.Attempts)
		}
	})
}

// Two relays over one table with a publisher that sometimes fails cleanly
// and sometimes fails after delivering (the broker stored the message but
// the ack was lost): every row is delivered, none is lost, and the
// duplicates are exactly the ambiguous failures, because leases keep two
// relays off the same row.
func TestTwoRelaysSometimesFailingPublisher(t *testing.T) {
	t.Parallel()
	type setup struct {
		name string
		kind testenv.DBKind
		dbs  func(t *testing.T) (*gorm.DB, *gorm.DB)
	}
	var setups []setup
	for _, kind := range dbKinds() {
		setups = append(setups, setup{string(kind) + "/shared-pool", kind, func(t *testing.T) (*gorm.DB, *gorm.DB) {
			db := migratedDB(t, kind)
			return db, db
		}})
	}
	setups = append(setups, setup{"sqlite/two-connections", testenv.KindSQLite, func(t *testing.T) (*gorm.DB, *gorm.DB) {
		path := filepath.Join(t.TempDir(), "two.db")
		open := func() *gorm.DB {
			db, err := testenv.OpenSQLite(path)
			require.NoError(t, err)
			t.Cleanup(func() {
				if s, err := db.DB(); err == nil {
					_ = s.Close()
				}
			})
			return db
		}
		a, b := open(), open()
		require.NoError(t, AutoMigrate(context.Background(), a))
		return a, b
	}})
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			n := 400
			if s.kind == testenv.KindSQLite {
				n = 150 // pure-Go SQLite is ~20x slower under -race
			}
			dbA, dbB := s.dbs(t)
			w, _ := NewWriter()
			ids := writeN(t, dbA, w, n, "orders")

			var clean, ambiguous atomic.Int64
			rec := newRecorder()
			var seq atomic.Int64
			rec.fail = func(m Message) (bool, error) {
				switch seq.Add(1) % 7 {
				case 3:
					clean.Add(1)
					return false, errors.New("produce timeout, not stored")
				case 5:
					ambiguous.Add(1)
					return true, errors.New("produce timeout after broker stored it")
				}
				return true, nil
			}
			var claimedA, claimedB atomic.Int64
			opts := func(c *atomic.Int64) []RelayOption {
				return []RelayOption{
					WithBatchSize(10), WithPollInterval(2 * time.Millisecond),
					WithBackoff(time.Millisecond, 4*time.Millisecond), WithMaxAttempts(1000),
					WithOnSent(func(context.Context, Message) { c.Add(1) }),
				}
			}
			// Both relays take part whatever the machine's speed: each
			// relay's first publish waits until the other has claimed a
			// batch and reached its own first publish (a relay holds its
			// claimed batch meanwhile, so the other claims different rows).
			// A one-sided gate was not enough: on a loaded machine relay B
			// sent all the rows in 50 ms before relay A's goroutine claimed
			// any, and A never reached the gate.
			pubA := meetFirst(rec)
			pubB := meetFirst(rec)
			pubA.other, pubB.other = pubB.reached, pubA.reached
			ra, err := NewRelay(dbA, pubA, opts(&claimedA)...)
			require.NoError(t, err)
			rb, err := NewRelay(dbB, pubB, opts(&claimedB)...)
			require.NoError(t, err)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			for _, r := range []*Relay{ra, rb} {
				wg.Go(func() { assert.ErrorIs(t, r.Run(ctx), context.Canceled) })
			}
			require.Eventually(t, func() bool { return countStatus(t, dbA, StatusSent) == int64(n) }, 30*time.Second, 5*time.Millisecond)
			cancel()
			wg.Wait()

			distinct, total := rec.deliveries()
			assert.Equal(t, n, distinct, "every row delivered")
			for _, id := range ids {
				assert.GreaterOrEqual(t, rec.got[id], 1, id)
			}
			dups := total - distinct
			t.Logf("%s (%s): %d rows, %d publishes, %d clean failures, %d ambiguous, %d duplicates; marked by A %d, B %d",
				s.name, s.kind, n, rec.calls.Load(), clean.Load(), ambiguous.Load(), dups,
				claimedA.Load(), claimedB.Load())
			assert.EqualValues(t, ambiguous.Load(), dups, "duplicates come only from ambiguous publishes")
			assert.Positive(t, claimedA.Load(), "relay A took part")
			assert.Positive(t, claimedB.Load(), "relay B took part")
			assert.EqualValues(t, n, claimedA.Load()+claimedB.Load(), "each row marked SENT once")
			assert.EqualValues(t, 0, countStatus(t, dbA, StatusPending))
		})
	}
}

// rendezvousPublisher publishes through rec, but its first Publish waits
// until the other relay's publisher has been called once too.
type rendezvousPublisher struct {
	rec     *recorder
	once    sync.Once
	reached chan struct{} // closed at this publisher's first call
	other   chan struct{} // the other publisher's reached
}

func meetFirst(rec *recorder) *rendezvousPublisher {
	return &rendezvousPublisher{rec: rec, reached: make(chan struct{})}
}

func (p *rendezvousPublisher) Publish(ctx context.Context, m Message) error {
	p.once.Do(func() { close(p.reached) })
	select {
	case <-p.other:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.rec.Publish(ctx, m)
}

func TestRelayStopMidBatchReleasesRows(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))
		writeN(t, db, w, 5, "orders")

		ctx, cancel := context.WithCancel(context.Background())
		rec := newRecorder()
		var calls int
		rec.fail = func(Message) (bool, error) {
			calls++
			if calls == 2 {
				cancel() // stopped while publishing the 2nd message
				return false, context.Canceled
			}
			return true, nil
		}
		r, err := NewRelay(db, rec, WithClock(clk))
		require.NoError(t, err)
		b, err := r.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 5, Sent: 1, Released: 4}, b)
		assert.Equal(t, 2, calls, "nothing published after cancellation")

		// Released rows are due at once, with their attempt given back.
		rec.fail = nil
		b, err = r.RunOnce(context.Background())
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 4, Sent: 4}, b)
		for _, row := range allRows(t, db) {
			assert.Equal(t, StatusSent, row.Status)
			assert.Equal(t, 1, row.Attempts)
		}
	})
}

func TestRelayPublisherPanicIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t"}))
		panicky := PublisherFunc(func(context.Context, Message) error { panic("boom") })
		r, err := NewRelay(db, panicky, WithClock(clk), WithJitter(0))
		require.NoError(t, err)
		b, err := r.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 1, Retried: 1}, b)
		assert.Contains(t, allRows(t, db)[0].LastError, "panicked: boom")
	})
}

// batchRec is a BatchPublisher failing the messages it is told to.
type batchRec struct {
	recorder
	batches atomic.Int64
	failIdx map[string]bool
}

func (b *batchRec) PublishBatch(ctx context.Context, msgs []Message) []error {
	b.batches.Add(1)
	var errs []error
	for i, m := range msgs {
		if b.failIdx[m.MsgID] {
			if errs == nil {
				errs = make([]error, len(msgs))
			}
			errs[i] = errors.New("partition leader gone")
			continue
		}
		_ = b.Publish(ctx, m)
	}
	return errs
}

func TestRelayUsesBatchPublisher(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))
		writeN(t, db, w, 30, "orders")
		bp := &batchRec{recorder: *newRecorder(), failIdx: map[string]bool{"m-00003": true, "m-00017": true}}
		r, err := NewRelay(db, bp, WithClock(clk), WithBatchSize(10), WithJitter(0))
		require.NoError(t, err)
		b := drain(t, r)
		assert.Equal(t, Batch{Claimed: 30, Sent: 28, Retried: 2}, b)
		assert.EqualValues(t, 3, bp.batches.Load())
		assert.EqualValues(t, 28, countStatus(t, db, StatusSent))

		bp.failIdx = nil
		clk.Advance(time.Second)
		b = drain(t, r)
		assert.Equal(t, Batch{Claimed: 2, Sent: 2}, b)

		// A batch publisher returning the wrong number of results retries all.
		require.NoError(t, w.Write(context.Background(), db, Message{Topic: "t"}))
		bad := &badBatch{}
		r2, err := NewRelay(db, bad, WithClock(clk))
		require.NoError(t, err)
		b, err = r2.RunOnce(context.Background())
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 1, Retried: 1}, b)
	})
}

type badBatch struct{}

func (badBatch) Publish(context.Context, Message) error { return nil }
func (badBatch) PublishBatch(context.Context, []Message) []error {
	return []error{nil, nil}
}

func TestCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))
		rec := newRecorder()
		r, err := NewRelay(db, rec, WithClock(clk), WithRetention(time.Hour, time.Minute), WithMaxAttempts(1))
		require.NoError(t, err)

		writeN(t, db, w, 5, "old") // sent at T
		drain(t, r)
		clk.Advance(30 * time.Minute)
		require.NoError(t, w.Write(ctx, db, Message{Topic: "newer", MsgID: "newer"})) // sent at T+30m
		drain(t, r)
		rec.fail = func(Message) (bool, error) { return false, errors.New("x") }
		require.NoError(t, w.Write(ctx, db, Message{Topic: "failed", MsgID: "failed"}))
		drain(t, r)
		clk.Advance(time.Hour) // T+90m; the FAILED and this PENDING must survive
		require.NoError(t, w.Write(ctx, db, Message{Topic: "pending", MsgID: "pending"}))

		n, err := r.Cleanup(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 5, n)
		var left []string
		for _, row := range allRows(t, db) {
			left = append(left, row.MsgID)
		}
		assert.Equal(t, []string{"newer", "failed", "pending"}, left)

		clk.Advance(time.Hour)
		n, err = r.Cleanup(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)

		// Chunked: more rows than one chunk.
		r.o.cleanupLimit = 7
		rec.fail = nil
		writeN(t, db, w, 30, "bulk")
		drain(t, r)
		clk.Advance(2 * time.Hour)
		n, err = r.Cleanup(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 31, n) // 30 + "pending"
		assert.Len(t, allRows(t, db), 1)
	})
}

func TestRunCleansUp(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))
		writeN(t, db, w, 3, "orders")
		r, err := NewRelay(db, newRecorder(), WithClock(clk), WithRetention(time.Hour, time.Minute),
			WithPollInterval(time.Millisecond))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- r.Run(context.Background()) }()
		require.Eventually(t, func() bool { return countStatus(t, db, StatusSent) == 3 }, 10*time.Second, time.Millisecond)
		clk.Advance(2 * time.Hour)
		require.Eventually(t, func() bool { return len(allRows(t, db)) == 0 }, 10*time.Second, time.Millisecond)
		require.NoError(t, r.Close())
		require.NoError(t, <-done)
	})
}

// Not parallel: counts goroutines.
func TestRunStopsOnCloseAndCancelWithoutLeaks(t *testing.T) {
	eachDBSerial(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		w, _ := NewWriter()
		writeN(t, db, w, 20, "orders")
		before := runtime.NumGoroutine()

		// Close.
		r, err := NewRelay(db, newRecorder(), WithPollInterval(time.Millisecond), WithPublishConcurrency(3))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- r.Run(context.Background()) }()
		require.Eventually(t, func() bool { return countStatus(t, db, StatusSent) == 20 }, 10*time.Second, time.Millisecond)
		// The shared lifecycle sentinels: one errors.Is across packages.
		require.Eventually(t, func() bool { return errors.Is(r.Run(context.Background()), lifecycle.ErrRunning) }, time.Second, time.Millisecond)
		require.NoError(t, r.Close())
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after Close")
		}
		require.NoError(t, r.Close(), "Close is idempotent")
		require.ErrorIs(t, r.Run(context.Background()), lifecycle.ErrClosed)
		require.ErrorIs(t, r.Run(context.Background()), ErrClosed)

		// Cancel.
		r2, err := NewRelay(db, newRecorder(), WithPollInterval(time.Millisecond))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- r2.Run(ctx) }()
		time.Sleep(20 * time.Millisecond) // let it poll a few times
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
		require.NoError(t, r2.Close())

		// Close before Run, then Run.
		r3, err := NewRelay(db, newRecorder())
		require.NoError(t, err)
		require.NoError(t, r3.Close())
		require.ErrorIs(t, r3.Run(context.Background()), ErrClosed)

		// Pool connections opened meanwhile carry driver goroutines (the MySQL
		// driver's watcher): close the idle ones before counting.
		sqlDB, err := db.DB()
		require.NoError(t, err)
		sqlDB.SetMaxIdleConns(0)
		defer sqlDB.SetMaxIdleConns(2)
		// Poll by hand: testify's Eventually runs its condition on a goroutine.
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if runtime.NumGoroutine() > before {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: before %d, now %d\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		buf := make([]byte, 1<<20)
		assert.NotContains(t, string(buf[:runtime.Stack(buf, true)]), "outbox.(*Relay)", "no relay goroutine left")
	})
}

func TestRunReportsDBErrorsAndKeepsGoing(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		var errs atomic.Int64
		r, err := NewRelay(db, newRecorder(), WithPollInterval(time.Millisecond), WithOnError(func(context.Context, error) { errs.Add(1) }))
		require.NoError(t, err)
		require.NoError(t, db.Migrator().DropTable(&Message{}))
		done := make(chan error, 1)
		go func() { done <- r.Run(context.Background()) }()
		require.Eventually(t, func() bool { return errs.Load() >= 3 }, 10*time.Second, time.Millisecond)

		// The table comes back: the relay recovers by itself.
		require.NoError(t, AutoMigrate(context.Background(), db))
		w, _ := NewWriter()
		require.NoError(t, w.Write(context.Background(), db, Message{Topic: "t"}))
		require.Eventually(t, func() bool { return countStatus(t, db, StatusSent) == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, r.Close())
		require.NoError(t, <-done)
	})
}

func TestNewRelayValidates(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		_, err := NewRelay(nil, newRecorder())
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = NewRelay(db, nil)
		require.ErrorIs(t, err, ErrInvalidConfig)
		for name, opt := range map[string]RelayOption{
			"batch":     WithBatchSize(0),
			"poll":      WithPollInterval(0),
			"lease":     WithLease(-time.Second),
			"attempts":  WithMaxAttempts(0),
			"backoff":   WithBackoff(time.Second, time.Millisecond),
			"jitter":    WithJitter(1.5),
			"mark":      WithMarkTimeout(0),
			"retention": WithRetention(0, time.Second),
			"conc":      WithPublishConcurrency(0),
			"mode":      WithClaimMode(ClaimMode(42)),
			"logger":    WithLogger(nil),
		} {
			_, err := NewRelay(db, newRecorder(), opt)
			assert.ErrorIs(t, err, ErrInvalidConfig, name)
		}
		_, err = NewRelay(db, newRecorder(), WithoutCleanup(), WithRetention(0, 0), WithoutCleanup())
		require.NoError(t, err)

		r, err := NewRelay(db, newRecorder())
		require.NoError(t, err)
		if kind == testenv.KindSQLite {
			assert.Equal(t, ClaimAtomicUpdate, r.mode)
		} else { // MariaDB and PostgreSQL
			assert.Equal(t, ClaimSkipLocked, r.mode)
		}
		m, err := resolveClaimMode(ClaimAuto, "sqlserver")
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Zero(t, m)
		m, err = resolveClaimMode(ClaimForUpdate, "sqlserver")
		require.NoError(t, err)
		assert.Equal(t, ClaimForUpdate, m)
	})
}

// A publisher that hangs is cut off before the lease ends, so the row is
// retried instead of being claimed by a second relay while in flight.
func TestRelayPublishDeadlineWithinLease(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		w, _ := NewWriter()
		require.NoError(t, w.Write(context.Background(), db, Message{Topic: "t"}))
		var deadline time.Duration
		hang := PublisherFunc(func(ctx context.Context, m Message) error {
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			deadline = time.Until(dl)
			<-ctx.Done()
			return ctx.Err()
		})
		r, err := NewRelay(db, hang, WithLease(250*time.Millisecond))
		require.NoError(t, err)
		b, err := r.RunOnce(context.Background())
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 1, Retried: 1}, b)
		assert.LessOrEqual(t, deadline, 200*time.Millisecond)
		assert.Contains(t, allRows(t, db)[0].LastError, "deadline exceeded")
	})
}

// The claim really uses SKIP LOCKED on MySQL/MariaDB and PostgreSQL and
// the one-statement UPDATE on SQLite, on the quoted table name.
func TestClaimSQLPerDialect(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		var mu sync.Mutex
		var stmts []string
		rec := func(d *gorm.DB) {
			mu.Lock()
			stmts = append(stmts, d.Statement.SQL.String())
			mu.Unlock()
		}
		require.NoError(t, db.Callback().Query().After("gorm:query").Register("outbox_test:q", rec))
		require.NoError(t, db.Callback().Raw().After("gorm:raw").Register("outbox_test:r", rec))
		w, _ := NewWriter()
		writeN(t, db, w, 3, "t")
		r, err := NewRelay(db, newRecorder())
		require.NoError(t, err)
		b, err := r.RunOnce(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 3, b.Sent)
		all := fmt.Sprint(stmts)
		q := quoteTable(db, defaultTable)
		if kind == testenv.KindSQLite {
			assert.Contains(t, all, "WHERE id IN (SELECT id FROM "+q+" WHERE status = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?)")
			assert.NotContains(t, all, "FOR UPDATE")
		} else {
			assert.Contains(t, all, "FOR UPDATE SKIP LOCKED")
			assert.Contains(t, all, "ORDER BY next_attempt_at, id LIMIT")
			assert.Contains(t, all, "UPDATE "+q+" SET lease_owner = ")
		}
	})
}

// On the databases with row locks, a claim skips rows another transaction
// has locked instead of waiting for them: the relay claims the unlocked
// rows at once, and the locked ones after the lock is released.
func TestClaimSkipsLockedRows(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		if kind == testenv.KindSQLite {
			t.Skip("SQLite has no row locks: its claim is one statement under the database lock")
		}
		ctx := context.Background()
		w, _ := NewWriter()
		ids := writeN(t, db, w, 5, "t")
		r, err := NewRelay(db, newRecorder())
		require.NoError(t, err)
		require.Equal(t, ClaimSkipLocked, r.mode)

		locker := db.Begin()
		require.NoError(t, locker.Error)
		defer locker.Rollback()
		var locked []int64
		require.NoError(t, locker.Raw("SELECT id FROM "+quoteTable(db, defaultTable)+
			" WHERE msg_id IN ? ORDER BY id FOR UPDATE", ids[:2]).Scan(&locked).Error)
		require.Len(t, locked, 2)

		// A claim that waited for the lock would hit this deadline (the
		// lock is held until the Rollback below).
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		msgs, err := r.claim(cctx, dbTime(time.Now()), "tok")
		require.NoError(t, err)
		var claimed []string
		for _, m := range msgs {
			claimed = append(claimed, m.MsgID)
		}
		assert.Equal(t, ids[2:], claimed, "the unlocked rows, at once")
		var leased []string
		require.NoError(t, db.Raw("SELECT msg_id FROM "+quoteTable(db, defaultTable)+
			" WHERE lease_owner = ? ORDER BY id", "tok").Scan(&leased).Error)
		assert.Equal(t, ids[2:], leased, "the lease is in the rows")

		require.NoError(t, locker.Rollback().Error)
		b, err := r.settle(ctx, msgs, nil, "tok")
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 3, Sent: 3}, b)
		b, err = r.RunOnce(ctx) // the formerly locked rows
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 2, Sent: 2}, b)
		assert.EqualValues(t, 5, countStatus(t, db, StatusSent))
	})
}

// gate is a Publisher that records deliveries into a shared broker and
// blocks its first call until released, so a test can let the lease run
// out while a batch is in flight.
type gate struct {
	broker  *recorder
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(broker *recorder) *gate {
	return &gate{broker: broker, started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) Publish(ctx context.Context, m Message) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.started)
		<-g.release
	}
	return g.broker.Publish(ctx, m)
}

// A relay whose lease runs out mid-publish loses some rows to another
// relay's claim. It must mark SENT (and count, and report to OnSent) only
// the rows it still holds: the other relay records the rest, so every row
// is counted exactly once across both relays, none is lost, and the
// taken-over rows show up as LeaseLost.
func TestRelayLeaseLostMidPublishCountsOnlyOwnMarks(t *testing.T) {
	t.Parallel()
	for _, otherDone := range []bool{true, false} {
		name := "other relay already marked"
		if !otherDone {
			name = "other relay still publishing"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
				clk := newFakeClock()
				w, _ := NewWriter(WithClock(clk))
				ids := writeN(t, db, w, 10, "orders")
				const lease = 10 * time.Second

				broker := newRecorder()
				var mu sync.Mutex
				sentBy := map[string][]string{} // relay -> msg IDs reported to OnSent
				onSent := func(relay string) RelayOption {
					return WithOnSent(func(_ context.Context, m Message) {
						mu.Lock()
						sentBy[relay] = append(sentBy[relay], m.MsgID)
						mu.Unlock()
					})
				}
				pubA, pubB := newGate(broker), newGate(broker)
				if otherDone {
					close(pubB.release)
				}
				a, err := NewRelay(db, pubA, WithClock(clk), WithLease(lease), WithBatchSize(10), onSent("A"))
				require.NoError(t, err)
				b, err := NewRelay(db, pubB, WithClock(clk), WithLease(lease), WithBatchSize(4), onSent("B"))
				require.NoError(t, err)

				type result struct {
					b   Batch
					err error
				}
				run := func(r *Relay) chan result {
					ch := make(chan result, 1)
					go func() {
						got, err := r.RunOnce(ctx)
						ch <- result{got, err}
					}()
					return ch
				}

				// A claims all 10 and stalls on its first publish past its lease.
				resA := run(a)
				<-pubA.started
				clk.Advance(lease)

				// B claims the 4 oldest (A's lease is over) ...
				resB := run(b)
				if otherDone {
					rb := <-resB
					require.NoError(t, rb.err)
					assert.Equal(t, Batch{Claimed: 4, Sent: 4}, rb.b)
				} else {
					<-pubB.started
				}

				// ... then A finishes publishing all 10 and settles.
				close(pubA.release)
				ra := <-resA
				require.NoError(t, ra.err)
				assert.Equal(t, Batch{Claimed: 10, Sent: 6, LeaseLost: 4}, ra.b)
				if !otherDone {
					// A did not mark B's rows: they are still B's, in flight.
					var held int64
					require.NoError(t, db.Model(&Message{}).
						Where("status = ? AND msg_id IN ?", StatusPending, ids[:4]).Count(&held).Error)
					assert.EqualValues(t, 4, held)
					close(pubB.release)
					rb := <-resB
					require.NoError(t, rb.err)
					assert.Equal(t, Batch{Claimed: 4, Sent: 4}, rb.b)
				}

				mu.Lock()
				defer mu.Unlock()
				assert.ElementsMatch(t, ids[4:], sentBy["A"], "A reports only the rows it marked")
				assert.ElementsMatch(t, ids[:4], sentBy["B"], "B reports the rows it took over")
				for _, id := range ids {
					assert.GreaterOrEqual(t, broker.got[id], 1, "%s published", id)
				}
				distinct, total := broker.deliveries()
				assert.Equal(t, 10, distinct)
				assert.Equal(t, 14, total, "B's 4 went out twice (documented duplicates)")
				for _, row := range allRows(t, db) {
					assert.Equal(t, StatusSent, row.Status, row.MsgID)
				}
				bl, err := Stats(ctx, db)
				require.NoError(t, err)
				assert.Equal(t, Backlog{}, bl)
			})
		})
	}
}

type ctxKey struct{}

// Every hook receives the context of the call that triggered it: the
// RunOnce ctx for the row hooks, Run's ctx for OnError.
func TestHooksReceiveTheCallersContext(t *testing.T) {
	t.Parallel()
	db := migratedDB(t, testenv.KindSQLite)
	clk := newFakeClock()
	w, err := NewWriter(WithClock(clk))
	require.NoError(t, err)
	require.NoError(t, w.Write(context.Background(), db,
		Message{Topic: "t", MsgID: "ok"}, Message{Topic: "t", MsgID: "retry"}, Message{Topic: "t", MsgID: "fail"}))
	rec := newRecorder()
	rec.fail = func(m Message) (bool, error) {
		if m.MsgID == "ok" {
			return false, nil
		}
		return false, errors.New("down")
	}
	got := map[string]any{}
	r, err := NewRelay(db, rec, WithClock(clk), WithMaxAttempts(2),
		WithOnSent(func(ctx context.Context, m Message) { got["sent"] = ctx.Value(ctxKey{}) }),
		WithOnRetry(func(ctx context.Context, m Message, _ error, _ time.Time) {
			got["retry/"+m.MsgID] = ctx.Value(ctxKey{})
		}),
		WithOnFailed(func(ctx context.Context, m Message, _ error) { got["failed/"+m.MsgID] = ctx.Value(ctxKey{}) }))
	require.NoError(t, err)

	ctx := context.WithValue(context.Background(), ctxKey{}, "batch-1")
	_, err = r.RunOnce(ctx)
	require.NoError(t, err)
	clk.Advance(time.Hour)
	// "retry" fails for good this time; "fail" too.
	ctx = context.WithValue(context.Background(), ctxKey{}, "batch-2")
	_, err = r.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"sent": "batch-1", "retry/retry": "batch-1", "retry/fail": "batch-1",
		"failed/retry": "batch-2", "failed/fail": "batch-2",
	}, got)

	// OnError gets Run's context.
	errCtx := make(chan any, 1)
	r, err = NewRelay(db, rec, WithPollInterval(time.Millisecond), WithoutCleanup(),
		WithOnError(func(ctx context.Context, err error) {
			select {
			case errCtx <- ctx.Value(ctxKey{}):
			default:
			}
		}))
	require.NoError(t, err)
	require.NoError(t, db.Migrator().DropTable(&Message{}))
	done := make(chan error, 1)
	go func() { done <- r.Run(context.WithValue(context.Background(), ctxKey{}, "run")) }()
	assert.Equal(t, "run", <-errCtx)
	require.NoError(t, r.Close())
	require.NoError(t, <-done)
}
