package outbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// statusCounts reads the rows of table per status with raw SQL.
func statusCounts(t *testing.T, db *gorm.DB, table string) map[Status]int64 {
	t.Helper()
	var rows []struct {
		Status Status
		N      int64
	}
	require.NoError(t, db.Raw("SELECT status, COUNT(*) AS n FROM "+quoteTable(db, table)+" GROUP BY status").Scan(&rows).Error)
	got := map[Status]int64{}
	for _, r := range rows {
		got[r.Status] = r.N
	}
	return got
}

// Two outboxes (two table names) side by side in one database, next to the
// default table: each writer, relay and query sees only its own table,
// msg IDs are unique per table, and index names do not collide (they are
// per schema on PostgreSQL and SQLite).
func TestTwoTablesSideBySide(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		ctx := context.Background()
		const ta, tb = "svc_a_outbox", "svc_b_outbox"
		optA, optB := WithTable(ta), WithTable(tb)
		require.NoError(t, AutoMigrate(ctx, db, optA))
		require.NoError(t, AutoMigrate(ctx, db, optB))
		require.NoError(t, AutoMigrate(ctx, db, optA), "idempotent")

		clk := newFakeClock()
		wa, err := NewWriter(WithClock(clk), optA)
		require.NoError(t, err)
		wb, err := NewWriter(WithClock(clk), optB)
		require.NoError(t, err)
		idsA := writeN(t, db, wa, 3, "a")
		idsB := writeN(t, db, wb, 5, "b") // m-00000… again: unique per table
		assert.Equal(t, idsA, idsB[:3])
		require.NoError(t, wa.Write(ctx, db, Message{Topic: "a", Key: "k", ReservationID: "resv-a", MsgID: "only-a"}))

		assert.Equal(t, map[Status]int64{StatusPending: 4}, statusCounts(t, db, ta))
		assert.Equal(t, map[Status]int64{StatusPending: 5}, statusCounts(t, db, tb))
		assert.Empty(t, statusCounts(t, db, defaultTable), "the default table is untouched")

		// The unique msg_id is per table.
		err = wa.Write(ctx, db, Message{Topic: "a", MsgID: idsA[0]})
		require.ErrorIs(t, err, ErrDuplicateMsgID)
		require.NoError(t, wb.Write(ctx, db, Message{Topic: "b", MsgID: "only-a"}))

		// Queries follow the option.
		bl, err := Stats(ctx, db, optA)
		require.NoError(t, err)
		assert.EqualValues(t, 4, bl.Pending)
		bl, err = Stats(ctx, db, optB)
		require.NoError(t, err)
		assert.EqualValues(t, 6, bl.Pending)
		bl, err = Stats(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, Backlog{}, bl)
		for opt, want := range map[string]bool{ta: true, tb: false} {
			got, err := HasPendingReservation(ctx, db, "resv-a", WithTable(opt))
			require.NoError(t, err)
			assert.Equal(t, want, got, opt)
			got, err = HasPending(ctx, db, "a", "k", WithTable(opt))
			require.NoError(t, err)
			assert.Equal(t, want, got, opt)
		}
		m, found, err := Lookup(ctx, db, "only-a", optB)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "b", m.Topic)

		// A relay drains only its own table.
		recA, recB := newRecorder(), newRecorder()
		ra, err := NewRelay(db, recA, WithClock(clk), optA, WithRetention(time.Hour, time.Minute))
		require.NoError(t, err)
		rb, err := NewRelay(db, recB, WithClock(clk), optB, WithMaxAttempts(1))
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 4, Sent: 4}, drain(t, ra))
		assert.Equal(t, map[Status]int64{StatusSent: 4}, statusCounts(t, db, ta))
		assert.Equal(t, map[Status]int64{StatusPending: 6}, statusCounts(t, db, tb))
		distinct, _ := recA.deliveries()
		assert.Equal(t, 4, distinct)

		recB.fail = func(m Message) (bool, error) {
			if m.MsgID == "only-a" {
				return false, errors.New("poison")
			}
			return true, nil
		}
		assert.Equal(t, Batch{Claimed: 6, Sent: 5, Failed: 1}, drain(t, rb))
		assert.Equal(t, map[Status]int64{StatusSent: 5, StatusFailed: 1}, statusCounts(t, db, tb))
		bl, err = rb.backlog(ctx)
		require.NoError(t, err)
		assert.Equal(t, Backlog{Failed: 1}, bl)

		// Requeue and Cleanup stay in their table too.
		recB.fail = nil
		failedID := m.ID
		moved, err := ra.Requeue(ctx, failedID) // same id, wrong table: nothing FAILED there
		require.NoError(t, err)
		assert.Zero(t, moved)
		moved, err = rb.Requeue(ctx, failedID)
		require.NoError(t, err)
		assert.EqualValues(t, 1, moved)
		clk.Advance(2 * time.Hour)
		deleted, err := ra.Cleanup(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 4, deleted)
		assert.Empty(t, statusCounts(t, db, ta))
		assert.Equal(t, map[Status]int64{StatusSent: 5, StatusPending: 1}, statusCounts(t, db, tb))
	})
}

// Writing a MsgID twice fails with ErrDuplicateMsgID on every database,
// whether or not gorm translates the driver's error, and keeps the
// driver's error in the chain (SQLSTATE 23505 on PostgreSQL).
func TestWriteDuplicateMsgID(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		ctx := context.Background()
		w, _ := NewWriter()
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", MsgID: "dup"}))
		for _, translate := range []bool{false, true} {
			t.Run(fmt.Sprintf("TranslateError=%v", translate), func(t *testing.T) {
				d := db.Session(&gorm.Session{NewDB: true})
				d.Config = &gorm.Config{}
				*d.Config = *db.Config
				d.TranslateError = translate
				err := w.Write(ctx, d, Message{Topic: "t", MsgID: "dup"})
				require.ErrorIs(t, err, ErrDuplicateMsgID)
				assert.Equal(t, translate, errors.Is(err, gorm.ErrDuplicatedKey))
				if kind == testenv.KindPostgres && !translate {
					var pe *pgconn.PgError
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, "23505", pe.Code)
				}
				// In a batch and past the first INSERT chunk, too.
				msgs := make([]Message, writeChunk+1)
				for i := range msgs {
					msgs[i] = Message{Topic: "t", MsgID: fmt.Sprintf("batch-%s-%d", t.Name(), i)}
				}
				msgs[writeChunk].MsgID = "dup"
				err = d.Transaction(func(tx *gorm.DB) error { return w.Write(ctx, tx, msgs...) })
				require.ErrorIs(t, err, ErrDuplicateMsgID)
			})
		}
		assert.Equal(t, map[Status]int64{StatusPending: 1}, statusCounts(t, db, defaultTable), "nothing else written")

		// Other failures are not duplicates.
		require.NoError(t, db.Exec("DROP TABLE "+quoteTable(db, defaultTable)).Error)
		err := w.Write(ctx, db, Message{Topic: "t", MsgID: "dup"})
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrDuplicateMsgID)
	})
}

// SQLSTATE 23505 is recognised however deeply the driver's error is
// wrapped (the dialector's own translation only looks at the error itself).
func TestIsDuplicateKeyWrappedPgError(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t) // any dialector: the SQLSTATE is read from the error
	pgErr := &pgconn.PgError{Code: "23505", Message: "duplicate key value violates unique constraint"}
	assert.True(t, isDuplicateKey(db, fmt.Errorf("layer 2: %w", fmt.Errorf("layer 1: %w", pgErr))))
	assert.False(t, isDuplicateKey(db, fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "23503"})))
	assert.False(t, isDuplicateKey(db, errors.New("duplicate key value")))
	assert.True(t, isDuplicateKey(db, fmt.Errorf("x: %w", gorm.ErrDuplicatedKey)))
}

// ddlRecorder records the statements a gorm session runs.
type ddlRecorder struct {
	logger.Interface
	mu    sync.Mutex
	stmts []string
}

func (l *ddlRecorder) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	sql, _ := fc()
	l.mu.Lock()
	l.stmts = append(l.stmts, sql)
	l.mu.Unlock()
}

// TestAutoMigrateAgainChangesNothing: AutoMigrate over an existing outbox
// table runs no DDL. gorm's own AutoMigrate, which it ran before, dropped
// the unique msg_id index (not declared in the struct tags) on every run
// and AutoMigrate made it again: every process start left the outbox
// without its unique key for a moment while other processes wrote, and
// for good if the process or the database died in between.
func TestAutoMigrateAgainChangesNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		rec := &ddlRecorder{Interface: logger.Discard}
		require.NoError(t, AutoMigrate(context.Background(), db.Session(&gorm.Session{Logger: rec})))
		ddl := regexp.MustCompile(`(?i)^\s*(DROP|ALTER|CREATE)\b`)
		for _, s := range rec.stmts {
			assert.False(t, ddl.MatchString(s), "AutoMigrate over an existing table ran %q", s)
		}
		assert.True(t, db.Migrator().HasIndex(defaultTable, indexes[0].name(defaultTable)), "the unique msg_id index")
	})
}
