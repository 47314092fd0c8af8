package dbfallback

import (
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/stock"
)

// Reservations pages through the held reservations only, each once.
func TestReservationsPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act = "21"
	e.open(t, act, 100, 1)
	e.open(t, act+"-b", 100, 1)
	want := map[string]bool{}
	for i := range 25 {
		id := rid("p-%02d", i)
		_, err := e.s.Reserve(bg, req(act, uid(i+1), 1, id))
		require.NoError(t, err)
		want[id] = true
	}
	for i := range 5 { // released ones are not listed
		_, err := e.s.Release(bg, act, rid("p-%02d", i*5))
		require.NoError(t, err)
		delete(want, rid("p-%02d", i*5))
	}
	_, err := e.s.Release(bg, act, "tomb") // neither are tombstones
	require.NoError(t, err)
	_, err = e.s.Reserve(bg, req(act+"-b", "1", 1, "other")) // nor other activities
	require.NoError(t, err)

	got := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, next, err := e.s.Reservations(bg, act, cursor, 7)
		require.NoError(t, err)
		pages++
		require.LessOrEqual(t, len(page), 7)
		for _, r := range page {
			require.False(t, got[r.ID], "%s listed twice", r.ID)
			got[r.ID] = true
			assert.Equal(t, stock.Held, r.State)
			assert.Equal(t, int64(1), r.Qty)
			assert.True(t, stock.ValidID(r.User), r.User)
		}
		if next == "" {
			break
		}
		cursor = next
		require.Less(t, pages, 10)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 3, pages, "20 rows in pages of 7")
	units, rows := e.rawHeld(t, act)
	assert.Equal(t, []int64{20, 20}, []int64{units, rows})

	_, _, err = e.s.Reservations(bg, "a}", "", 1)
	require.ErrorIs(t, err, stock.ErrInvalidArgument)
}

func TestLookupStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act = "23"
	e.open(t, act, 10, 2)
	t0 := e.clock.Now()
	_, err := e.s.Reserve(bg, req(act, "3", 2, "held"))
	require.NoError(t, err)
	_, err = e.s.Reserve(bg, req(act, "4", 1, "freed"))
	require.NoError(t, err)
	e.clock.Add(time.Second)
	_, err = e.s.Release(bg, act, "freed")
	require.NoError(t, err)
	_, err = e.s.Release(bg, act, "tomb")
	require.NoError(t, err)

	ms := func(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
	for id, want := range map[string]stock.Reservation{
		"held":  {ID: "held", User: "3", Qty: 2, State: stock.Held, ReservedAt: ms(t0)},
		"freed": {ID: "freed", User: "4", Qty: 1, State: stock.Freed, ReservedAt: ms(t0), ReleasedAt: ms(t0.Add(time.Second))},
		"tomb":  {ID: "tomb", State: stock.Tombstone, ReservedAt: ms(t0.Add(time.Second))},
	} {
		got, ok, err := e.s.Lookup(bg, act, id)
		require.NoError(t, err)
		require.True(t, ok, id)
		assert.Equal(t, want, got, id)
	}
	_, ok, err := e.s.Lookup(bg, act, "none")
	require.NoError(t, err)
	assert.False(t, ok)
	_, ok, err = e.s.Lookup(bg, act+"-b", "held")
	require.NoError(t, err)
	assert.False(t, ok, "another activity's ID")
	_, _, err = e.s.Lookup(bg, act, "")
	require.ErrorIs(t, err, stock.ErrInvalidArgument)
}

// keys returns the sorted reservation IDs of rs.
func keys(rs []stock.Reservation) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	sort.Strings(out)
	return out
}
