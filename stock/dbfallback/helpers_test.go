package dbfallback

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

var bg = context.Background()

// env is a Store on a fresh database (SQLite, or MariaDB with
// SECKILL_MYSQL_DSN), with a test clock at the epoch.
type env struct {
	s     *Store
	db    *gorm.DB
	clock *testenv.Clock
}

func newEnv(t testing.TB, opts ...Option) env {
	t.Helper()
	db := testenv.DB(t)
	if sqlDB, err := db.DB(); err == nil && testenv.DBKindInUse() == testenv.KindMySQL {
		sqlDB.SetMaxOpenConns(16) // 200 goroutines must not exhaust max_connections
	}
	clock := testenv.NewEpochClock(0)
	s, err := New(db, append([]Option{WithClock(clock)}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, s.AutoMigrate(bg))
	return env{s: s, db: db, clock: clock}
}

// activity runs from an hour before the epoch to an hour after it.
func activity(id string, stockUnits, limit int64) stock.Activity {
	e := testenv.Epoch()
	return stock.Activity{ID: id, Stock: stockUnits, PerUserLimit: limit, Start: e.Add(-time.Hour), End: e.Add(time.Hour)}
}

func (e env) open(t testing.TB, id string, quota, limit int64) stock.Activity {
	t.Helper()
	a := activity(id, quota*2, limit)
	require.NoError(t, e.s.Open(bg, a, quota))
	return a
}

// rawPool reads the pool row with plain SQL: quota, remaining, drained.
func (e env) rawPool(t testing.TB, act string) (quota, remaining, drained int64) {
	t.Helper()
	require.NoError(t, e.db.Raw("SELECT quota, remaining, drained FROM "+e.s.pool+" WHERE activity_id = ?", act).
		Row().Scan(&quota, &remaining, &drained))
	return
}

// rawHeld sums and counts the held rows of the activity with plain SQL.
func (e env) rawHeld(t testing.TB, act string) (units, rows int64) {
	t.Helper()
	require.NoError(t, e.db.Raw("SELECT COALESCE(SUM(qty), 0), COUNT(*) FROM "+e.s.resv+" WHERE activity_id = ? AND state = 'R'", act).
		Row().Scan(&units, &rows))
	return
}

// rawHeldByUser returns user -> held units, with plain SQL.
func (e env) rawHeldByUser(t testing.TB, act string) map[string]int64 {
	t.Helper()
	rows, err := e.db.Raw("SELECT user_id, SUM(qty) FROM "+e.s.resv+" WHERE activity_id = ? AND state = 'R' GROUP BY user_id", act).Rows()
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var u string
		var q int64
		require.NoError(t, rows.Scan(&u, &q))
		out[u] = q
	}
	require.NoError(t, rows.Err())
	return out
}

// rawRows counts every reservation row (any state) with plain SQL.
func (e env) rawRows(t testing.TB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.db.Raw("SELECT COUNT(*) FROM "+e.s.resv).Row().Scan(&n))
	return n
}

// rawRow reads one reservation row with plain SQL.
func (e env) rawRow(t testing.TB, id string) (user string, qty int64, state string) {
	t.Helper()
	require.NoError(t, e.db.Raw("SELECT user_id, qty, state FROM "+e.s.resv+" WHERE request_id = ?", id).Row().Scan(&user, &qty, &state))
	return
}

// conserved checks remaining + held units = quota by counting rows.
func (e env) conserved(t testing.TB, act string) {
	t.Helper()
	quota, remaining, _ := e.rawPool(t, act)
	held, _ := e.rawHeld(t, act)
	require.Equal(t, quota, remaining+held, "remaining %d + held %d must equal quota %d", remaining, held, quota)
}

func req(act, user string, qty int64, id string) stock.Request {
	return stock.Request{Activity: act, User: user, Qty: qty, ReservationID: id}
}

func rid(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// uid returns the test user or activity ID of i in decimal, as a shop with
// numeric IDs passes it.
func uid[T ~int | ~int64](i T) string { return strconv.FormatInt(int64(i), 10) }

// uuidOf returns a UUID-shaped ID for i (the last group is i, so distinct i
// give distinct IDs).
func uuidOf[T ~int | ~int64](i T) string {
	x := uint64(i)*0x9e3779b97f4a7c15 + 0x6a09e667f3bcc909
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", uint32(x>>32), uint16(x>>16), uint16(x)&0xfff, uint16(x>>4)&0xfff, uint64(i)&0xffffffffffff)
}
