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
	db := migratedDB(t)
	require.NoError(t, AutoMigrate(ctx, db), "AutoMigrate is idempotent")
	clk := newFakeClock()
	w, _ := NewWriter(WithClock(clk))

	require.NoError(t, w.Write(ctx, db,
		Message{Topic: "orders", Key: "u1", Ref: "resv-1", MsgID: "a"},
		Message{Topic: "orders", Key: "u1", Ref: "resv-2", MsgID: "b"},
		Message{Topic: "orders", Key: "U1", Ref: "resv-3", MsgID: "c"},
		Message{Topic: "other", Key: "u1", MsgID: "d"}))
	clk.Advance(time.Minute)
	require.NoError(t, w.Write(ctx, db, Message{Topic: "orders", Key: "u2", Ref: "resv-4", MsgID: "e"}))

	n, err := Pending(ctx, db, "orders", "u1")
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	n, err = Pending(ctx, db, "orders", "U1") // byte-exact on both dialects
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

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
		got, err := HasPendingRef(ctx, db, ref)
		require.NoError(t, err)
		assert.Equal(t, want, got, ref)
	}
	_, err = HasPendingRef(ctx, db, "")
	require.ErrorIs(t, err, ErrInvalidMessage)

	m, found, err := Lookup(ctx, db, "c")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, StatusFailed, m.Status)
	assert.Equal(t, "poison", m.LastError)
	assert.Equal(t, "resv-3", m.Ref)
	m, found, err = Lookup(ctx, db, "a")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, StatusSent, m.Status)
	_, found, err = Lookup(ctx, db, "zzz")
	require.NoError(t, err)
	assert.False(t, found)

	bl, err = r.Backlog(ctx)
	require.NoError(t, err)
	assert.Equal(t, Backlog{Pending: 2, Failed: 1, OldestPending: clk.Now().Add(-time.Minute)}, bl)

	// nil DB everywhere
	_, err = Pending(ctx, nil, "", "")
	assert.ErrorIs(t, err, ErrNilDB)
	_, err = HasPending(ctx, nil, "", "")
	assert.ErrorIs(t, err, ErrNilDB)
	_, err = HasPendingRef(ctx, nil, "x")
	assert.ErrorIs(t, err, ErrNilDB)
	_, _, err = Lookup(ctx, nil, "x")
	assert.ErrorIs(t, err, ErrNilDB)
	_, err = Stats(ctx, nil)
	assert.ErrorIs(t, err, ErrNilDB)
	assert.ErrorIs(t, AutoMigrate(ctx, nil), ErrNilDB)
}

// schema.sql and AutoMigrate must build the same table.
func TestSchemaSQLMatchesAutoMigrate(t *testing.T) {
	t.Parallel()
	if testenv.DBKindInUse() != testenv.KindMySQL {
		// SQLite cannot run MySQL DDL; still check the file names every column.
		for _, col := range columnsOf(t, migratedDB(t)) {
			assert.Contains(t, SchemaMySQL, "`"+col+"`", "schema.sql lacks column %s", col)
		}
		return
	}
	ctx := context.Background()
	byDDL := testenv.MySQL(t)
	require.NoError(t, byDDL.Exec(SchemaMySQL).Error)
	byGorm := testenv.MySQL(t)
	require.NoError(t, AutoMigrate(ctx, byGorm))
	assert.Equal(t, describe(t, byGorm), describe(t, byDDL))
	// AutoMigrate on the DDL-made table changes nothing.
	require.NoError(t, AutoMigrate(ctx, byDDL))
	assert.Equal(t, describe(t, byGorm), describe(t, byDDL))

	// And the DDL-made table works end to end.
	w, _ := NewWriter()
	require.NoError(t, w.Write(ctx, byDDL, Message{Topic: "t", Key: "k", Payload: []byte("p")}))
	rec := newRecorder()
	r, err := NewRelay(byDDL, rec)
	require.NoError(t, err)
	b, err := r.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, b.Sent)
}

func columnsOf(t *testing.T, db *gorm.DB) []string {
	cols, err := db.Migrator().ColumnTypes(&Message{})
	require.NoError(t, err)
	var out []string
	for _, c := range cols {
		out = append(out, c.Name())
	}
	return out
}

// describe renders columns and indexes of the outbox table on MySQL.
func describe(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var b strings.Builder
	rows, err := db.Raw(`SELECT column_name, column_type, is_nullable, COALESCE(column_default, 'NULL'), collation_name
		FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? ORDER BY column_name`, TableName).Rows()
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
	rows, err = db.Raw(`SELECT index_name, non_unique, seq_in_index, column_name
		FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ?`, TableName).Rows()
	require.NoError(t, err)
	for rows.Next() {
		var name, col string
		var nonUnique, seq int
		require.NoError(t, rows.Scan(&name, &nonUnique, &seq, &col))
		idx = append(idx, fmt.Sprintf("idx %s %d %d %s", name, nonUnique, seq, col))
	}
	require.NoError(t, rows.Close())
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
	db := migratedDB(t)
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
}
