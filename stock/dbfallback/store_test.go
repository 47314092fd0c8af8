package dbfallback

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/utils/tests"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

func TestNewRejects(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	_, err := New(nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
	for _, p := range []string{"", "1abc", "a-b", "a b", "x;DROP", "abcdefghijabcdefghijabcdefghijabcdefghijX"} {
		_, err = New(db, WithTablePrefix(p))
		require.ErrorIs(t, err, ErrInvalidConfig, "prefix %q", p)
	}
	_, err = New(db, WithClock(nil))
	require.ErrorIs(t, err, ErrInvalidConfig, "nil clock")

	dummy, err := gorm.Open(tests.DummyDialector{}, &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	_, err = New(dummy)
	require.ErrorIs(t, err, ErrInvalidConfig)

	tx := db.Begin()
	require.NoError(t, tx.Error)
	defer tx.Rollback()
	_, err = New(tx)
	require.ErrorIs(t, err, ErrInvalidConfig)

	s, err := New(db, nil, WithTablePrefix("abcdefghijabcdefghijabcdefghijabcdefghij"))
	require.NoError(t, err, "a nil option is ignored; 40 bytes is allowed")
	pool, resv := s.pool, s.resv
	assert.Equal(t, "abcdefghijabcdefghijabcdefghijabcdefghijpool", pool)
	assert.Equal(t, "abcdefghijabcdefghijabcdefghijabcdefghijreservation", resv)
}

func TestOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := activity("31", 100, 0)
	require.NoError(t, e.s.Open(bg, a, 20))
	q, remaining, drained := e.rawPool(t, "31")
	assert.Equal(t, []int64{20, 20, 0}, []int64{q, remaining, drained})
	st, err := e.s.Stats(bg, "31")
	require.NoError(t, err)
	assert.Equal(t, Stats{Opened: true, Quota: 20, Remaining: 20, Limit: 1,
		Start: time.UnixMilli(a.Start.UnixMilli()), End: time.UnixMilli(a.End.UnixMilli())}, st, "limit 0 means 1")

	// Again, with a sale going on: a no-op.
	_, err = e.s.Reserve(bg, req("31", "1", 1, "o-1"))
	require.NoError(t, err)
	require.NoError(t, e.s.Open(bg, a, 20))
	_, remaining, _ = e.rawPool(t, "31")
	assert.Equal(t, int64(19), remaining)

	// Other terms.
	other := []stock.Activity{a, a, a, a}
	other[1].PerUserLimit = 2
	other[2].Start = a.Start.Add(time.Second)
	other[3].End = time.Time{}
	for i, o := range other {
		quota := int64(20)
		if i == 0 {
			quota = 21
		}
		require.ErrorIs(t, e.s.Open(bg, o, quota), ErrPoolConflict, "case %d", i)
	}
	q, remaining, _ = e.rawPool(t, "31")
	assert.Equal(t, []int64{20, 19}, []int64{q, remaining})

	// After a Drain the opened quota is still 20.
	n, err := e.s.Drain(bg, "31")
	require.NoError(t, err)
	assert.Equal(t, int64(19), n)
	require.NoError(t, e.s.Open(bg, a, 20))
	require.ErrorIs(t, e.s.Open(bg, a, 1), ErrPoolConflict)
	q, remaining, drained = e.rawPool(t, "31")
	assert.Equal(t, []int64{1, 0, 19}, []int64{q, remaining, drained})

	// Concurrent first Opens: one pool.
	var wg sync.WaitGroup
	b := activity("32", 10, 1)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, e.s.Open(bg, b, 10))
		}()
	}
	wg.Wait()
	q, remaining, _ = e.rawPool(t, "32")
	assert.Equal(t, []int64{10, 10}, []int64{q, remaining})
}

func TestOpenInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := activity("33", 10, 1)
	for name, tc := range map[string]struct {
		a     func(stock.Activity) stock.Activity
		quota int64
	}{
		"empty id":          {func(a stock.Activity) stock.Activity { a.ID = ""; return a }, 1},
		"id with ':'":       {func(a stock.Activity) stock.Activity { a.ID = "3:3"; return a }, 1},
		"id over 64 bytes":  {func(a stock.Activity) stock.Activity { a.ID = strings.Repeat("3", 65); return a }, 1},
		"negative quota":    {func(a stock.Activity) stock.Activity { return a }, -1},
		"quota above stock": {func(a stock.Activity) stock.Activity { return a }, 11},
		"negative limit":    {func(a stock.Activity) stock.Activity { a.PerUserLimit = -1; return a }, 1},
		"stock above 2^53":  {func(a stock.Activity) stock.Activity { a.Stock = 1 << 53; return a }, 1},
		"end before start":  {func(a stock.Activity) stock.Activity { a.End = a.Start.Add(-time.Second); return a }, 1},
		"end at start":      {func(a stock.Activity) stock.Activity { a.End = a.Start; return a }, 1},
		"start before 1970": {func(a stock.Activity) stock.Activity { a.Start = time.Unix(-5, 0); return a }, 1},
	} {
		require.ErrorIs(t, e.s.Open(bg, tc.a(a), tc.quota), stock.ErrInvalidArgument, name)
	}
	var n int64
	require.NoError(t, e.db.Raw("SELECT COUNT(*) FROM "+e.s.pool).Row().Scan(&n))
	assert.Equal(t, int64(0), n)
	require.NoError(t, e.s.Open(bg, activity("34", 5, 1), 0), "quota 0 is allowed")
	r, err := e.s.Reserve(bg, req("34", "1", 1, "z"))
	require.NoError(t, err)
	assert.Equal(t, stock.SoldOut, r.Status)
}

// Concurrent Drains hand the leftover out exactly once; the units held stay
// accounted for and a Release after the Drain is drained next time.
func TestDrainOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act, quota = "35", 20
	e.open(t, act, quota, 1)
	for i := range 7 {
		_, err := e.s.Reserve(bg, req(act, uid(i+1), 1, rid("d-%d", i)))
		require.NoError(t, err)
	}

	const n = 20
	got := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			got[i], err = e.s.Drain(bg, act)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	var sum int64
	nonzero := 0
	for _, g := range got {
		sum += g
		if g != 0 {
			nonzero++
		}
	}
	assert.Equal(t, int64(quota-7), sum)
	assert.Equal(t, 1, nonzero)
	q, remaining, drained := e.rawPool(t, act)
	assert.Equal(t, []int64{7, 0, 13}, []int64{q, remaining, drained})
	e.conserved(t, act)

	// Sold out for the fallback now.
	r, err := e.s.Reserve(bg, req(act, "100", 1, "after"))
	require.NoError(t, err)
	assert.Equal(t, stock.SoldOut, r.Status)

	// A released unit goes back to the pool, and to the next Drain.
	_, err = e.s.Release(bg, act, "d-0")
	require.NoError(t, err)
	e.conserved(t, act)
	u, err := e.s.Drain(bg, act)
	require.NoError(t, err)
	assert.Equal(t, int64(1), u)
	u, err = e.s.Drain(bg, act)
	require.NoError(t, err)
	assert.Equal(t, int64(0), u)
	q, remaining, drained = e.rawPool(t, act)
	assert.Equal(t, []int64{6, 0, 14}, []int64{q, remaining, drained})
	e.conserved(t, act)

	u, err = e.s.Drain(bg, "999")
	require.NoError(t, err)
	assert.Equal(t, int64(0), u, "no pool, nothing to drain")
	_, err = e.s.Drain(bg, "")
	require.ErrorIs(t, err, stock.ErrInvalidArgument)
}

func TestStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act = "36"
	a := e.open(t, act, 10, 3)
	_, err := e.s.Reserve(bg, req(act, "1", 3, "s-1"))
	require.NoError(t, err)
	_, err = e.s.Reserve(bg, req(act, "2", 2, "s-2"))
	require.NoError(t, err)
	_, err = e.s.Reserve(bg, req(act, "3", 1, "s-3"))
	require.NoError(t, err)
	_, err = e.s.Release(bg, act, "s-3")
	require.NoError(t, err)
	_, err = e.s.Release(bg, act, "tomb")
	require.NoError(t, err)
	_, err = e.s.Drain(bg, act)
	require.NoError(t, err)

	st, err := e.s.Stats(bg, act)
	require.NoError(t, err)
	assert.Equal(t, Stats{Opened: true, Quota: 5, Remaining: 0, HeldUnits: 5, Reservations: 2, Drained: 5, Limit: 3,
		Start: time.UnixMilli(a.Start.UnixMilli()), End: time.UnixMilli(a.End.UnixMilli())}, st)
	q, remaining, drained := e.rawPool(t, act)
	units, rows := e.rawHeld(t, act)
	assert.Equal(t, []int64{st.Quota, st.Remaining, st.Drained, st.HeldUnits, st.Reservations}, []int64{q, remaining, drained, units, rows})

	st, err = e.s.Stats(bg, "999")
	require.NoError(t, err)
	assert.Equal(t, Stats{}, st)
	_, err = e.s.Stats(bg, "a b")
	require.ErrorIs(t, err, stock.ErrInvalidArgument)
}

// Two prefixes, two independent sets of tables in one database.
func TestTablePrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other, err := New(e.db, WithClock(e.clock), WithTablePrefix("shop2_fb_"))
	require.NoError(t, err)
	require.NoError(t, other.AutoMigrate(bg))
	require.NoError(t, other.AutoMigrate(bg), "AutoMigrate twice")
	pool, resv := other.pool, other.resv
	assert.Equal(t, []string{"shop2_fb_pool", "shop2_fb_reservation"}, []string{pool, resv})

	e.open(t, "37", 5, 1)
	require.NoError(t, other.Open(bg, activity("37", 10, 1), 3))
	_, err = other.Reserve(bg, req("37", "1", 1, "p"))
	require.NoError(t, err)
	var q1, q2, r1, r2 int64
	require.NoError(t, e.db.Raw("SELECT quota, remaining FROM "+e.s.pool+" WHERE activity_id = 37").Row().Scan(&q1, &r1))
	require.NoError(t, e.db.Raw("SELECT quota, remaining FROM shop2_fb_pool WHERE activity_id = 37").Row().Scan(&q2, &r2))
	assert.Equal(t, []int64{5, 5, 3, 2}, []int64{q1, r1, q2, r2})
	assert.Equal(t, int64(0), e.rawRows(t))
}

// The CHECK constraints refuse a pool whose remaining would go negative or
// above its quota, whatever writes it.
func TestChecksEnforced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "38", 5, 1)
	require.Error(t, e.db.Exec("UPDATE "+e.s.pool+" SET remaining = -1 WHERE activity_id = 38").Error)
	require.Error(t, e.db.Exec("UPDATE "+e.s.pool+" SET remaining = 6 WHERE activity_id = 38").Error)
	_, remaining, _ := e.rawPool(t, "38")
	assert.Equal(t, int64(5), remaining)
}
