package dbfallback

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

// 200 buyers race for a quota of 20: exactly 20 win, nothing is oversold,
// and the rows say so.
func TestReserveQuotaUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act, quota, buyers = "1", 20, 200
	e.open(t, act, quota, 1)

	results := make([]stock.Result, buyers)
	errs := make([]error, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.s.Reserve(bg, req(act, uuidOf(i+1), 1, rid("q-%d", i)))
		}()
	}
	wg.Wait()

	byStatus := map[stock.Status]int{}
	for i, r := range results {
		require.NoError(t, errs[i])
		byStatus[r.Status]++
		assert.False(t, r.Replayed)
		assert.False(t, r.Fallback, "the Deductor sets Fallback, not the Store")
	}
	assert.Equal(t, map[stock.Status]int{stock.Reserved: quota, stock.SoldOut: buyers - quota}, byStatus)
	q, remaining, _ := e.rawPool(t, act)
	held, rows := e.rawHeld(t, act)
	assert.Equal(t, int64(quota), q)
	assert.Equal(t, int64(0), remaining)
	assert.Equal(t, int64(quota), held)
	assert.Equal(t, int64(quota), rows)
	assert.Equal(t, int64(quota), e.rawRows(t), "denials write no row")
}

// Many concurrent requests per buyer, distinct reservation IDs: the per-user
// cap holds with cap 1 (qty 1) and cap 3 (qty 1..3).
func TestReserveCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int64
		qty   func(i int) int64
	}{
		{"cap 1", 1, func(int) int64 { return 1 }},
		{"cap 3, qty 1-3", 3, func(i int) int64 { return int64(i%3) + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			const act, quota, users, perUser = "2", 1000, 10, 20
			e.open(t, act, quota, tc.limit)

			type out struct {
				user string
				res  stock.Result
				qty  int64
				err  error
			}
			outs := make([]out, users*perUser)
			var wg sync.WaitGroup
			for u := range users {
				for i := range perUser {
					wg.Add(1)
					go func() {
						defer wg.Done()
						k := u*perUser + i
						q := tc.qty(i)
						r, err := e.s.Reserve(bg, req(act, uid(u+1), q, rid("c-%d-%d", u, i)))
						outs[k] = out{uid(u + 1), r, q, err}
					}()
				}
			}
			wg.Wait()

			won := map[string]int64{}
			for _, o := range outs {
				require.NoError(t, o.err)
				switch o.res.Status {
				case stock.Reserved:
					won[o.user] += o.qty
					assert.LessOrEqual(t, o.res.Held, tc.limit)
				case stock.LimitReached:
					assert.Greater(t, o.res.Held+o.qty, tc.limit, "refused although it fitted")
				default:
					t.Fatalf("unexpected status %v", o.res.Status)
				}
			}
			rows := e.rawHeldByUser(t, act)
			assert.Equal(t, won, rows, "the winners' units are exactly the rows")
			assert.Len(t, rows, users)
			for u, h := range rows {
				// Each user sent several qty-1 requests, and one of them
				// fits whenever the user holds less than the cap: every
				// user ends at the cap exactly, never above.
				assert.Equal(t, tc.limit, h, "user %s", u)
			}
			e.conserved(t, act)
		})
	}
}

// 100 concurrent retries of one reservation ID deduct once.
func TestReserveRetriesDeductOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const act, quota, retries = "3", 10, 100
	e.open(t, act, quota, 3)

	results := make([]stock.Result, retries)
	errs := make([]error, retries)
	var wg sync.WaitGroup
	for i := range retries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.s.Reserve(bg, req(act, "42", 2, "same-id"))
		}()
	}
	wg.Wait()

	fresh := 0
	for i, r := range results {
		require.NoError(t, errs[i])
		require.Equal(t, stock.Reserved, r.Status)
		assert.Equal(t, int64(2), r.Held, "the buyer holds the one reservation")
		if !r.Replayed {
			fresh++
		}
	}
	assert.Equal(t, 1, fresh, "one deduction, the rest replays")
	_, remaining, _ := e.rawPool(t, act)
	assert.Equal(t, int64(quota-2), remaining)
	assert.Equal(t, int64(1), e.rawRows(t))
	user, qty, state := e.rawRow(t, "same-id")
	assert.Equal(t, []any{"42", int64(2), "R"}, []any{user, qty, state})
}

func TestReserveResultFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "4", 5, 2)
	r, err := e.s.Reserve(bg, req("4", "7", 1, "f-1"))
	require.NoError(t, err)
	want := stock.Result{Status: stock.Reserved, Remaining: 4, Held: 1, Limit: 2, ReservedAt: time.UnixMilli(testenv.Epoch().UnixMilli())}
	assert.Equal(t, want, r)

	e.clock.Add(time.Second)
	r, err = e.s.Reserve(bg, req("4", "7", 1, "f-1"))
	require.NoError(t, err)
	want.Replayed = true // the first outcome, at the first time
	assert.Equal(t, want, r)

	r, err = e.s.Reserve(bg, req("4", "7", 1, "f-2"))
	require.NoError(t, err)
	assert.Equal(t, stock.Result{Status: stock.Reserved, Remaining: 3, Held: 2, Limit: 2,
		ReservedAt: time.UnixMilli(testenv.Epoch().Add(time.Second).UnixMilli())}, r)
}

// Every denial answers its status and writes nothing: the pool row and the
// reservation rows are byte-for-byte what they were.
func TestReserveDenialsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.open(t, "5", 3, 2)
	_, err := e.s.Reserve(bg, req("5", "1", 2, "held-1")) // user 1 holds 2 of 2
	require.NoError(t, err)
	_, err = e.s.Reserve(bg, req("5", "2", 1, "held-2")) // 0 left
	require.NoError(t, err)

	snapshot := func() string {
		var sb strings.Builder
		rows, err := e.db.Raw("SELECT activity_id, quota, remaining, drained, updated_ms FROM " + e.s.pool).Rows()
		require.NoError(t, err)
		for rows.Next() {
			var v [5]int64
			require.NoError(t, rows.Scan(&v[0], &v[1], &v[2], &v[3], &v[4]))
			sb.WriteString(rid("%v;", v))
		}
		require.NoError(t, rows.Close())
		rows, err = e.db.Raw("SELECT request_id, user_id, qty, state, created_ms, released_ms FROM " + e.s.resv + " ORDER BY request_id").Rows()
		require.NoError(t, err)
		for rows.Next() {
			var id, st string
			var u, q, c, r int64
			require.NoError(t, rows.Scan(&id, &u, &q, &st, &c, &r))
			sb.WriteString(rid("%s %d %d %s %d %d;", id, u, q, st, c, r))
		}
		require.NoError(t, rows.Close())
		return sb.String()
	}
	before := snapshot()
	e.clock.Add(time.Minute) // updated_ms would change if anything were written

	// Sold out (3 of 3 taken).
	r, err := e.s.Reserve(bg, req("5", "3", 1, "d-soldout"))
	require.NoError(t, err)
	assert.Equal(t, stock.SoldOut, r.Status)
	assert.Equal(t, int64(0), r.Remaining)
	// Limit reached is checked after stock, as in Redis: release a unit first.
	rel, err := e.s.Release(bg, "5", "held-2")
	require.NoError(t, err)
	require.Equal(t, stock.ReleaseDone, rel.Status)
	before = snapshot()
	r, err = e.s.Reserve(bg, req("5", "1", 1, "d-limit"))
	require.NoError(t, err)
	assert.Equal(t, stock.Result{Status: stock.LimitReached, Remaining: 1, Held: 2, Limit: 2, ReservedAt: r.ReservedAt}, r)
	// The window, on the Store's clock.
	e.clock.Set(a.Start.Add(-time.Millisecond))
	r, err = e.s.Reserve(bg, req("5", "3", 1, "d-early"))
	require.NoError(t, err)
	assert.Equal(t, stock.NotStarted, r.Status)
	assert.Equal(t, a.Start.Add(-time.Millisecond).UnixMilli(), r.ReservedAt.UnixMilli(), "the decision's time")
	e.clock.Set(a.End)
	r, err = e.s.Reserve(bg, req("5", "3", 1, "d-late"))
	require.NoError(t, err)
	assert.Equal(t, stock.Ended, r.Status, "End is exclusive")
	// No pool.
	r, err = e.s.Reserve(bg, req("99", "3", 1, "d-nopool"))
	require.NoError(t, err)
	assert.Equal(t, stock.Result{Status: stock.NotLoaded}, r)

	assert.Equal(t, before, snapshot(), "denials wrote something")

	// The window's edges are inclusive at Start.
	e.clock.Set(a.Start)
	r, err = e.s.Reserve(bg, req("5", "3", 1, "d-start"))
	require.NoError(t, err)
	assert.Equal(t, stock.Reserved, r.Status)
	e.conserved(t, "5")
}

func TestReserveInvalidInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "6", 10, 2)
	for _, tc := range []struct {
		name string
		req  stock.Request
	}{
		{"empty activity", req("", "1", 1, "x")},
		{"activity with ':'", req("6:1", "1", 1, "x")},
		{"activity over 64 bytes", req(strings.Repeat("6", 65), "1", 1, "x")},
		{"empty user", req("6", "", 1, "x")},
		{"user with '{'", req("6", "{1", 1, "x")},
		{"user with a space", req("6", "1 2", 1, "x")},
		{"unicode user", req("6", "用户", 1, "x")},
		{"qty 0", req("6", "1", 0, "x")},
		{"negative qty", req("6", "1", -1, "x")},
		{"qty above 2^53-1", req("6", "1", 1<<53, "x")},
		{"empty ID", req("6", "1", 1, "")},
		{"ID of 129 bytes", req("6", "1", 1, strings.Repeat("i", 129))},
		{"qty above the per-user limit", req("6", "1", 3, "x")},
	} {
		r, err := e.s.Reserve(bg, tc.req)
		require.ErrorIs(t, err, stock.ErrInvalidArgument, tc.name)
		assert.Equal(t, stock.Result{}, r, tc.name)
	}
	r, err := e.s.Reserve(bg, req("6", "1", 1, strings.Repeat("i", 128)))
	require.NoError(t, err, "128 bytes is allowed")
	assert.Equal(t, stock.Reserved, r.Status)
	_, remaining, _ := e.rawPool(t, "6")
	assert.Equal(t, int64(9), remaining)
	assert.Equal(t, int64(1), e.rawRows(t))
}

// A reservation ID reused for another user, quantity or activity is a conflict
// and changes nothing.
func TestReserveConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "7", 10, 3)
	e.open(t, "8", 10, 3)
	_, err := e.s.Reserve(bg, req("7", "1", 2, "c"))
	require.NoError(t, err)
	for _, r := range []stock.Request{req("7", "2", 2, "c"), req("7", "1", 1, "c"), req("8", "1", 2, "c")} {
		res, err := e.s.Reserve(bg, r)
		require.ErrorIs(t, err, stock.ErrIDConflict, "%+v", r)
		assert.Equal(t, stock.Result{}, res)
	}
	_, rem7, _ := e.rawPool(t, "7")
	_, rem8, _ := e.rawPool(t, "8")
	assert.Equal(t, []int64{8, 10}, []int64{rem7, rem8})
	assert.Equal(t, int64(1), e.rawRows(t))
}

// Reservation IDs are compared byte for byte (no case folding on MySQL).
func TestReserveIDsAreBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "9", 10, 5)
	for _, id := range []string{"abc", "ABC", "abc ", "\xff\x00bin"} {
		r, err := e.s.Reserve(bg, req("9", "1", 1, id))
		require.NoError(t, err, "%q", id)
		assert.Equal(t, stock.Reserved, r.Status, "%q", id)
		assert.False(t, r.Replayed, "%q", id)
	}
	_, rows := e.rawHeld(t, "9")
	assert.Equal(t, int64(4), rows)
	got, ok, err := e.s.Lookup(bg, "9", "\xff\x00bin")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "\xff\x00bin", got.ID)
}

// Buyers of several activities at once, with releases: each activity's
// pool balances on its own (activities share the reservation table and its
// index gaps, so InnoDB may pick a deadlock victim; it is run again).
func TestReserveManyActivities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const acts, quota, n = 5, 15, 300
	for a := 1; a <= acts; a++ {
		e.open(t, uid(60+a), quota, 2)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			act := uid(60 + i%acts + 1)
			id := rid("m-%d", i)
			r, err := e.s.Reserve(bg, req(act, uid(i%37+1), int64(i%2+1), id))
			if !assert.NoError(t, err) {
				return
			}
			if i%4 == 0 && (r.Status == stock.Reserved) {
				_, err := e.s.Release(bg, act, id)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	for a := 1; a <= acts; a++ {
		e.conserved(t, uid(60+a))
		for u, h := range e.rawHeldByUser(t, uid(60+a)) {
			assert.LessOrEqual(t, h, int64(2), "activity %d user %s", 60+a, u)
		}
	}
}
