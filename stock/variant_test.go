package stock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// variantCounts reads, straight from Redis, each variant's stock and each
// buyer's held units per variant.
func variantCounts(t *testing.T, rdb redis.UniversalClient, prefix, activity string, ids []string) (map[string]int64, map[string]map[string]int64) {
	t.Helper()
	stock := map[string]int64{}
	held := map[string]map[string]int64{} // variant -> user -> units
	for _, v := range ids {
		k := activityKeys(prefix, VariantOf(activity, v))
		stock[v] = hint(t, rdb, k.meta, "stock")
		held[v] = map[string]int64{}
		for u, s := range hgetall(t, rdb, k.buyers) {
			n, err := strconv.ParseInt(s, 10, 64)
			require.NoError(t, err)
			held[v][u] = n
		}
	}
	return stock, held
}

// TestVariantReserve: each variant has its own counter, per-user limit and
// ledger; the activity's limit holds over all variants; sold out per
// variant and overall; replay, release, adjust, pause and freeze per
// variant, all counted from Redis.
func TestVariantReserve(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "9", PerUserLimit: 3, Variants: []Variant{
			{ID: "S", Stock: 1}, {ID: "M", Stock: 5, PerUserLimit: 2}, {ID: "L", Stock: 5, PerUserLimit: 1}}})
		loaded, err := d.Load(ctx, Activity{ID: "9", Variants: []Variant{{ID: "S", Stock: 99}}})
		require.NoError(t, err)
		assert.False(t, loaded, "Load is set-if-absent")
		S, M, L := VariantOf("9", "S"), VariantOf("9", "M"), VariantOf("9", "L")

		res, err := d.Reserve(ctx, Request{Activity: S, User: "1", Qty: 1, ReservationID: "a"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		res, err = d.Reserve(ctx, Request{Activity: S, User: "1", Qty: 1, ReservationID: "a"})
		require.NoError(t, err)
		assert.True(t, res.Replayed, "a retry replays")
		res, err = d.Reserve(ctx, Request{Activity: S, User: "2", Qty: 1, ReservationID: "b"})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status, "S is sold out, not the activity")
		res, err = d.Reserve(ctx, Request{Activity: M, User: "2", Qty: 1, ReservationID: "b"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)

		// Per variant: M allows 2 per buyer.
		res, err = d.Reserve(ctx, Request{Activity: M, User: "1", Qty: 2, ReservationID: "c"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		res, err = d.Reserve(ctx, Request{Activity: M, User: "1", Qty: 1, ReservationID: "d"})
		require.NoError(t, err)
		assert.Equal(t, LimitReached, res.Status, "the variant's limit")
		// Per activity: buyer 1 holds 3 (S 1, M 2): L refused though L allows 1.
		res, err = d.Reserve(ctx, Request{Activity: L, User: "1", Qty: 1, ReservationID: "e"})
		require.NoError(t, err)
		assert.Equal(t, LimitReached, res.Status, "the activity's limit over all variants")
		_, err = d.Reserve(ctx, Request{Activity: M, User: "3", Qty: 1, ReservationID: "c"})
		require.ErrorIs(t, err, ErrIDConflict)

		stock, held := variantCounts(t, rdb, prefix, "9", []string{"S", "M", "L"})
		assert.Equal(t, map[string]int64{"S": 0, "M": 2, "L": 5}, stock)
		assert.Equal(t, int64(2), held["M"]["1"])
		vs, err := d.Variants(ctx, "9")
		require.NoError(t, err)
		assert.Equal(t, []Variant{{ID: "S", Stock: 0, PerUserLimit: 3}, {ID: "M", Stock: 2, PerUserLimit: 2},
			{ID: "L", Stock: 5, PerUserLimit: 1}}, vs)

		// Release per variant: buyer 1 may now take L.
		rel, err := d.Release(ctx, M, "c")
		require.NoError(t, err)
		assert.Equal(t, ReleaseDone, rel.Status)
		res, err = d.Reserve(ctx, Request{Activity: L, User: "1", Qty: 1, ReservationID: "e"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		l := ledger(t, d, L)
		assert.Equal(t, Held, l["e"].State, "the variant's ledger, read by the reconciler")
		assert.Empty(t, ledger(t, d, S)["e"].ID)

		// Adjust one variant: S gets 2 more.
		_, err = d.Adjust(ctx, AdjustParams{Activity: S, ID: "top", Delta: 2})
		require.NoError(t, err)
		res, err = d.Reserve(ctx, Request{Activity: S, User: "2", Qty: 1, ReservationID: "f"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)

		// Pause and freeze one variant: the others keep selling.
		require.NoError(t, d.Pause(ctx, S))
		res, err = d.Reserve(ctx, Request{Activity: S, User: "4", Qty: 1, ReservationID: "g"})
		require.NoError(t, err)
		assert.Equal(t, Paused, res.Status)
		require.NoError(t, d.Freeze(ctx, L))
		res, err = d.Reserve(ctx, Request{Activity: L, User: "4", Qty: 1, ReservationID: "g"})
		require.NoError(t, err)
		assert.Equal(t, Frozen, res.Status)
		res, err = d.Reserve(ctx, Request{Activity: M, User: "4", Qty: 1, ReservationID: "g"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)

		// Conservation per variant: remaining + held in the ledger = total.
		for _, v := range []string{"S", "M", "L"} {
			st, err := d.Stats(ctx, VariantOf("9", v))
			require.NoError(t, err)
			sum, _ := heldSum(ledger(t, d, VariantOf("9", v)))
			assert.Equal(t, st.Total, st.Remaining+sum, v)
		}
		// The plain activity has no stock of its own.
		res, err = d.Reserve(ctx, Request{Activity: "9", User: "5", Qty: 1, ReservationID: "h"})
		require.NoError(t, err)
		assert.Equal(t, NotLoaded, res.Status)
	})
}

// TestVariantFence: a variant whose data Redis lost is detected like an
// activity's: the next Reserve of it answers Frozen.
func TestVariantFence(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var loss lossLog
		d := newTestDeductor(t, rdb, prefix, WithOnLoss(loss.hook))
		mustLoad(t, d, Activity{ID: "8", PerUserLimit: 5, Variants: []Variant{{ID: "A", Stock: 5}, {ID: "B", Stock: 5}}})
		A := VariantOf("8", "A")
		res, err := d.Reserve(ctx, Request{Activity: A, User: "1", Qty: 1, ReservationID: "x"})
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		k := activityKeys(prefix, A)
		require.NoError(t, rdb.Del(ctx, k.meta, k.buyers, k.ledger).Err())
		// A reload at full stock, as a set-if-absent Load would after a loss.
		_, err = d.Load(ctx, Activity{ID: "8", PerUserLimit: 5, Variants: []Variant{{ID: "A", Stock: 5}, {ID: "B", Stock: 5}}})
		require.NoError(t, err)
		res, err = d.Reserve(ctx, Request{Activity: A, User: "2", Qty: 1, ReservationID: "y"})
		require.NoError(t, err)
		assert.Equal(t, Frozen, res.Status)
		assert.Len(t, loss.get(A), 1)
		assert.Empty(t, loss.get(VariantOf("8", "B")))
	})
}

func TestVariantLoadInvalid(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, "p:")
	ctx := context.Background()
	for _, a := range []Activity{
		{ID: "1", Variants: []Variant{{ID: "a/b", Stock: 1}}},
		{ID: "1", Variants: []Variant{{ID: "S", Stock: 1}, {ID: "S", Stock: 1}}},
		{ID: "1", Variants: []Variant{{ID: "S", Stock: -1}}},
		{ID: "1", Stock: 3, Variants: []Variant{{ID: "S", Stock: 1}}},
		{ID: "1", Shards: 2, Variants: []Variant{{ID: "S", Stock: 1}}},
		{ID: "1/S", Stock: 1},
	} {
		_, err := d.Load(ctx, a)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", a)
	}
	_, err := d.Reserve(ctx, Request{Activity: "1/", User: "1", Qty: 1, ReservationID: "r"})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestVariantHammer: buyers on a 12-variant activity with a skewed size
// distribution, each buyer's attempts concurrent (single-variant Reserves
// and 2-variant carts): no oversell per variant, every per-variant and
// per-activity cap held, the popular sizes sell out first, and the ledger
// agrees with the counters; all counted from Redis. On miniredis 400
// buyers (quick under go test ./...); on real Redis and the Cluster the
// done-when's 10,000.
func TestVariantHammer(t *testing.T) {
	forEachRedisKind(t, func(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		const variants, tries, inFlight = 12, 4, 256
		buyers, stockPer := 400, int64(30)
		if kind != testenv.KindMiniredis {
			buyers, stockPer = 10000, 1000
		}
		ids := make([]string, variants)
		vs := make([]Variant, variants)
		weights := make([]int, variants)
		for i := range vs {
			ids[i] = fmt.Sprint("size", 36+i)
			vs[i] = Variant{ID: ids[i], Stock: stockPer, PerUserLimit: 1 + int64(i%2)}
			// Sizes 41-43 are the popular ones.
			weights[i] = 1
			if i >= 5 && i <= 7 {
				weights[i] = 12
			}
		}
		mustLoad(t, d, Activity{ID: "12", PerUserLimit: 3, Variants: vs})
		var total int
		for _, w := range weights {
			total += w
		}
		pick := func(r *rand.Rand) int {
			x := r.IntN(total)
			for i, w := range weights {
				if x < w {
					return i
				}
				x -= w
			}
			return variants - 1
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		var carts, cartsHeld int
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		gate := make(chan struct{}, inFlight) // buyers in flight: bounded goroutines under -race
		for b := range buyers {
			gate <- struct{}{}
			var bw sync.WaitGroup
			for k := range tries {
				r := rand.New(rand.NewPCG(uint64(b), uint64(k)))
				v := pick(r)
				wg.Add(1)
				bw.Add(1)
				go func() {
					defer wg.Done()
					defer bw.Done()
					if k == tries-1 && b%4 == 0 {
						// A cart of two sizes: one script, all or nothing.
						w := (v + 1 + r.IntN(variants-1)) % variants
						res, err := d.ReserveLines(ctx, Lines{User: uid(b), ReservationID: fmt.Sprint("c", b), Lines: []Line{
							{Activity: VariantOf("12", ids[v]), Qty: 1}, {Activity: VariantOf("12", ids[w]), Qty: 1}}})
						if err != nil {
							fail(err)
							return
						}
						mu.Lock()
						carts++
						if res.Status == Reserved {
							cartsHeld++
						}
						mu.Unlock()
						return
					}
					_, err := d.Reserve(ctx, Request{Activity: VariantOf("12", ids[v]), User: uid(b), Qty: 1 + int64(r.IntN(2)),
						ReservationID: fmt.Sprint("h", b, "-", k)})
					if err != nil {
						fail(err)
					}
				}()
			}
			go func() {
				bw.Wait()
				<-gate
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.ErrorIs(t, err, ErrInvalidArgument, "only qty above a variant's limit may fail")
		}
		stock, held := variantCounts(t, rdb, prefix, "12", ids)
		perUser := map[string]int64{}
		cartLines := map[string]int{} // cart -> lines held
		var sold int64
		for i, v := range ids {
			assert.GreaterOrEqual(t, stock[v], int64(0), "no oversell of %s", v)
			var sum int64
			for u, n := range held[v] {
				assert.LessOrEqual(t, n, vs[i].PerUserLimit, "buyer %s over the limit of %s", u, v)
				sum += n
				perUser[u] += n
			}
			sold += sum
			assert.Equal(t, vs[i].Stock, stock[v]+sum, "conservation of %s", v)
			l := ledger(t, d, VariantOf("12", v))
			lsum, lper := heldSum(l)
			assert.Equal(t, sum, lsum, "ledger of %s", v)
			for u, n := range lper {
				assert.Equal(t, held[v][u], n, "ledger of %s, buyer %s", v, u)
			}
			for id, r := range l {
				if cart, _, ok := strings.Cut(id, "#"); ok && r.State == Held {
					cartLines[cart]++
				}
			}
		}
		for u, n := range perUser {
			assert.LessOrEqual(t, n, int64(3), "buyer %s over the activity's limit", u)
		}
		for c, n := range cartLines {
			assert.Equal(t, 2, n, "cart %s is held whole or not at all", c)
		}
		assert.Len(t, cartLines, cartsHeld, "the carts answered Reserved are the carts held")
		assert.Positive(t, cartsHeld, "some carts were held")
		assert.Equal(t, (buyers+3)/4, carts)
		for i := 5; i <= 7; i++ {
			assert.Zero(t, stock[ids[i]], "popular size %s sold out", ids[i])
		}
		assert.Positive(t, stock[ids[0]], "an unpopular size is left")
		t.Logf("%s: %d buyers, %d units sold of %d, %d of %d carts held", kind, buyers, sold, int64(variants)*stockPer, cartsHeld, carts)
	})
}

// TestVariantRecovery: a Preloader with WithRecovery recovers an activity
// with variants variant by variant: after Redis lost every key of the
// activity, each variant is rebuilt from its live reservations (stock =
// total - live), the activity's limit over the variants holds again, and
// a variant whose recovery is not ready stays frozen.
func TestVariantRecovery(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		a := Activity{ID: "rv", PerUserLimit: 2, Variants: []Variant{{ID: "A", Stock: 5}, {ID: "B", Stock: 5}}}
		mustLoad(t, d, a)
		A, B := VariantOf("rv", "A"), VariantOf("rv", "B")
		for i, r := range []Request{{Activity: A, User: "1", Qty: 1, ReservationID: "x"}, {Activity: B, User: "1", Qty: 1, ReservationID: "y"}} {
			res, err := d.Reserve(ctx, r)
			require.NoError(t, err, i)
			require.Equal(t, Reserved, res.Status)
		}
		live := map[string][]Reservation{}
		for _, v := range []string{A, B} {
			for _, r := range ledger(t, d, v) {
				live[v] = append(live[v], Reservation{ID: r.ID, User: r.User, Qty: r.Qty, ReservedAt: r.ReservedAt})
			}
		}
		// Redis loses the whole activity.
		var all []string
		for _, v := range []string{A, B} {
			k := activityKeys(prefix, v)
			all = append(all, k.list()...)
		}
		all = append(all, varsKey(prefix, "rv"))
		for _, k := range all {
			require.NoError(t, rdb.Del(ctx, k).Err())
		}
		ready := map[string]bool{A: true}
		var asked []string
		var mu sync.Mutex
		p, err := NewPreloader(d, (&table{acts: []Activity{a}}).Upcoming, WithRecovery(func(_ context.Context, va Activity) ([]Reservation, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, va.ID)
			return live[va.ID], ready[va.ID], nil
		}))
		require.NoError(t, err)
		n, err := p.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.ElementsMatch(t, []string{A, B}, asked)
		assert.Equal(t, int64(4), hint(t, rdb, activityKeys(prefix, A).meta, "stock"), "total - live")
		assert.Equal(t, "1", hgetall(t, rdb, activityKeys(prefix, B).meta)["frozen"], "B not ready: frozen")
		res, err := d.Reserve(ctx, Request{Activity: B, User: "2", Qty: 1, ReservationID: "z"})
		require.NoError(t, err)
		assert.Equal(t, Frozen, res.Status)

		ready[B] = true
		_, err = p.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(4), hint(t, rdb, activityKeys(prefix, B).meta, "stock"))
		// Buyer 1 holds 2 again (one per variant): the activity's limit holds.
		res, err = d.Reserve(ctx, Request{Activity: A, User: "1", Qty: 1, ReservationID: "w"})
		require.NoError(t, err)
		assert.Equal(t, LimitReached, res.Status)
		res, err = d.Reserve(ctx, Request{Activity: B, User: "2", Qty: 1, ReservationID: "z"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
	})
}

// TestVariantDroppedByReset: a Reset to fewer variants takes the dropped
// one off sale, though its keys remain until they expire.
func TestVariantDroppedByReset(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "dr", PerUserLimit: 2, Variants: []Variant{{ID: "A", Stock: 5}, {ID: "B", Stock: 5}}})
		B := VariantOf("dr", "B")
		res, err := d.Reserve(ctx, Request{Activity: B, User: "1", Qty: 1, ReservationID: "b1"})
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		require.NoError(t, d.Reset(ctx, Activity{ID: "dr", PerUserLimit: 2, Variants: []Variant{{ID: "A", Stock: 5}}}))
		for _, dd := range []*Deductor{d, newTestDeductor(t, rdb, prefix)} {
			res, err = dd.Reserve(ctx, Request{Activity: B, User: "2", Qty: 1, ReservationID: "b2"})
			require.NoError(t, err)
			assert.Equal(t, NotLoaded, res.Status)
		}
		assert.Equal(t, int64(4), hint(t, rdb, activityKeys(prefix, B).meta, "stock"), "nothing taken from B")
		vs, err := d.Variants(ctx, "dr")
		require.NoError(t, err)
		assert.Equal(t, []Variant{{ID: "A", Stock: 5, PerUserLimit: 2}}, vs)
	})
}
