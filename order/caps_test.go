package order

import (
	"context"
	"errors"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// isDeadlock reports MySQL's error 1213 (a deadlock, the victim rolled back).
func isDeadlock(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// lockWaits counts the sessions of db's database waiting for a lock:
// PostgreSQL reports them; on MySQL/MariaDB (whose lock views are cached
// for 100 ms) it counts the locking reads in flight, which wait while the
// test holds the lock they need.
func lockWaits(t testing.TB, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	q := "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
	if db.Dialector.Name() == "mysql" {
		q = "SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()" +
			" AND info LIKE '%FOR UPDATE%'"
	}
	require.NoError(t, db.Raw(q).Scan(&n).Error)
	return n
}

// A cap above 1 is checked by reading the buyer's live orders. Two
// transactions checking the same buyer at once must not both pass: the
// second waits for the first and counts its order. Transaction A holds the
// check's locks for buyer 7 (cap 2); Handle for buyer 7 starts and is made
// to wait (or, before the fix, finishes); A then adds units and commits;
// Handle must count them. On PostgreSQL, which has no range locks, FOR
// UPDATE alone let Handle pass in both cases: without a live order there
// is nothing to lock, and with one the waiting statement does not see the
// rows A inserted. SQLite serialises writers (one connection): skipped.
func TestCapCheckWaitsForTheSameBuyer(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		dialect := db.Dialector.Name()
		if dialect == "sqlite" {
			t.Skip("SQLite serialises writers")
		}
		for _, tc := range []struct {
			name     string
			held, by int64 // units buyer 7 holds before, units A adds
		}{{"with a live order", 1, 1}, {"without one", 0, 2}} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.held == 0 && dialect == "mysql" {
					// An empty range is a gap lock, which does not exclude
					// another: the two inserts deadlock and one retries.
					t.Skip("MySQL: settled by a deadlock and a retry, not by waiting")
				}
				ctx := context.Background()
				act := num(10 + tc.held)
				actN := int64(10 + tc.held)
				addActivity(t, db, act, 100, 2)
				p := newProc(t, db)
				if tc.held > 0 {
					out, err := p.Handle(ctx, msg(int(actN*100), act, "7"))
					require.NoError(t, err)
					require.Equal(t, StatusSuccess, out.Status)
				}

				txA := db.Begin(p.txOpts...)
				require.NoError(t, txA.Error)
				defer txA.Rollback()
				held, err := p.liveUnits(ctx, txA, act, []string{"7"})
				require.NoError(t, err)
				require.Equal(t, tc.held, held["7"])

				type result struct {
					out Outcome
					err error
				}
				done := make(chan result, 1)
				go func() {
					out, err := p.Handle(ctx, msg(int(actN*100+1), act, "7"))
					done <- result{out, err}
				}()
				var early *result
				eventually(t, 20*time.Second, func() bool {
					select {
					case r := <-done:
						early = &r
						return true
					default:
						return lockWaits(t, db) > 0
					}
				}, "Handle neither finished nor waits for a lock")

				// A adds its units and commits. On MySQL/MariaDB A's insert
				// into the range Handle waits to lock may deadlock instead:
				// one of the two is rolled back (1213) and retries.
				o := p.newOrder(msg(int(actN*100+2), act, "7"), activityInfo{ID: act, UserLimit: 2}, actN*1000+2, p.o.clock.Now())
				o.Qty = tc.by
				errA := p.insertRows(ctx, txA, tableOrder, orderArgs([]Order{o}))
				if errA == nil {
					errA = txA.Exec(p.sql.takeStock, tc.by, act, tc.by).Error
				}
				if errA == nil {
					errA = txA.Commit().Error
				}
				if errA != nil {
					require.Equal(t, "mysql", dialect, "A failed: %v", errA)
					require.True(t, isDeadlock(errA), "A failed: %v", errA)
				}

				r := early
				if r == nil {
					select {
					case got := <-done:
						r = &got
					case <-time.After(20 * time.Second):
						t.Fatal("Handle still waits after A ended")
					}
				}
				assert.Nil(t, early, "Handle finished while A held buyer 7's check")
				if r.err != nil {
					require.Equal(t, "mysql", dialect, "Handle failed: %v", r.err)
					require.True(t, isDeadlock(r.err), "Handle failed: %v", r.err)
					r.out, r.err = p.Handle(ctx, msg(int(actN*100+1), act, "7")) // the consumer's retry
					require.NoError(t, r.err)
				}
				_, units := userLive(t, db, act, "7")
				if errA == nil {
					assert.Equal(t, StatusFailed, r.out.Status)
					assert.Equal(t, ReasonLimit, r.out.Reason)
					assert.EqualValues(t, tc.held+tc.by, units)
				} else {
					assert.Equal(t, StatusSuccess, r.out.Status, "A rolled back: Handle's unit fits")
					assert.EqualValues(t, tc.held+1, units)
				}
				assert.LessOrEqual(t, units, int64(2), "buyer 7 within the cap of 2")
				checkConservation(t, db, act, 100)
			})
		}
	})
}

// pgx prepares every statement and PostgreSQL may switch a prepared
// statement to a generic plan after five runs, made for the table as it
// was then. The batch's dedup read (an IN list of the batch's message IDs),
// planned on a small table, became a sequential scan that stayed while the
// table grew, until an ANALYZE: on a new deployment every batch cost
// O(table) (BenchmarkProcess on PostgreSQL fell from 22k to 6k orders/s at
// 50,000 orders). The batch's transaction now plans per execution. The
// hook reads, inside that transaction, how it scanned message_dedup.
func TestPostgresBatchReadsFollowTheTableSize(t *testing.T) {
	t.Parallel()
	db := openDB(t, "postgres") // skips without SECKILL_POSTGRES_DSN
	ctx := context.Background()
	require.NoError(t, AutoMigrate(ctx, db))
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1) // one connection: one statement cache, one plan cache
	addActivity(t, db, "1", 1_000_000, 1)
	// Rows of message_dedup read by sequential scans, as this backend has
	// counted them since it last reported its statistics: the current
	// transaction's, and a few hundred of the earlier small batches'.
	var seqRead int64
	p := newProc(t, db, WithTxHook(func(ctx context.Context, tx *gorm.DB, _ []Order) error {
		return tx.Raw("SELECT seq_tup_read FROM pg_stat_xact_user_tables WHERE relname = 'message_dedup'").Row().Scan(&seqRead)
	}))
	const size = 10
	batch := func(k int) []Message {
		msgs := make([]Message, size)
		for i := range msgs {
			msgs[i] = msg(k*size+i, "1", num(k*size+i+1))
		}
		return msgs
	}
	for k := 0; k < 8; k++ { // past the five custom plans
		mustProcess(t, p, batch(k))
	}
	// The table grows without an ANALYZE (autovacuum's first look is a
	// minute away).
	const bulk = 50000
	require.NoError(t, db.Exec("INSERT INTO message_dedup (msg_id, reservation_id, activity_id, user_id, outcome, created_at)"+
		" SELECT 'bulk-' || g, 'bulk-' || g, '2', g::text, 'SUCCESS', now() FROM generate_series(1, ?) g", bulk).Error)
	mustProcess(t, p, batch(100))
	assert.Less(t, seqRead, int64(bulk/2), "the batch's dedup read scanned the whole table")
}

// A refund without a restock to the sale leaves the buyer the units (as
// the Redis reservation does), so they count against the cap; one
// restocked to the sale gave them back.
func TestCapCountsRefundsWithoutRestock(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 2)
		p := newProc(t, db)
		for i := 0; i < 2; i++ {
			out, err := p.Handle(ctx, msg(i, "1", "7"))
			require.NoError(t, err)
			require.Equal(t, StatusSuccess, out.Status)
		}
		require.NoError(t, db.Exec("UPDATE seckill_order SET status = ?, restock = ? WHERE reservation_id = ?", OrderRefunded, "none", "r-0").Error)
		require.NoError(t, db.Exec("UPDATE seckill_order SET status = ?, restock = ?, live_slot = NULL WHERE reservation_id = ?",
			OrderRefunded, "sale", "r-1").Error)
		out, err := p.Handle(ctx, msg(2, "1", "7"))
		require.NoError(t, err)
		assert.Equal(t, StatusSuccess, out.Status, "the refund to the sale freed a unit of the cap")
		out, err = p.Handle(ctx, msg(3, "1", "7"))
		require.NoError(t, err)
		assert.Equal(t, StatusFailed, out.Status, "the refund without restock still holds one")
	})
}
