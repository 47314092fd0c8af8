package stock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callCounter is a Redis client that counts every script call made
// through it (Eval, EvalSha and their read-only forms, ScriptLoad,
// ScriptExists), per script hash for EVALSHA/EVALSHA_RO.
type callCounter struct {
	redis.Scripter
	mu    sync.Mutex
	total int
	sha   map[string]int
}

func (c *callCounter) add(sha string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	if sha != "" {
		if c.sha == nil {
			c.sha = map[string]int{}
		}
		c.sha[sha]++
	}
}

func (c *callCounter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.add("")
	return c.Scripter.Eval(ctx, script, keys, args...)
}

func (c *callCounter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.add(sha)
	return c.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (c *callCounter) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.add("")
	return c.Scripter.EvalRO(ctx, script, keys, args...)
}

func (c *callCounter) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.add(sha)
	return c.Scripter.EvalShaRO(ctx, sha, keys, args...)
}

func (c *callCounter) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	c.add("")
	return c.Scripter.ScriptExists(ctx, hashes...)
}

func (c *callCounter) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	c.add("")
	return c.Scripter.ScriptLoad(ctx, script)
}

func (c *callCounter) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

func (c *callCounter) of(s *redis.Script) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sha[s.Hash()]
}

// sizeID is a reservation ID as checkout forms it for an attempt of user at
// size v: "u<len>.<user>-<request>/<v>", held in the size's ledger under
// its line entry "…#0".
func sizeID(user, request, v string) string {
	return fmt.Sprintf("u%d.%s-%s/%s#0", len(user), user, request, v)
}

// sizePrefix is the prefix every reservation ID of user's starts with.
func sizePrefix(user string) string { return fmt.Sprintf("u%d.%s-", len(user), user) }

// TestVariantSoldOutAsActivity: an activity with variants addressed by its
// plain ID is sold out in-process once every size of its list is, and a
// buyer is refused by prefix or ID only when no size's ledger knows it —
// with no Redis call and no allocation. A size's flag expiring, a top-up
// of one size and a Reset to another list clear it; a Deductor that has
// not learnt the list never refuses.
func TestVariantSoldOutAsActivity(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		clk := testenv.NewEpochClock(0)
		c := &callCounter{Scripter: rdb}
		d := newTestDeductor(t, c, prefix, WithClock(clk), WithRecheckInterval(time.Minute))
		mustLoad(t, d, Activity{ID: "vs", PerUserLimit: 1, Variants: []Variant{{ID: "S", Stock: 1}, {ID: "M", Stock: 1}, {ID: "L", Stock: 1}}})
		reserve := func(user, v string) Status {
			t.Helper()
			res, err := d.Reserve(ctx, Request{Activity: VariantOf("vs", v), User: user, Qty: 1, ReservationID: sizeID(user, "r1", v)})
			require.NoError(t, err)
			return res.Status
		}
		refused := func(what string, want bool) {
			t.Helper()
			assert.Equal(t, want, d.SoldOut("vs"), "%s: SoldOut", what)
			assert.Equal(t, want, d.SoldOutForPrefix("vs", sizePrefix("loser")), "%s: SoldOutForPrefix of a loser", what)
			assert.Equal(t, want, d.SoldOutFor("vs", sizeID("loser", "r9", "S")), "%s: SoldOutFor of a loser", what)
		}
		refused("nothing learnt", false)
		for _, v := range []string{"S", "M", "L"} {
			require.Equal(t, Reserved, reserve("w"+v, v))
		}
		refused("every size gone, no refusal seen yet", false)
		require.Equal(t, SoldOut, reserve("loser", "S"))
		require.Equal(t, SoldOut, reserve("loser", "M"))
		refused("S and M flagged, L not", false)
		require.Equal(t, SoldOut, reserve("loser", "L"))
		refused("every size flagged", true)

		// The winners: a prefix or ID some size's ledger holds is let
		// through, whichever size it won.
		for _, v := range []string{"S", "M", "L"} {
			assert.False(t, d.SoldOutForPrefix("vs", sizePrefix("w"+v)), "the winner of %s by prefix", v)
			assert.False(t, d.SoldOutFor("vs", sizeID("w"+v, "r1", v)), "the winner of %s by ID", v)
			assert.True(t, d.SoldOutFor("vs", sizeID("w"+v, "r2", v)), "the winner of %s, another attempt", v)
		}
		// "u2.wS-" is not a prefix of "u3.wSx-…": another buyer.
		assert.True(t, d.SoldOutForPrefix("vs", sizePrefix("wSx")))

		// No Redis call.
		before := c.calls()
		for range 100 {
			require.True(t, d.SoldOut("vs"))
			require.True(t, d.SoldOutForPrefix("vs", "u5.loser-"))
			require.True(t, d.SoldOutFor("vs", "u5.loser-r9/S#0"))
		}
		assert.Equal(t, before, c.calls(), "Redis calls by the in-process answers")

		// A Deductor that has not learnt the list never refuses, though
		// Redis is sold out.
		fresh := newTestDeductor(t, rdb, prefix, WithClock(clk))
		assert.False(t, fresh.SoldOut("vs"))
		assert.False(t, fresh.SoldOutForPrefix("vs", sizePrefix("loser")))
		assert.False(t, fresh.SoldOutFor("vs", sizeID("loser", "r9", "S")))

		// One size's flag expires: the activity is no longer refused.
		clk.Add(time.Minute)
		refused("L's flag expired", false)
		require.Equal(t, SoldOut, reserve("loser", "S"))
		require.Equal(t, SoldOut, reserve("loser", "M"))
		require.Equal(t, SoldOut, reserve("loser", "L"))
		refused("flagged again", true)

		// A top-up of one size clears that size's flag.
		_, err := d.Adjust(ctx, AdjustParams{Activity: VariantOf("vs", "M"), ID: "top-1", Delta: 1})
		require.NoError(t, err)
		refused("M topped up", false)
		require.Equal(t, Reserved, reserve("late", "M"))
		require.Equal(t, SoldOut, reserve("loser", "M"))
		refused("M gone again", true)
		assert.False(t, d.SoldOutForPrefix("vs", sizePrefix("late")), "the buyer of the top-up")

		// A Reset to another list: nothing refused; the new list's sizes
		// decide.
		require.NoError(t, d.Reset(ctx, Activity{ID: "vs", PerUserLimit: 1, Variants: []Variant{{ID: "M", Stock: 1}, {ID: "XL", Stock: 1}}}))
		refused("after a Reset", false)
		assert.Equal(t, "M,XL", d.varsOf("vs").list)
		require.Equal(t, Reserved, reserve("a", "M"))
		require.Equal(t, SoldOut, reserve("loser", "M"))
		refused("XL still on sale", false)
		require.Equal(t, Reserved, reserve("b", "XL"))
		require.Equal(t, SoldOut, reserve("loser", "XL"))
		refused("M and XL gone", true)
		assert.False(t, d.SoldOutForPrefix("vs", sizePrefix("a")), "the winner of M")
		assert.False(t, d.SoldOutForPrefix("vs", sizePrefix("b")), "the winner of XL")
		assert.True(t, d.SoldOutForPrefix("vs", sizePrefix("wS")), "the winner of the old list's S holds nothing now")

		// A Reset without variants forgets the list.
		require.NoError(t, d.Reset(ctx, Activity{ID: "vs", Stock: 1, PerUserLimit: 1}))
		refused("reset to a plain activity", false)
		assert.Empty(t, d.varsOf("vs").ids)
	})
}

// TestHeldOverVariants: Held of an activity with variants is what the
// buyer holds over all its sizes, one script call once the list is known
// (its first call learns it), counted against the buyers hashes in Redis;
// Held of a size is that size's alone; a buyer holding nothing reads 0; a
// release, a Reset to another list and one without variants are followed.
func TestHeldOverVariants(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		const n = 12
		vs := make([]Variant, n)
		ids := make([]string, n)
		for i := range vs {
			ids[i] = fmt.Sprintf("s%d", i)
			vs[i] = Variant{ID: ids[i], Stock: 5}
		}
		c := &callCounter{Scripter: rdb}
		d := newTestDeductor(t, c, prefix)
		mustLoad(t, d, Activity{ID: "hv", PerUserLimit: 6, Variants: vs})
		for i, q := range map[int]int64{0: 1, 5: 2, 11: 1} {
			res, err := d.Reserve(ctx, Request{Activity: VariantOf("hv", ids[i]), User: "1", Qty: q, ReservationID: fmt.Sprintf("r%d", i)})
			require.NoError(t, err)
			require.Equal(t, Reserved, res.Status)
		}
		_, held := variantCounts(t, rdb, prefix, "hv", ids)
		var want int64
		for _, h := range held {
			want += h["1"]
		}
		require.Equal(t, int64(4), want, "counted from Redis")

		for name, dd := range map[string]*Deductor{"learnt": d, "fresh": newTestDeductor(t, rdb, prefix)} {
			got, err := dd.Held(ctx, "hv", "1")
			require.NoError(t, err, name)
			assert.Equal(t, want, got, "%s: held over the sizes", name)
		}
		before := c.calls()
		got, err := d.Held(ctx, "hv", "1")
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Equal(t, 1, c.calls()-before, "script calls of one Held over %d sizes", n)

		got, err = d.Held(ctx, "hv", "2")
		require.NoError(t, err)
		assert.Zero(t, got, "a buyer holding nothing")
		got, err = d.Held(ctx, VariantOf("hv", "s5"), "1")
		require.NoError(t, err)
		assert.Equal(t, int64(2), got, "Held of one size")

		_, err = d.Release(ctx, VariantOf("hv", "s5"), "r5")
		require.NoError(t, err)
		got, err = d.Held(ctx, "hv", "1")
		require.NoError(t, err)
		assert.Equal(t, int64(2), got, "after a release of 2")

		// Another process resets the sale to another list: the list is
		// learnt again, the old sizes no longer count.
		other := newTestDeductor(t, rdb, prefix)
		require.NoError(t, other.Reset(ctx, Activity{ID: "hv", PerUserLimit: 6, Variants: []Variant{{ID: "s0", Stock: 5}, {ID: "s1", Stock: 5}}}))
		res, err := other.Reserve(ctx, Request{Activity: VariantOf("hv", "s1"), User: "1", Qty: 1, ReservationID: "n1"})
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		got, err = d.Held(ctx, "hv", "1")
		require.NoError(t, err)
		assert.Equal(t, int64(1), got, "after a Reset to s0, s1 elsewhere")
		assert.Equal(t, "s0,s1", d.varsOf("hv").list)

		// Reset without variants: a plain activity, asked as one.
		require.NoError(t, other.Reset(ctx, Activity{ID: "hv", Stock: 3, PerUserLimit: 2}))
		require.NoError(t, rdb.Del(ctx, varsKey(prefix, "hv")).Err()) // what the vars hash's expiry does
		res, err = other.Reserve(ctx, Request{Activity: "hv", User: "1", Qty: 2, ReservationID: "p1"})
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		got, err = d.Held(ctx, "hv", "1")
		require.NoError(t, err)
		assert.Equal(t, int64(2), got, "a plain activity again")
		assert.Empty(t, d.varsOf("hv").list, "the list is forgotten")

		_, err = d.Held(ctx, "absent", "1")
		require.ErrorIs(t, err, ErrNotLoaded)
	})
}

// TestVariantSoldOutAllocs: the in-process answers for an activity in
// sizes allocate nothing (not parallel: AllocsPerRun).
func TestVariantSoldOutAllocs(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	d := newTestDeductor(t, rdb, testenv.Prefix(t))
	vs := make([]Variant, 12)
	for i := range vs {
		vs[i] = Variant{ID: fmt.Sprintf("s%d", i), Stock: 1}
	}
	mustLoad(t, d, Activity{ID: "va", PerUserLimit: 1, Variants: vs})
	for _, v := range vs {
		for _, u := range []string{"w", "loser"} {
			_, err := d.Reserve(ctx, Request{Activity: VariantOf("va", v.ID), User: u + v.ID, Qty: 1, ReservationID: sizeID(u+v.ID, "r1", v.ID)})
			require.NoError(t, err)
		}
	}
	require.True(t, d.SoldOut("va"))
	var out [3]bool
	allocs := testing.AllocsPerRun(200, func() {
		out[0] = d.SoldOut("va")
		out[1] = d.SoldOutForPrefix("va", "u5.loser-")
		out[2] = d.SoldOutFor("va", "u5.loser-r9/s0#0")
	})
	assert.Equal(t, [3]bool{true, true, true}, out)
	assert.Zero(t, allocs, "allocations per answer")
}
