package dbfallback

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

var _ Ledger = (*stock.Deductor)(nil)

// redisHeld counts the units held in the Redis ledger of the activity, by
// reading every ledger entry.
func redisHeld(t *testing.T, d *stock.Deductor, act string) (units int64, ids map[string]bool) {
	t.Helper()
	ids = map[string]bool{}
	var cursor uint64
	for {
		page, next, err := d.Reservations(bg, act, cursor, 100)
		require.NoError(t, err)
		for _, r := range page {
			if r.State == stock.Held && !ids[r.ID] {
				ids[r.ID] = true
				units += r.Qty
			}
		}
		if next == 0 {
			return units, ids
		}
		cursor = next
	}
}

// A sale of 50 with 20 carved out for the database: before, during and
// after a Redis outage the Deductor sells through whichever store is up,
// and the two stores together never sell more than 50; afterwards Drain
// hands back what the pool still has, once.
func TestDeductorFallbackAcrossOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rdb, m := testenv.Miniredis(t)
	// Without the sold-out cache every Reserve reaches Redis (or the
	// fallback), so the counts below are Redis's and the database's alone.
	d, err := stock.New(rdb, stock.WithKeyPrefix(testenv.Prefix(t)), stock.WithFallback(e.s.Reserve), stock.WithoutSoldOutCache())
	require.NoError(t, err)

	const act, total, quota = "41", 50, 20
	a := stock.Activity{ID: act, Stock: total, PerUserLimit: 1}
	require.NoError(t, e.s.Open(bg, a, quota))
	inRedis := a
	inRedis.Stock = total - quota // the carve-out
	_, err = d.Load(bg, inRedis)
	require.NoError(t, err)

	type outcome struct {
		id  string
		res stock.Result
		err error
	}
	burst := func(from, n int) []outcome {
		outs := make([]outcome, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := rid("u-%d", from+i)
				r, err := d.Reserve(bg, req(act, uid(from+i), 1, id))
				outs[i] = outcome{id, r, err}
			}()
		}
		wg.Wait()
		return outs
	}
	tally := func(outs []outcome, fallback bool) (reserved []string) {
		t.Helper()
		for _, o := range outs {
			require.NoError(t, o.err, o.id)
			require.Equal(t, fallback, o.res.Fallback, o.id)
			switch o.res.Status {
			case stock.Reserved:
				reserved = append(reserved, o.id)
			case stock.SoldOut:
			default:
				t.Fatalf("%s: %v", o.id, o.res.Status)
			}
		}
		return reserved
	}

	// Redis up: 12 buyers, all served by Redis.
	before := tally(burst(1, 12), false)
	require.Len(t, before, 12)

	// Redis down: 200 buyers, exactly the quota served by the database.
	m.SetError("LOADING Redis is loading the dataset in memory")
	during := tally(burst(1000, 200), true)
	require.Len(t, during, quota)
	q, remaining, _ := e.rawPool(t, act)
	held, rows := e.rawHeld(t, act)
	assert.Equal(t, []int64{quota, 0, quota, quota}, []int64{q, remaining, held, rows})
	for _, id := range during {
		_, _, state := e.rawRow(t, id)
		assert.Equal(t, "R", state, id)
	}

	// Redis back: 100 more buyers; Redis sells what it has left.
	m.SetError("")
	after := tally(burst(5000, 100), false)
	require.Len(t, after, total-quota-12)

	rUnits, rIDs := redisHeld(t, d, act)
	st, err := d.Stats(bg, act)
	require.NoError(t, err)
	dbHeld, _ := e.rawHeld(t, act)
	_, dbRemaining, _ := e.rawPool(t, act)
	assert.Equal(t, int64(total-quota), rUnits+st.Remaining, "Redis conserves its share")
	assert.Equal(t, int64(total), rUnits+dbHeld, "both stores sold everything, nothing twice")
	assert.Equal(t, int64(0), st.Remaining+dbRemaining)
	for _, id := range during {
		assert.False(t, rIDs[id], "%s held in Redis too", id)
	}
	for _, id := range append(before, after...) {
		_, ok, err := e.s.Lookup(bg, act, id)
		require.NoError(t, err)
		assert.False(t, ok, "%s in the database too", id)
	}

	// Four fallback orders are cancelled; the canceller releases in both
	// stores (it need not know which one holds the reservation).
	for _, id := range during[:4] {
		rr, err := d.Release(bg, act, id)
		require.NoError(t, err)
		assert.Equal(t, stock.ReleaseUnknown, rr.Status, "Redis never held %s", id)
		dr, err := e.s.Release(bg, act, id)
		require.NoError(t, err)
		assert.Equal(t, stock.ReleaseDone, dr.Status, id)
	}
	// A retry of a cancelled request through Redis gets nothing: the
	// Redis tombstone answers it.
	r, err := d.Reserve(bg, req(act, "1000", 1, during[0]))
	require.NoError(t, err)
	assert.Equal(t, stock.Released, r.Status)

	// Drain hands the four units out once, for the Redis sale.
	var wg sync.WaitGroup
	drained := make([]int64, 8)
	for i := range drained {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			drained[i], err = e.s.Drain(bg, act)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	var sum int64
	for _, n := range drained {
		sum += n
	}
	assert.Equal(t, int64(4), sum)
	q, remaining, drainedCol := e.rawPool(t, act)
	dbHeld, _ = e.rawHeld(t, act)
	rUnits, _ = redisHeld(t, d, act)
	st, err = d.Stats(bg, act)
	require.NoError(t, err)
	assert.Equal(t, []int64{quota - 4, 0, 4, quota - 4}, []int64{q, remaining, drainedCol, dbHeld})
	assert.Equal(t, int64(total), rUnits+st.Remaining+dbHeld+remaining+drainedCol, "every unit is in one place")
}

// A request that holds units in both stores (Redis ran the script, then
// timed out, and the Deductor asked the database) is found by Overlap and
// released in the database.
func TestOverlap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rdb, _ := testenv.Miniredis(t)
	d, err := stock.New(rdb, stock.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	const act = "42"
	a := stock.Activity{ID: act, Stock: 10, PerUserLimit: 1}
	require.NoError(t, e.s.Open(bg, a, 4))
	a.Stock -= 4
	_, err = d.Load(bg, a)
	require.NoError(t, err)

	for i, id := range []string{"both-1", "redis-only", "both-2"} {
		r, err := d.Reserve(bg, req(act, uid(i+1), 1, id))
		require.NoError(t, err)
		require.True(t, (r.Status == stock.Reserved))
	}
	for i, id := range []string{"both-1", "db-only", "both-2"} {
		r, err := e.s.Reserve(bg, req(act, uid(i+1), 1, id))
		require.NoError(t, err)
		require.True(t, (r.Status == stock.Reserved))
	}
	_, err = d.Release(bg, act, "both-2") // released in Redis: no longer double
	require.NoError(t, err)

	dup, err := e.s.Overlap(bg, d, act)
	require.NoError(t, err)
	assert.Equal(t, []string{"both-1"}, keys(dup))
	for _, r := range dup {
		rr, err := e.s.Release(bg, act, r.ID)
		require.NoError(t, err)
		assert.True(t, (rr.Status == stock.ReleaseDone))
	}
	dup, err = e.s.Overlap(bg, d, act)
	require.NoError(t, err)
	assert.Empty(t, dup)
	held, _ := e.rawHeld(t, act)
	assert.Equal(t, int64(2), held, "db-only and both-2 stay held in the database")
	_, err = e.s.Overlap(bg, nil, act)
	require.Error(t, err)
}
