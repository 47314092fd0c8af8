package outbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func TestQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		require.NoError(t, AutoMigrate(ctx, db), "AutoMigrate is idempotent")
		clk := newFakeClock()
		w, _ := NewWriter(WithClock(clk))

		require.NoError(t, w.Write(ctx, db,
			Message{Topic: "orders", Key: "u1", ReservationID: "resv-1", MsgID: "a"},
			Message{Topic: "orders", Key: "u1", ReservationID: "resv-2", MsgID: "b"},
			Message{Topic: "orders", Key: "U1", ReservationID: "resv-3", MsgID: "c"},
			Message{Topic: "other", Key: "u1", MsgID: "d"}))
		clk.Advance(time.Minute)
		require.NoError(t, w.Write(ctx, db, Message{Topic: "orders", Key: "u2", ReservationID: "resv-4", MsgID: "e"}))

		for key, want := range map[string]bool{"u1": true, "U1": true, "U2": false} { // byte-exact: only u2 was written
			got, err := HasPending(ctx, db, "orders", key)
			require.NoError(t, err)
			assert.Equal(t, want, got, key)
		}

		bl, err := Stats(ctx, db)
		require.NoError(t, err)
		assert.EqualValues(t, 5, bl.Pending)
		assert.Zero(t, bl.Failed)
		assert.True(t, bl.OldestPending.Equal(clk.Now().Add(-time.Minute)), "%v", bl.OldestPending)

		// Deliver u1's orders (a and b): fail c for good, leave the rest.
		rec := newRecorder()
		rec.fail = func(m Message) (bool, error) {
			switch m.MsgID {
			case "a", "b":
				return true, nil
			case "c":
				return false, fmt.Errorf("poison")
			}
			return false, fmt.Errorf("later")
		}
		r, err := NewRelay(db, rec, WithClock(clk), WithMaxAttempts(1), WithBatchSize(3))
		require.NoError(t, err)
		_, err = r.RunOnce(ctx) // a, b, c (table order)
		require.NoError(t, err)

		for _, c := range []struct {
			topic, key string
			want       bool
		}{{"orders", "u1", false}, {"orders", "U1", false}, {"other", "u1", true}, {"orders", "u2", true}, {"orders", "nobody", false}} {
			got, err := HasPending(ctx, db, c.topic, c.key)
			require.NoError(t, err)
			assert.Equal(t, c.want, got, "%s/%s", c.topic, c.key)
		}
		for ref, want := range map[string]bool{"resv-1": false, "resv-3": false, "resv-4": true, "resv-9": false} {
			got, err := HasPendingReservation(ctx, db, ref)
			require.NoError(t, err)
			assert.Equal(t, want, got, ref)
		}
		_, err = HasPendingReservation(ctx, db, "")
		require.ErrorIs(t, err, ErrInvalidArgument)

		m, found, err := Lookup(ctx, db, "c")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, StatusFailed, m.Status)
		assert.Equal(t, "poison", m.LastError)
		assert.Equal(t, "resv-3", m.ReservationID)
		m, found, err = Lookup(ctx, db, "a")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, StatusSent, m.Status)
		_, found, err = Lookup(ctx, db, "zzz")
		require.NoError(t, err)
		assert.False(t, found)

		bl, err = r.backlog(ctx)
		require.NoError(t, err)
		assert.Equal(t, Backlog{Pending: 2, Failed: 1, OldestPending: clk.Now().Add(-time.Minute)}, bl)

		// nil DB everywhere: a bad argument
		_, err = HasPending(ctx, nil, "", "")
		assert.ErrorIs(t, err, ErrInvalidArgument)
		_, err = HasPendingReservation(ctx, nil, "x")
		assert.ErrorIs(t, err, ErrInvalidArgument)
		_, _, err = Lookup(ctx, nil, "x")
		assert.ErrorIs(t, err, ErrInvalidArgument)
		_, err = Stats(ctx, nil)
		assert.ErrorIs(t, err, ErrInvalidArgument)
		assert.ErrorIs(t, AutoMigrate(ctx, nil), ErrInvalidArgument)
	})
}

// Schema's DDL (schema.sql, schema_postgres.sql) and AutoMigrate must
// build the same table, for the default table and for one named with
// WithTable, on MariaDB and on PostgreSQL.
func TestSchemaMatchesAutoMigrate(t *testing.T) {
	t.Parallel()
	for _, kind := range dbKinds() {
		for _, table := range []string{defaultTable, "billing_outbox"} {
			t.Run(string(kind)+"/"+table, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				opt := WithTable(table)
				if kind == testenv.KindSQLite {
					// SQLite runs neither DDL; still check both files name every column.
					db := openDB(t, kind)
					require.NoError(t, AutoMigrate(ctx, db, opt))
					for _, col := range columnsOf(t, db, table) {
						assert.Contains(t, schemaMySQL, "`"+col+"`", "schema.sql lacks column %s", col)
						assert.Contains(t, schemaPostgres, `"`+col+`"`, "schema_postgres.sql lacks column %s", col)
					}
					return
				}
				ddl, err := Schema(string(kind), opt)
				require.NoError(t, err)
				byDDL := openDB(t, kind)
				require.NoError(t, byDDL.Exec(ddl).Error)
				byGorm := openDB(t, kind)
				require.NoError(t, AutoMigrate(ctx, byGorm, opt))
				want := describe(t, kind, byGorm, table)
				assert.Equal(t, want, describe(t, kind, byDDL, table))
				for _, ix := range indexes { // named after the table
					assert.Contains(t, want, ix.prefix+"_"+table+"_"+ix.suffix)
				}
				// AutoMigrate on the DDL-made table changes nothing.
				require.NoError(t, AutoMigrate(ctx, byDDL, opt))
				assert.Equal(t, want, describe(t, kind, byDDL, table))

				// And the DDL-made table works end to end.
				w, _ := NewWriter(opt)
				require.NoError(t, w.Write(ctx, byDDL, Message{Topic: "t", Key: "k", Payload: []byte("p")}))
				rec := newRecorder()
				r, err := NewRelay(byDDL, rec, opt)
				require.NoError(t, err)
				b, err := r.RunOnce(ctx)
				require.NoError(t, err)
				assert.Equal(t, 1, b.Sent)
			})
		}
	}
}

func TestSchemaAndTableOptionErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ddl, err := Schema("mysql")
	require.NoError(t, err)
	assert.Equal(t, schemaMySQL, ddl)
	ddl, err = Schema("postgres", WithTable("svc_a_outbox"), nil)
	require.NoError(t, err)
	assert.NotContains(t, ddl, defaultTable)
	assert.Contains(t, ddl, `CREATE TABLE IF NOT EXISTS "svc_a_outbox"`)
	assert.Contains(t, ddl, `"idx_svc_a_outbox_poll" ON "svc_a_outbox" ("status", "next_attempt_at")`)
	_, err = Schema("sqlite")
	require.ErrorIs(t, err, ErrInvalidArgument)

	db := testenv.SQLite(t)
	for _, bad := range []string{"", "Outbox", "1outbox", "outbox-message", "outbox message", "s.outbox",
		`outbox"; DROP TABLE x; --`, "outbox_é", strings.Repeat("a", maxTableLen+1)} {
		opt := WithTable(bad)
		_, err := Schema("mysql", opt)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
		assert.ErrorIs(t, AutoMigrate(ctx, db, opt), ErrInvalidConfig, "%q", bad)
		_, err = NewWriter(opt)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
		_, err = NewRelay(db, newRecorder(), opt)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
		_, err = Stats(ctx, db, opt)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
		_, err = HasPending(ctx, db, "t", "k", opt)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
		_, err = HasPendingReservation(ctx, db, "r", opt)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
		_, _, err = Lookup(ctx, db, "m", opt)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
	}
	var n int64
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM sqlite_master").Scan(&n).Error)
	assert.Zero(t, n, "nothing was created under a bad name")
	for _, good := range []string{"_x", "order", "outbox2", strings.Repeat("a", maxTableLen)} {
		require.NoError(t, AutoMigrate(ctx, db, WithTable(good)), good) // "order" is reserved: quoted everywhere
		w, err := NewWriter(WithTable(good))
		require.NoError(t, err)
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", MsgID: good}))
		_, found, err := Lookup(ctx, db, good, WithTable(good))
		require.NoError(t, err)
		assert.True(t, found, good)
		r, err := NewRelay(db, newRecorder(), WithTable(good))
		require.NoError(t, err)
		b, err := r.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 1, Sent: 1}, b, good)
		n, err := r.Cleanup(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		m, found, err := Lookup(ctx, db, good, WithTable(good))
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, StatusSent, m.Status)
	}
}

func columnsOf(t *testing.T, db *gorm.DB, table string) []string {
	cols, err := db.Migrator().ColumnTypes(table)
	require.NoError(t, err)
	var out []string
	for _, c := range cols {
		out = append(out, c.Name())
	}
	require.Len(t, out, 15)
	return out
}

// describe renders columns and indexes of an outbox table on MySQL or
// PostgreSQL.
func describe(t *testing.T, kind testenv.DBKind, db *gorm.DB, table string) string {
	t.Helper()
	colSQL := `SELECT column_name, column_type, is_nullable, COALESCE(column_default, 'NULL'), collation_name
		FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? ORDER BY column_name`
	idxSQL := `SELECT CONCAT(index_name, ' ', non_unique, ' ', seq_in_index, ' ', column_name)
		FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ?`
	if kind == testenv.KindPostgres {
		colSQL = `SELECT column_name,
			data_type || COALESCE('(' || character_maximum_length || ')', '') || COALESCE(' p' || datetime_precision, ''),
			is_nullable, COALESCE(column_default, 'NULL'), collation_name
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY column_name`
		idxSQL = `SELECT indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ?`
	}
	var b strings.Builder
	rows, err := db.Raw(colSQL, table).Rows()
	require.NoError(t, err)
	for rows.Next() {
		var name, typ, null, def string
		var coll *string
		require.NoError(t, rows.Scan(&name, &typ, &null, &def, &coll))
		c := ""
		if coll != nil {
			c = *coll
		}
		fmt.Fprintf(&b, "col %s %s %s %s %s\n", name, typ, null, def, c)
	}
	require.NoError(t, rows.Close())
	var idx []string
	require.NoError(t, db.Raw(idxSQL, table).Scan(&idx).Error)
	require.NotEmpty(t, idx)
	sort.Strings(idx)
	b.WriteString(strings.Join(idx, "\n"))
	return b.String()
}

// OldestPending is the smallest created_at among PENDING rows, not the
// created_at of the lowest id: rows can carry explicit timestamps or come
// from several writers whose inserts interleave out of time order.
func TestStatsOldestPendingByCreatedAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		t0 := clk.Now()
		w, _ := NewWriter(WithClock(clk))

		// Inserted in id order a, b, c, d but created at t0, t0-1h, t0-2h+1µs, t0-3h.
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", MsgID: "a"}))
		clk.Set(t0.Add(-time.Hour))
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", MsgID: "b"}))
		clk.Set(t0.Add(-2*time.Hour + time.Microsecond))
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", MsgID: "c"}))
		// Written by another writer with an explicit timestamp: SENT already,
		// so it must not count, though it is the oldest row of all.
		old := t0.Add(-3 * time.Hour)
		require.NoError(t, db.Create(&Message{MsgID: "d", Topic: "t", Status: StatusSent,
			NextAttemptAt: old, CreatedAt: old, UpdatedAt: old, SentAt: &old}).Error)

		bl, err := Stats(ctx, db)
		require.NoError(t, err)
		assert.EqualValues(t, 3, bl.Pending)
		want := t0.Add(-2*time.Hour + time.Microsecond)
		assert.True(t, bl.OldestPending.Equal(want), "oldest pending %v, want %v (row c)", bl.OldestPending, want)
		assert.Equal(t, time.UTC, bl.OldestPending.Location())

		// Once c is delivered, b (t0-1h) is the oldest.
		require.NoError(t, db.Model(&Message{}).Where("msg_id = ?", "c").Update("status", StatusSent).Error)
		bl, err = Stats(ctx, db)
		require.NoError(t, err)
		assert.EqualValues(t, 2, bl.Pending)
		assert.True(t, bl.OldestPending.Equal(t0.Add(-time.Hour)), "%v", bl.OldestPending)

		// Nothing pending: zero.
		require.NoError(t, db.Model(&Message{}).Where("status = ?", StatusPending).Update("status", StatusSent).Error)
		bl, err = Stats(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, Backlog{}, bl)
	})
}
