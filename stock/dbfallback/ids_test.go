package dbfallback

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/stock"
)

// The model of the release before string IDs: BIGINT activity_id and
// user_id, a tombstone's user_id 0.
type oldPoolRow struct {
	ActivityID   int64 `gorm:"column:activity_id;primaryKey;autoIncrement:false"`
	Quota        int64 `gorm:"column:quota;not null;check:quota >= remaining"`
	Remaining    int64 `gorm:"column:remaining;not null;check:remaining >= 0"`
	Drained      int64 `gorm:"column:drained;not null;default:0"`
	PerUserLimit int64 `gorm:"column:per_user_limit;not null"`
	StartMs      int64 `gorm:"column:start_ms;not null;default:0"`
	EndMs        int64 `gorm:"column:end_ms;not null;default:0"`
	UpdatedMs    int64 `gorm:"column:updated_ms;not null"`
}

type oldReservationRow struct {
	ReservationID reservationID `gorm:"column:request_id;primaryKey;index:,composite:held,priority:3"`
	ActivityID    int64         `gorm:"column:activity_id;not null;index:,composite:user,priority:1;index:,composite:held,priority:1"`
	UserID        int64         `gorm:"column:user_id;not null;index:,composite:user,priority:2"`
	Qty           int64         `gorm:"column:qty;not null"`
	State         string        `gorm:"column:state;type:char(1);not null;index:,composite:held,priority:2"`
	CreatedMs     int64         `gorm:"column:created_ms;not null"`
	ReleasedMs    int64         `gorm:"column:released_ms;not null;default:0"`
}

// idColumnTypes returns the database type of activity_id (both tables) and
// user_id.
func idColumnTypes(t *testing.T, e env) []string {
	t.Helper()
	var out []string
	for _, c := range []struct{ table, col string }{{e.s.pool, "activity_id"}, {e.s.resv, "activity_id"}, {e.s.resv, "user_id"}} {
		cols, err := e.db.Migrator().ColumnTypes(c.table)
		require.NoError(t, err)
		for _, ct := range cols {
			if ct.Name() == c.col {
				out = append(out, strings.ToLower(ct.DatabaseTypeName()))
			}
		}
	}
	require.Len(t, out, 3)
	return out
}

// TestAutoMigrateFromBigintIDs: tables of the release with BIGINT IDs, with
// rows in them, are altered by AutoMigrate to VARCHAR(64) ID columns; the
// rows keep their IDs in decimal, so a shop passing strconv.FormatInt of
// its numeric IDs finds its pool, its buyers' held units, its reservations
// and tombstones as before; a second AutoMigrate changes nothing.
func TestAutoMigrateFromBigintIDs(t *testing.T) {
	t.Parallel()
	base := newEnv(t) // a fresh database; the tables below are other ones
	db := base.db
	s, err := New(db, WithTablePrefix("old_"), WithClock(base.clock))
	require.NoError(t, err)
	e := env{s: s, db: db}
	require.NoError(t, db.Table(s.pool).AutoMigrate(&oldPoolRow{}))
	require.NoError(t, db.Table(s.resv).AutoMigrate(&oldReservationRow{}))
	for _, typ := range idColumnTypes(t, e) {
		require.Contains(t, typ, "int", "the old schema")
	}
	now := base.clock.Now().UnixMilli()
	require.NoError(t, db.Exec("INSERT INTO "+s.pool+" (activity_id, quota, remaining, drained, per_user_limit, start_ms, end_ms, updated_ms)"+
		" VALUES (7, 5, 4, 0, 1, 0, 0, ?)", now).Error)
	require.NoError(t, db.Exec("INSERT INTO "+s.resv+" ("+rowColumns+") VALUES ('old-1', 7, 5, 1, 'R', ?, 0), ('old-t', 7, 0, 0, 'X', ?, ?)",
		now, now, now).Error)

	require.NoError(t, s.AutoMigrate(bg))
	types := idColumnTypes(t, e)
	for _, typ := range types {
		assert.Contains(t, typ, "varchar", "AutoMigrate altered the ID columns")
	}

	held, err := s.Held(bg, "7", "5")
	require.NoError(t, err)
	assert.EqualValues(t, 1, held, "the old row counts for user 5")
	r, ok, err := s.Lookup(bg, "7", "old-1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, stock.Reservation{ID: "old-1", User: "5", Qty: 1, State: stock.Held, ReservedAt: r.ReservedAt}, r)
	r, ok, err = s.Lookup(bg, "7", "old-t")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, stock.Tombstone, r.State)
	assert.Empty(t, r.User, "a tombstone has no user, whatever the old column held")

	res, err := s.Reserve(bg, req("7", "5", 1, "new-1"))
	require.NoError(t, err)
	assert.Equal(t, stock.LimitReached, res.Status, "the cap sees the old reservation")
	res, err = s.Reserve(bg, req("7", uuidOf(1), 1, "new-2"))
	require.NoError(t, err)
	assert.Equal(t, stock.Reserved, res.Status)
	res, err = s.Reserve(bg, req("7", "6", 1, "old-t"))
	require.NoError(t, err)
	assert.Equal(t, stock.Released, res.Status, "the old tombstone still stops a late reserve")
	rr, err := s.Release(bg, "7", "old-1")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseResult{Status: stock.ReleaseDone, Qty: 1, User: "5", Remaining: 4}, rr)
	e.conserved(t, "7")
	byUser := e.rawHeldByUser(t, "7")
	assert.Equal(t, map[string]int64{uuidOf(1): 1}, byUser)

	require.NoError(t, s.AutoMigrate(bg))
	assert.Equal(t, types, idColumnTypes(t, e), "a second AutoMigrate changes nothing")
	e.conserved(t, "7")
}

// TestIDsCompareByteForByte: IDs that differ only in case are two users and
// two activities, as they are two keys in Redis (a case-insensitive
// collation would merge them on MySQL).
func TestIDsCompareByteForByte(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "Sale", 10, 1)
	e.open(t, "sale", 10, 1)
	for _, a := range []string{"Sale", "sale"} {
		for _, u := range []string{"abc", "ABC", "Abc"} {
			res, err := e.s.Reserve(bg, req(a, u, 1, a+"-"+u))
			require.NoError(t, err)
			assert.Equal(t, stock.Reserved, res.Status, "%s %s", a, u)
		}
		assert.Equal(t, map[string]int64{"abc": 1, "ABC": 1, "Abc": 1}, e.rawHeldByUser(t, a))
		e.conserved(t, a)
		q, remaining, _ := e.rawPool(t, a)
		assert.Equal(t, []int64{10, 7}, []int64{q, remaining})
	}
	held, err := e.s.Held(bg, "SALE", "abc")
	require.NoError(t, err)
	assert.Zero(t, held)
	_, ok, err := e.s.Lookup(bg, "SALE", "Sale-abc")
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestHostileIDsRefused: every call refuses a hostile ID with the stock
// sentinel before any SQL, writes nothing, and does not echo a long ID.
func TestHostileIDsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.open(t, "1", 10, 2)
	long := strings.Repeat("9", 4096)
	for _, id := range []string{"", "1:2", "{1}", "a}", "1 2", "é", "\x00", strings.Repeat("7", stock.MaxIDLen+1), long} {
		check := func(call string, err error, sentinel error) {
			t.Helper()
			require.ErrorIs(t, err, sentinel, "%s %.20q", call, id)
			if len(id) > stock.MaxIDLen {
				assert.NotContains(t, err.Error(), id[:stock.MaxIDLen+1], call)
			}
		}
		_, err := e.s.Reserve(bg, req("1", id, 1, "r"))
		check("Reserve user", err, stock.ErrInvalidArgument)
		_, err = e.s.Reserve(bg, req(id, "1", 1, "r"))
		check("Reserve", err, stock.ErrInvalidArgument)
		_, err = e.s.Release(bg, id, "r")
		check("Release", err, stock.ErrInvalidArgument)
		_, _, err = e.s.Lookup(bg, id, "r")
		check("Lookup", err, stock.ErrInvalidArgument)
		_, _, err = e.s.Reservations(bg, id, "", 10)
		check("Reservations", err, stock.ErrInvalidArgument)
		_, err = e.s.Held(bg, id, "1")
		check("Held", err, stock.ErrInvalidArgument)
		_, err = e.s.Held(bg, "1", id)
		check("Held user", err, stock.ErrInvalidArgument)
		_, err = e.s.Drain(bg, id)
		check("Drain", err, stock.ErrInvalidArgument)
		_, err = e.s.Stats(bg, id)
		check("Stats", err, stock.ErrInvalidArgument)
		_, err = e.s.Overlap(bg, nopLedger{}, id)
		check("Overlap", err, stock.ErrInvalidArgument)
		b := a
		b.ID = id
		check("Open", e.s.Open(bg, b, 1), stock.ErrInvalidArgument)
	}
	assert.Zero(t, e.rawRows(t))
	var pools int64
	require.NoError(t, e.db.Raw("SELECT COUNT(*) FROM "+e.s.pool).Row().Scan(&pools))
	assert.EqualValues(t, 1, pools)
}

// nopLedger is a Ledger that holds nothing.
type nopLedger struct{}

func (nopLedger) Lookup(context.Context, string, string) (stock.Reservation, bool, error) {
	return stock.Reservation{}, false, nil
}
