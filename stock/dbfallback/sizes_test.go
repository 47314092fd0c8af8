package dbfallback

import (
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

// sizedSale is a sale in three sizes: S 5 units, M 8 (2 per buyer), L 3,
// at most 2 units per buyer over all of them.
func sizedSale(id string) stock.Activity {
	a := activity(id, 0, 2)
	a.Variants = []stock.Variant{{ID: "S", Stock: 5, PerUserLimit: 1}, {ID: "M", Stock: 8}, {ID: "L", Stock: 3, PerUserLimit: 1}}
	return a
}

// sizeIDs are the pool IDs of the sizes of a.
func sizeIDs(a stock.Activity) []string {
	out := make([]string, len(a.Variants))
	for i, v := range a.Variants {
		out[i] = stock.VariantOf(a.ID, v.ID)
	}
	return out
}

// rawHeldByUserAll returns user -> units held over the given pools, with
// plain SQL.
func (e env) rawHeldByUserAll(t testing.TB, acts []string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, a := range acts {
		for u, n := range e.rawHeldByUser(t, a) {
			out[u] += n
		}
	}
	return out
}

// Open of a sale in sizes: one pool per size of min(quota, its stock)
// units, the size's limit (or the sale's), and the sale's own row with no
// units; counted from the rows. Opening again with the same terms changes
// nothing; other terms, or a plain pool under the same ID, conflict.
func TestOpenSizes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := sizedSale("70")
	require.NoError(t, e.s.Open(bg, a, 6))
	for _, c := range []struct {
		id           string
		quota, limit int64
	}{{"70/S", 5, 1}, {"70/M", 6, 2}, {"70/L", 3, 1}} {
		q, rem, dr := e.rawPool(t, c.id)
		assert.Equal(t, []int64{c.quota, c.quota, 0}, []int64{q, rem, dr}, c.id)
		st, err := e.s.Stats(bg, c.id)
		require.NoError(t, err)
		assert.Equal(t, Stats{Opened: true, Quota: c.quota, Remaining: c.quota, Limit: c.limit, Start: st.Start, End: st.End}, st, c.id)
	}
	q, rem, _ := e.rawPool(t, "70")
	assert.Equal(t, []int64{0, 0}, []int64{q, rem}, "the sale's own row holds no units")
	st, err := e.s.Stats(bg, "70")
	require.NoError(t, err)
	assert.Equal(t, []int64{14, 14, 2}, []int64{st.Quota, st.Remaining, st.Limit}, "the sale's stats sum its sizes")

	// Idempotent, also after a drain of one size.
	n, err := e.s.Drain(bg, "70/L")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	require.NoError(t, e.s.Open(bg, a, 6))

	conflicts := map[string]func() error{
		"another quota": func() error { return e.s.Open(bg, a, 7) }, // M would be 7
		"another sale limit": func() error {
			b := sizedSale("70")
			b.PerUserLimit = 3
			return e.s.Open(bg, b, 6)
		},
		"another size limit": func() error {
			b := sizedSale("70")
			b.Variants[1].PerUserLimit = 1
			return e.s.Open(bg, b, 6)
		},
		"a size fewer": func() error {
			b := sizedSale("70")
			b.Variants = b.Variants[:2]
			return e.s.Open(bg, b, 6)
		},
		"another size": func() error {
			b := sizedSale("70")
			b.Variants[2].ID = "XL"
			return e.s.Open(bg, b, 6)
		},
		"plain over sizes": func() error { return e.s.Open(bg, activity("70", 16, 2), 6) },
		"sizes over plain": func() error {
			e.open(t, "71", 4, 1)
			return e.s.Open(bg, sizedSale("71"), 6)
		},
	}
	for name, f := range conflicts {
		assert.ErrorIs(t, f(), ErrPoolConflict, name)
	}
	var rows int64
	require.NoError(t, e.db.Raw("SELECT COUNT(*) FROM "+e.s.pool).Row().Scan(&rows))
	assert.EqualValues(t, 5, rows, "the sale, its three sizes and 71: nothing written by a conflict")

	// Quota per size, capped at the size's stock: 8 and 100 are the same pools.
	b := sizedSale("72")
	require.NoError(t, e.s.Open(bg, b, 8))
	require.NoError(t, e.s.Open(bg, b, 100))
	for _, id := range sizeIDs(b) {
		q, _, _ := e.rawPool(t, id)
		v := b.Variants[strings.Index("SML", id[len(id)-1:])]
		assert.Equal(t, v.Stock, q, id)
	}
}

// Bad input to Open of a sale in sizes is refused with a clear error and
// writes nothing.
func TestOpenSizesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mod := func(f func(a *stock.Activity)) stock.Activity {
		a := sizedSale("73")
		f(&a)
		return a
	}
	for name, c := range map[string]struct {
		a     stock.Activity
		quota int64
		want  string
	}{
		"negative quota":   {sizedSale("73"), -1, "quota -1"},
		"size given twice": {mod(func(a *stock.Activity) { a.Variants[1].ID = "S" }), 1, "given twice"},
		"bad size ID":      {mod(func(a *stock.Activity) { a.Variants[0].ID = "S/1" }), 1, "size ID"},
		"negative stock":   {mod(func(a *stock.Activity) { a.Variants[0].Stock = -1 }), 1, "stock -1"},
		"negative limit":   {mod(func(a *stock.Activity) { a.Variants[0].PerUserLimit = -1 }), 1, "per-user limit -1"},
		"stock not sum":    {mod(func(a *stock.Activity) { a.Stock = 15 }), 1, "sum 16"},
		"sharded":          {mod(func(a *stock.Activity) { a.Shards = 2 }), 1, "sharded"},
		"bad sale ID":      {mod(func(a *stock.Activity) { a.ID = "73/x" }), 1, "activity ID"},
	} {
		err := e.s.Open(bg, c.a, c.quota)
		require.ErrorIs(t, err, stock.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
	var rows int64
	require.NoError(t, e.db.Raw("SELECT COUNT(*) FROM "+e.s.pool).Row().Scan(&rows))
	assert.Zero(t, rows)
	require.NoError(t, e.s.Open(bg, mod(func(a *stock.Activity) { a.Stock = 16 }), 0), "Stock may be the sizes' sum; a quota of 0 opens empty pools")
}

// A crowd buys sizes at once, with some cancellations: no size sells more
// than its pool, remaining + held = quota in every size, no buyer holds
// more of a size than its limit nor more of the sale than the sale's
// limit, and every Reserved answer is a held row. Counted from the rows.
func TestSizesUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := sizedSale("74")
	require.NoError(t, e.s.Open(bg, a, 100))
	ids := sizeIDs(a)
	const buyers, tries = 24, 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]map[string]int64{} // size -> user -> units
	for _, id := range ids {
		won[id] = map[string]int64{}
	}
	for b := range buyers {
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				user, size := uuidOf(b), ids[(b+i)%len(ids)]
				id := rid("h-%d-%d", b, i)
				r, err := e.s.Reserve(bg, req(size, user, 1, id))
				if !assert.NoError(t, err) {
					return
				}
				if r.Status != stock.Reserved {
					assert.Contains(t, []stock.Status{stock.SoldOut, stock.LimitReached}, r.Status)
					return
				}
				mu.Lock()
				won[size][user]++
				mu.Unlock()
				if i%3 == 0 { // a cancellation gives the unit back
					rr, err := e.s.Release(bg, size, id)
					if assert.NoError(t, err) && assert.Equal(t, stock.ReleaseDone, rr.Status) {
						mu.Lock()
						won[size][user]--
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	perSale := map[string]int64{}
	for i, id := range ids {
		for u, n := range won[id] {
			if n == 0 {
				delete(won[id], u)
			}
			perSale[u] += n
		}
		assert.Equal(t, won[id], e.rawHeldByUser(t, id), "%s: every Reserved answer is one held row", id)
		e.conserved(t, id)
		held, _ := e.rawHeld(t, id)
		assert.LessOrEqual(t, held, a.Variants[i].Stock, "%s: no oversell", id)
		lim := a.Variants[i].PerUserLimit
		if lim == 0 {
			lim = a.PerUserLimit
		}
		for u, n := range e.rawHeldByUser(t, id) {
			assert.LessOrEqual(t, n, lim, "%s: user %s over the size's limit", id, u)
		}
	}
	all := e.rawHeldByUserAll(t, ids)
	for u, n := range all {
		assert.LessOrEqual(t, n, a.PerUserLimit, "user %s over the sale's limit", u)
		got, err := e.s.Held(bg, a.ID, u)
		require.NoError(t, err)
		assert.Equal(t, n, got, "Held of the sale sums its sizes")
	}
	var sold int64
	for _, n := range all {
		sold += n
	}
	assert.LessOrEqual(t, sold, int64(16))
	assert.Positive(t, sold)
}

// Per size: a retried Reserve replays its outcome; the ID under another
// size conflicts; Release gives back once; a Release that comes first
// leaves a tombstone in that size; Drain takes each size's units out once;
// the sale's own ID sells nothing and drains nothing.
func TestSizesReplayReleaseDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := sizedSale("75")
	require.NoError(t, e.s.Open(bg, a, 4))
	r, err := e.s.Reserve(bg, req("75/M", "u1", 2, "m-1"))
	require.NoError(t, err)
	require.Equal(t, stock.Reserved, r.Status)
	assert.Equal(t, []int64{2, 2, 2}, []int64{r.Remaining, r.Held, r.Limit})
	again, err := e.s.Reserve(bg, req("75/M", "u1", 2, "m-1"))
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, stock.Reserved, again.Status)
	_, err = e.s.Reserve(bg, req("75/S", "u1", 2, "m-1"))
	require.ErrorIs(t, err, stock.ErrIDConflict, "the same ID in another size")
	q, rem, _ := e.rawPool(t, "75/M")
	assert.Equal(t, []int64{4, 2}, []int64{q, rem}, "the replay deducted nothing")

	// The sale's limit (2) over its sizes: u1 holds 2 of M.
	r, err = e.s.Reserve(bg, req("75/S", "u1", 1, "s-1"))
	require.NoError(t, err)
	assert.Equal(t, stock.LimitReached, r.Status, "the sale's cap across sizes")
	assert.Equal(t, []int64{0, 1}, []int64{r.Held, r.Limit}, "Held and Limit are the size's")
	// The size's limit (1) within the sale's.
	_, err = e.s.Reserve(bg, req("75/S", "u2", 2, "s-2"))
	require.ErrorIs(t, err, stock.ErrInvalidArgument, "qty above the size's limit")
	r, err = e.s.Reserve(bg, req("75/S", "u2", 1, "s-2"))
	require.NoError(t, err)
	require.Equal(t, stock.Reserved, r.Status)
	r, err = e.s.Reserve(bg, req("75/S", "u2", 1, "s-3"))
	require.NoError(t, err)
	assert.Equal(t, stock.LimitReached, r.Status, "the size's cap")

	// The sale's own ID is no pool.
	r, err = e.s.Reserve(bg, req("75", "u3", 1, "p-1"))
	require.NoError(t, err)
	assert.Equal(t, stock.NotLoaded, r.Status)
	rr, err := e.s.Release(bg, "75", "p-1")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseNotLoaded, rr.Status)
	_, err = e.s.Drain(bg, "75")
	require.ErrorIs(t, err, stock.ErrInvalidArgument)
	r, err = e.s.Reserve(bg, req("75/XL", "u3", 1, "x-1"))
	require.NoError(t, err)
	assert.Equal(t, stock.NotLoaded, r.Status, "no such size")

	// Release once; a release first leaves a tombstone in the size.
	rr, err = e.s.Release(bg, "75/M", "m-1")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseResult{Status: stock.ReleaseDone, Qty: 2, User: "u1", Remaining: 4}, rr)
	rr, err = e.s.Release(bg, "75/M", "m-1")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseDuplicate, rr.Status)
	_, err = e.s.Release(bg, "75/S", "m-1")
	require.ErrorIs(t, err, stock.ErrIDConflict)
	rr, err = e.s.Release(bg, "75/L", "l-late")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseUnknown, rr.Status)
	r, err = e.s.Reserve(bg, req("75/L", "u4", 1, "l-late"))
	require.NoError(t, err)
	assert.Equal(t, stock.Released, r.Status, "the tombstone answers the late reserve")
	lk, ok, err := e.s.Lookup(bg, "75/L", "l-late")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, stock.Tombstone, lk.State)
	for _, id := range sizeIDs(a) {
		e.conserved(t, id)
	}
	page, next, err := e.s.Reservations(bg, "75/S", "", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"s-2"}, keys(page))
	assert.Empty(t, next)
	page, _, err = e.s.Reservations(bg, "75", "", 10)
	require.NoError(t, err)
	assert.Empty(t, page, "the sale's own ID holds no reservations")

	// Drain each size once, concurrently; the units left are each size's.
	want := map[string]int64{"75/S": 3, "75/M": 4, "75/L": 3}
	got := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 3 {
		for id := range want {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := e.s.Drain(bg, id)
				assert.NoError(t, err)
				mu.Lock()
				got[id] += n
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	assert.Equal(t, want, got)
	for id, n := range want {
		q, rem, dr := e.rawPool(t, id)
		held, _ := e.rawHeld(t, id)
		assert.Equal(t, []int64{0, n}, []int64{rem, dr}, id)
		assert.Equal(t, q, held, id)
	}
	st, err := e.s.Stats(bg, "75")
	require.NoError(t, err)
	assert.Equal(t, Stats{Opened: true, Quota: 1, HeldUnits: 1, Reservations: 1, Drained: 10, Limit: 2, Start: st.Start, End: st.End}, st)
	held, err := e.s.Held(bg, "75", "u2")
	require.NoError(t, err)
	assert.EqualValues(t, 1, held)
}

// A stock.Deductor whose Redis is unreachable sells each size of a sale in
// sizes from its pool (the Deductor passes the size's "<sale>/<size>"):
// per size exactly its pool, the sale's limit held across the sizes; once
// Redis is back the Deductor sells Redis's share of each size and the two
// stores together hold each size's stock, nothing twice. Overlap and Drain
// work per size.
func TestDeductorFallbackSizes(t *testing.T) {
	t.Parallel()
	for _, outage := range []string{"closed", "bad address"} {
		t.Run(outage, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a := sizedSale("76")
			a.PerUserLimit = 3
			a.Start, a.End = time.Time{}, time.Time{} // Redis decides on its own clock
			const quota = 2                           // per size: S 2, M 2, L 2
			require.NoError(t, e.s.Open(bg, a, quota))
			inRedis := a
			inRedis.Variants = append([]stock.Variant(nil), a.Variants...)
			for i := range inRedis.Variants {
				inRedis.Variants[i].Stock -= quota // the carve-out, per size
			}
			rdb, m := testenv.Miniredis(t)
			prefix := testenv.Prefix(t)
			up, err := stock.New(rdb, stock.WithKeyPrefix(prefix), stock.WithoutSoldOutCache())
			require.NoError(t, err)
			_, err = up.Load(bg, inRedis)
			require.NoError(t, err)

			// The deductor of the outage has a client of its own: the
			// one of up is not worn by its failed dials.
			addr := m.Addr()
			switch outage {
			case "closed":
				m.Close()
			case "bad address":
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				addr = ln.Addr().String()
				require.NoError(t, ln.Close()) // nothing listens there now
			}
			down := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
			t.Cleanup(func() { _ = down.Close() })
			d, err := stock.New(down, stock.WithKeyPrefix(prefix), stock.WithFallback(e.s.Reserve), stock.WithoutSoldOutCache())
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(bg, 30*time.Second)
			defer cancel()
			ids := sizeIDs(a)
			var wg sync.WaitGroup
			var mu sync.Mutex
			sold := map[string]int64{}
			byUser := map[string]int64{}
			for b := range 12 {
				for i, size := range ids {
					wg.Add(1)
					go func() {
						defer wg.Done()
						user := uid(b % 4) // 4 buyers, 9 requests each, 3 per buyer over the sale
						r, err := d.Reserve(ctx, req(size, user, 1, rid("f-%d-%d", b, i)))
						if !assert.NoError(t, err) {
							return
						}
						assert.True(t, r.Fallback, "answered by the pool")
						if r.Status == stock.Reserved {
							mu.Lock()
							sold[size]++
							byUser[user]++
							mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			assert.Equal(t, map[string]int64{"76/S": 2, "76/M": 2, "76/L": 2}, sold, "each size sold its pool")
			for u, n := range byUser {
				assert.LessOrEqual(t, n, int64(3), "user %s", u)
			}
			assert.Equal(t, byUser, e.rawHeldByUserAll(t, ids))
			for _, id := range ids {
				e.conserved(t, id)
			}
			if outage == "closed" {
				require.NoError(t, m.Restart())
			}
			// Redis back (the deductor that reached it): Redis sells its share.
			var inR int64
			for b := range 20 {
				for _, size := range ids {
					r, err := up.Reserve(bg, req(size, uid(100+b), 1, rid("r-%d-%s", b, size)))
					require.NoError(t, err)
					if r.Status == stock.Reserved {
						inR++
					}
				}
			}
			assert.EqualValues(t, 16-3*quota, inR, "Redis sold its share of every size")
			for i, id := range ids {
				rUnits, _ := redisHeld(t, up, id)
				dbHeld, _ := e.rawHeld(t, id)
				assert.Equal(t, a.Variants[i].Stock, rUnits+dbHeld, "%s: both stores sold its stock, nothing twice", id)
			}
			for _, id := range ids {
				n, err := e.s.Drain(bg, id)
				require.NoError(t, err)
				assert.Zero(t, n, "%s: its pool sold out", id)
			}
		})
	}
}

// Overlap per size: a reservation ID held in a size's pool and in the same
// size's Redis ledger is found; the same ID held in Redis in another size
// is not a double.
func TestOverlapSizes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rdb, _ := testenv.Miniredis(t)
	d, err := stock.New(rdb, stock.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	a := sizedSale("77")
	a.Start, a.End = time.Time{}, time.Time{} // Redis decides on its own clock
	require.NoError(t, e.s.Open(bg, a, 2))
	for i := range a.Variants {
		a.Variants[i].Stock -= 2
	}
	_, err = d.Load(bg, a)
	require.NoError(t, err)
	for _, c := range []struct{ size, user, id string }{{"77/M", "1", "both"}, {"77/S", "2", "other-size"}} {
		r, err := d.Reserve(bg, req(c.size, c.user, 1, c.id))
		require.NoError(t, err)
		require.Equal(t, stock.Reserved, r.Status)
	}
	for _, c := range []struct{ size, user, id string }{{"77/M", "1", "both"}, {"77/L", "2", "other-size"}, {"77/L", "3", "db-only"}} {
		r, err := e.s.Reserve(bg, req(c.size, c.user, 1, c.id))
		require.NoError(t, err)
		require.Equal(t, stock.Reserved, r.Status)
	}
	found := map[string][]string{}
	for _, id := range sizeIDs(a) {
		dup, err := e.s.Overlap(bg, d, id)
		require.NoError(t, err)
		if len(dup) > 0 {
			found[id] = keys(dup)
		}
	}
	assert.Equal(t, map[string][]string{"77/M": {"both"}}, found)
	rr, err := e.s.Release(bg, "77/M", "both")
	require.NoError(t, err)
	assert.Equal(t, stock.ReleaseDone, rr.Status)
	dup, err := e.s.Overlap(bg, d, "77/M")
	require.NoError(t, err)
	assert.Empty(t, dup)
	e.conserved(t, "77/M")
}

// oldPoolRow64 and oldReservationRow64 are the model of the release
// before sales in sizes: VARCHAR(64) activity IDs, no sizes column.
type oldPoolRow64 struct {
	ActivityID   idColumn `gorm:"column:activity_id;primaryKey;autoIncrement:false"`
	Quota        int64    `gorm:"column:quota;not null;check:quota >= remaining"`
	Remaining    int64    `gorm:"column:remaining;not null;check:remaining >= 0"`
	Drained      int64    `gorm:"column:drained;not null;default:0"`
	PerUserLimit int64    `gorm:"column:per_user_limit;not null"`
	StartMs      int64    `gorm:"column:start_ms;not null;default:0"`
	EndMs        int64    `gorm:"column:end_ms;not null;default:0"`
	UpdatedMs    int64    `gorm:"column:updated_ms;not null"`
}

type oldReservationRow64 struct {
	ReservationID reservationID `gorm:"column:request_id;primaryKey;index:,composite:held,priority:3"`
	ActivityID    idColumn      `gorm:"column:activity_id;not null;index:,composite:user,priority:1;index:,composite:held,priority:1"`
	UserID        idColumn      `gorm:"column:user_id;not null;index:,composite:user,priority:2"`
	Qty           int64         `gorm:"column:qty;not null"`
	State         string        `gorm:"column:state;type:char(1);not null;index:,composite:held,priority:2"`
	CreatedMs     int64         `gorm:"column:created_ms;not null"`
	ReleasedMs    int64         `gorm:"column:released_ms;not null;default:0"`
}

// ddlLog records the statements a gorm session runs.
type ddlLog struct {
	logger.Interface
	mu    sync.Mutex
	stmts []string
}

func (l *ddlLog) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	l.mu.Lock()
	l.stmts = append(l.stmts, sql)
	l.mu.Unlock()
}

// migrateDDL runs AutoMigrate and returns the DDL statements it ran.
func migrateDDL(t *testing.T, db *gorm.DB, s *Store) []string {
	t.Helper()
	log := &ddlLog{Interface: logger.Discard}
	s2, err := New(db.Session(&gorm.Session{Logger: log}), WithTablePrefix(strings.TrimSuffix(s.pool, "pool")))
	require.NoError(t, err)
	require.NoError(t, s2.AutoMigrate(bg))
	ddl := regexp.MustCompile(`(?i)^\s*(DROP|ALTER|CREATE)\b`)
	var out []string
	for _, st := range log.stmts {
		if ddl.MatchString(st) {
			out = append(out, st)
		}
	}
	return out
}

// TestAutoMigrateAgainChangesNothing: over up-to-date tables AutoMigrate
// runs no DDL.
func TestAutoMigrateAgainChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	assert.Empty(t, migrateDDL(t, e.db, e.s))
}

// Tables of the release before sales in sizes (VARCHAR(64) activity IDs,
// no sizes column), with a pool, held rows and a tombstone, are widened by
// AutoMigrate without losing a row, an index or a check: the old pool
// sells on with its buyers' units counted, a sale in sizes with 129-byte
// size IDs opens and sells beside it, and a second AutoMigrate runs no
// DDL.
func TestAutoMigrateFrom64ByteActivityIDs(t *testing.T) {
	t.Parallel()
	base := newEnv(t)
	db := base.db
	s, err := New(db, WithTablePrefix("v64_"), WithClock(base.clock))
	require.NoError(t, err)
	e := env{s: s, db: db, clock: base.clock}
	require.NoError(t, db.Table(s.pool).AutoMigrate(&oldPoolRow64{}))
	require.NoError(t, db.Table(s.resv).AutoMigrate(&oldReservationRow64{}))
	now := base.clock.Now().UnixMilli()
	require.NoError(t, db.Exec("INSERT INTO "+s.pool+" (activity_id, quota, remaining, drained, per_user_limit, start_ms, end_ms, updated_ms)"+
		" VALUES ('old', 5, 3, 1, 2, 0, 0, ?)", now).Error)
	require.NoError(t, db.Exec("INSERT INTO "+s.resv+" ("+rowColumns+") VALUES ('o-1', 'old', 'u1', 2, 'R', ?, 0), ('o-t', 'old', '', 0, 'X', ?, ?)",
		now, now, now).Error)

	require.NoError(t, s.AutoMigrate(bg))
	want := parseSchema(t)
	for table, got := range map[string]string{s.pool: "seckill_fallback_pool", s.resv: "seckill_fallback_reservation"} {
		w := want[got]
		for i, k := range w.keys {
			w.keys[i] = strings.ReplaceAll(k, "seckill_fallback_", "v64_")
		}
		var checks []string
		for _, c := range w.checks {
			checks = append(checks, strings.ReplaceAll(c, "seckill_fallback_", "v64_"))
		}
		w.checks = checks
		assert.Equal(t, w, dbTable(t, db, table, checks), "%s after the migration", table)
	}
	for _, table := range []string{s.pool, s.resv} {
		cols, err := db.Migrator().ColumnTypes(table)
		require.NoError(t, err)
		for _, c := range cols {
			if n, ok := c.Length(); ok && c.Name() == "activity_id" {
				assert.EqualValues(t, maxPoolIDBytes, n, "%s.activity_id widened", table)
			}
		}
	}
	q, rem, dr := e.rawPool(t, "old")
	assert.Equal(t, []int64{5, 3, 1}, []int64{q, rem, dr}, "the old pool row")
	e.conserved(t, "old")
	r, err := s.Reserve(bg, req("old", "u1", 1, "o-2"))
	require.NoError(t, err)
	assert.Equal(t, stock.LimitReached, r.Status, "the cap sees the old row")
	r, err = s.Reserve(bg, req("old", "u2", 1, "o-t"))
	require.NoError(t, err)
	assert.Equal(t, stock.Released, r.Status, "the old tombstone")

	long := strings.Repeat("a", stock.MaxIDLen)
	a := activity(long, 0, 1)
	a.Variants = []stock.Variant{{ID: strings.Repeat("z", stock.MaxIDLen), Stock: 3}}
	require.NoError(t, s.Open(bg, a, 2))
	size := stock.VariantOf(long, a.Variants[0].ID)
	require.Len(t, size, maxPoolIDBytes)
	r, err = s.Reserve(bg, req(size, "u1", 1, "long-1"))
	require.NoError(t, err)
	assert.Equal(t, stock.Reserved, r.Status)
	lk, ok, err := s.Lookup(bg, size, "long-1")
	require.NoError(t, err)
	require.True(t, ok, "the 129-byte ID reads back whole")
	assert.Equal(t, stock.Held, lk.State)
	e.conserved(t, size)

	assert.Empty(t, migrateDDL(t, db, s), "a second AutoMigrate runs no DDL")
}

// Concurrent first Opens of one sale in sizes (several app servers
// starting at once) all succeed and write the sale's row and each size's
// pool once.
func TestOpenSizesConcurrently(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := sizedSale("78")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, e.s.Open(bg, a, 4))
		}()
	}
	wg.Wait()
	var rows, units int64
	require.NoError(t, e.db.Raw("SELECT COUNT(*), SUM(quota) FROM "+e.s.pool).Row().Scan(&rows, &units))
	assert.Equal(t, []int64{4, 4 + 4 + 3}, []int64{rows, units}, "the sale's row and three pools of min(4, stock)")
}
