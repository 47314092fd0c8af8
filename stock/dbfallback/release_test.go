package dbfallback

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/stock"
)

// 50 concurrent releases of one reservation give its units back once.
func TestReleaseExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act, quota, n = "11", 10, 50
	e.open(t, act, quota, 3)
	_, err := e.s.Reserve(bg, req(act, "5", 3, "r"))
	require.NoError(t, err)
	e.clock.Add(time.Minute)

	results := make([]stock.ReleaseResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.s.Release(bg, act, "r")
		}()
	}
	wg.Wait()
	byStatus := map[stock.ReleaseStatus]int{}
	for i, r := range results {
		require.NoError(t, errs[i])
		byStatus[r.Status]++
		assert.Equal(t, int64(3), r.Qty)
		assert.Equal(t, "5", r.User)
		assert.Equal(t, int64(quota), r.Remaining)
		assert.Equal(t, r.Status == stock.ReleaseDone, (r.Status == stock.ReleaseDone))
	}
	assert.Equal(t, map[stock.ReleaseStatus]int{stock.ReleaseDone: 1, stock.ReleaseDuplicate: n - 1}, byStatus)
	_, remaining, _ := e.rawPool(t, act)
	assert.Equal(t, int64(quota), remaining)
	user, qty, state := e.rawRow(t, "r")
	assert.Equal(t, []any{"5", int64(3), "X"}, []any{user, qty, state})
	e.conserved(t, act)

	// A reservation released is answered Released on a retry of its Reserve.
	r, err := e.s.Reserve(bg, req(act, "5", 3, "r"))
	require.NoError(t, err)
	assert.Equal(t, stock.Result{Status: stock.Released, Remaining: quota, Limit: 3, Replayed: true,
		ReservedAt: time.UnixMilli(e.clock.Now().Add(-time.Minute).UnixMilli())}, r)
	_, remaining, _ = e.rawPool(t, act)
	assert.Equal(t, int64(quota), remaining)
}

// A Release of an unknown ID leaves a tombstone; the Reserve that arrives
// after it deducts nothing.
func TestReleaseTombstoneThenReserve(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act, quota = "12", 4
	e.open(t, act, quota, 1)

	rel, err := e.s.Release(bg, act, "late")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseResult{Status: stock.ReleaseUnknown, Remaining: quota}, rel)
	user, qty, state := e.rawRow(t, "late")
	assert.Equal(t, []any{"", int64(0), "X"}, []any{user, qty, state}, "a tombstone has no user")

	r, err := e.s.Reserve(bg, req(act, "9", 1, "late"))
	require.NoError(t, err)
	assert.Equal(t, stock.Released, r.Status)
	assert.True(t, r.Replayed)
	_, remaining, _ := e.rawPool(t, act)
	assert.Equal(t, int64(quota), remaining, "the tombstone deducted nothing")
	held, _ := e.rawHeld(t, act)
	assert.Equal(t, int64(0), held)

	rel, err = e.s.Release(bg, act, "late")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseDuplicate, rel.Status)
	got, ok, err := e.s.Lookup(bg, act, "late")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, stock.Tombstone, got.State)
}

// Reserve and Release of the same IDs race: whichever wins, nothing stays
// held and every unit is back.
func TestReleaseRacesReserve(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act, quota, n = "13", 30, 30
	e.open(t, act, quota, 1)
	var wg sync.WaitGroup
	reserved := make([]stock.Result, n)
	released := make([]stock.ReleaseResult, n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			var err error
			reserved[i], err = e.s.Reserve(bg, req(act, uid(i+1), 1, rid("race-%d", i)))
			assert.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			var err error
			released[i], err = e.s.Release(bg, act, rid("race-%d", i))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	for i := range n {
		switch released[i].Status {
		case stock.ReleaseDone: // Reserve came first
			assert.Equal(t, stock.Reserved, reserved[i].Status)
		case stock.ReleaseUnknown: // the tombstone came first
			assert.Equal(t, stock.Released, reserved[i].Status)
		default:
			t.Fatalf("release %d: %v", i, released[i].Status)
		}
	}
	held, _ := e.rawHeld(t, act)
	_, remaining, _ := e.rawPool(t, act)
	assert.Equal(t, int64(0), held)
	assert.Equal(t, int64(quota), remaining)
	assert.Equal(t, int64(n), e.rawRows(t))
}

func TestReleaseEdgeCases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "14", 5, 1)
	e.open(t, "15", 5, 1)
	_, err := e.s.Reserve(bg, req("14", "1", 1, "a"))
	require.NoError(t, err)

	// No pool: nothing written (a canceller may release in both stores).
	rel, err := e.s.Release(bg, "99", "nopool")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseResult{Status: stock.ReleaseNotLoaded}, rel)
	assert.Equal(t, int64(1), e.rawRows(t))

	// Another activity's reservation ID.
	_, err = e.s.Release(bg, "15", "a")
	require.ErrorIs(t, err, stock.ErrIDConflict)
	user, qty, state := e.rawRow(t, "a")
	assert.Equal(t, []any{"1", int64(1), "R"}, []any{user, qty, state})

	for _, tc := range []struct {
		act string
		id  string
	}{{"", "a"}, {"1:4", "a"}, {"{14}", "a"}, {strings.Repeat("1", 65), "a"}, {"14", ""}, {"14", string(make([]byte, 129))}} {
		_, err := e.s.Release(bg, tc.act, tc.id)
		require.ErrorIs(t, err, stock.ErrInvalidArgument, "%q %q", tc.act, tc.id)
	}
	assert.Equal(t, int64(1), e.rawRows(t))
}
