package stock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layoutCase is one way of running the admin tests: un-sharded, sharded,
// coalesced.
type layoutCase struct {
	name   string
	shards int
	opts   []DeductorOption
}

var adminCases = []layoutCase{
	{name: "plain"},
	{name: "sharded", shards: 3},
	{name: "coalesced", opts: []DeductorOption{WithCoalescing(200*time.Microsecond, 8)}},
	{name: "sharded-coalesced", shards: 3, opts: []DeductorOption{WithCoalescing(200*time.Microsecond, 8)}},
}

// ledgerKeys returns the keys of every ledger of an activity (one, or one
// per shard).
func ledgerKeys(prefix, activity string, shards int) []keys {
	if shards <= 1 {
		return []keys{activityKeys(prefix, activity)}
	}
	out := make([]keys, shards)
	for k := range shards {
		out[k] = shardKeys(prefix, activity, shards, k)
	}
	return out
}

// rawUnits reads, straight from Redis, the activity's stock, total, units
// held (buyers hash), units in transfer (out - in) and ledger entries, summed
// over its ledgers.
type rawUnits struct{ stock, total, held, inTransfer, entries int64 }

func readUnits(t *testing.T, rdb redis.UniversalClient, prefix, activity string, shards int) rawUnits {
	t.Helper()
	ctx := context.Background()
	var u rawUnits
	for _, k := range ledgerKeys(prefix, activity, shards) {
		m := hgetall(t, rdb, k.meta)
		atoi := func(s string) int64 {
			if s == "" {
				return 0
			}
			v, err := strconv.ParseInt(s, 10, 64)
			require.NoError(t, err)
			return v
		}
		u.stock += atoi(m["stock"])
		u.total += atoi(m["total"])
		u.inTransfer += atoi(m["out"]) - atoi(m["in"])
		for _, q := range hgetall(t, rdb, k.buyers) {
			u.held += atoi(q)
		}
		n, err := rdb.HLen(ctx, k.ledger).Result()
		require.NoError(t, err)
		u.entries += n
	}
	return u
}

func metaField(t *testing.T, rdb redis.UniversalClient, prefix, activity string, shards int, field string) []string {
	t.Helper()
	var out []string
	for _, k := range ledgerKeys(prefix, activity, shards) {
		out = append(out, hgetall(t, rdb, k.meta)[field])
	}
	return out
}

func TestPauseResume(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		for _, c := range adminCases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				p := prefix + c.name + ":"
				d := newTestDeductor(t, rdb, p, c.opts...)
				mustLoad(t, d, Activity{ID: "a", Stock: 10, PerUserLimit: 2, Shards: c.shards})
				r, err := d.Reserve(ctx, Request{Activity: "a", User: "u1", Qty: 1, ReservationID: "r1"})
				require.NoError(t, err)
				require.Equal(t, Reserved, r.Status)

				require.NoError(t, d.Pause(ctx, "a"))
				require.NoError(t, d.Pause(ctx, "a"), "idempotent")
				for _, v := range metaField(t, rdb, p, "a", c.shards, "paused") {
					assert.Equal(t, "1", v)
				}
				st, err := d.Stats(ctx, "a")
				require.NoError(t, err)
				assert.True(t, st.Paused)
				assert.False(t, st.Frozen)
				before := readUnits(t, rdb, p, "a", c.shards)
				for i := range 5 {
					r, err := d.Reserve(ctx, Request{Activity: "a", User: uid(i + 10), Qty: 1, ReservationID: "p" + uid(i)})
					require.NoError(t, err)
					assert.Equal(t, Paused, r.Status)
					assert.ErrorIs(t, r.Err(), ErrPaused)
					assert.Equal(t, "paused", r.Status.String())
				}
				assert.Equal(t, before, readUnits(t, rdb, p, "a", c.shards), "a paused activity writes nothing")
				assert.False(t, d.SoldOut("a"))

				// A replay still answers from the ledger.
				r, err = d.Reserve(ctx, Request{Activity: "a", User: "u1", Qty: 1, ReservationID: "r1"})
				require.NoError(t, err)
				assert.Equal(t, Reserved, r.Status)
				assert.True(t, r.Replayed)

				// Freeze and pause are separate flags.
				require.NoError(t, d.Freeze(ctx, "a"))
				require.NoError(t, d.Resume(ctx, "a"))
				r, err = d.Reserve(ctx, Request{Activity: "a", User: "u2", Qty: 1, ReservationID: "f1"})
				require.NoError(t, err)
				assert.Equal(t, Frozen, r.Status, "Resume does not unfreeze")
				require.NoError(t, d.Pause(ctx, "a"))
				require.NoError(t, d.Unfreeze(ctx, "a"))
				r, err = d.Reserve(ctx, Request{Activity: "a", User: "u2", Qty: 1, ReservationID: "f2"})
				require.NoError(t, err)
				assert.Equal(t, Paused, r.Status, "Unfreeze does not resume")

				// Release keeps working while paused.
				rel, err := d.Release(ctx, "a", "r1")
				require.NoError(t, err)
				assert.Equal(t, ReleaseDone, rel.Status)
				u := readUnits(t, rdb, p, "a", c.shards)
				assert.EqualValues(t, 10, u.stock+u.inTransfer)
				assert.EqualValues(t, 0, u.held)

				require.NoError(t, d.Resume(ctx, "a"))
				require.NoError(t, d.Resume(ctx, "a"), "idempotent")
				r, err = d.Reserve(ctx, Request{Activity: "a", User: "u2", Qty: 1, ReservationID: "f3"})
				require.NoError(t, err)
				assert.Equal(t, Reserved, r.Status)
				st, err = d.Stats(ctx, "a")
				require.NoError(t, err)
				assert.False(t, st.Paused)

				assert.ErrorIs(t, d.Pause(ctx, "missing"), ErrNotLoaded)
				assert.ErrorIs(t, d.Resume(ctx, "missing"), ErrNotLoaded)
				assert.ErrorIs(t, d.Pause(ctx, "bad id"), ErrInvalidArgument)
			})
		}
	})
}

// TestPausedNotSoldOutCache: a paused activity with no stock answers Paused
// and does not set the sold-out cache; one already known sold out keeps
// answering SoldOut in-process (the order documented on Paused).
func TestPausedNotSoldOutCache(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix, WithRecheckInterval(time.Hour))
		mustLoad(t, d, Activity{ID: "empty", Stock: 0})
		require.NoError(t, d.Pause(ctx, "empty"))
		r, err := d.Reserve(ctx, Request{Activity: "empty", User: "1", Qty: 1, ReservationID: "x"})
		require.NoError(t, err)
		assert.Equal(t, Paused, r.Status)
		assert.False(t, d.SoldOut("empty"), "a Paused answer never sets the sold-out cache")

		mustLoad(t, d, Activity{ID: "gone", Stock: 1})
		r, err = d.Reserve(ctx, Request{Activity: "gone", User: "1", Qty: 1, ReservationID: "x"})
		require.NoError(t, err)
		require.Equal(t, Reserved, r.Status)
		r, err = d.Reserve(ctx, Request{Activity: "gone", User: "2", Qty: 1, ReservationID: "y"})
		require.NoError(t, err)
		require.Equal(t, SoldOut, r.Status)
		require.True(t, d.SoldOut("gone"))
		require.NoError(t, d.Pause(ctx, "gone"))
		r, err = d.Reserve(ctx, Request{Activity: "gone", User: "3", Qty: 1, ReservationID: "z"})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, r.Status, "sold out still answers sold out")
		assert.True(t, r.Local)
	})
}

// TestPauseRace: pause and resume race with 1,000 concurrent reservations;
// every Reserved answer is one held unit and one ledger entry, every other
// answer wrote nothing, and stock is conserved.
func TestPauseRace(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		for _, c := range adminCases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				p := prefix + c.name + ":"
				d := newTestDeductor(t, rdb, p, c.opts...)
				const n, stock = 1000, 700
				mustLoad(t, d, Activity{ID: "race", Stock: stock, Shards: c.shards})
				require.NoError(t, d.Pause(ctx, "race"))
				var reserved, paused, soldOut atomic.Int64
				sawPause := make(chan struct{})
				var once sync.Once
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r, err := d.Reserve(ctx, Request{Activity: "race", User: uuidOf(i), Qty: 1, ReservationID: "q" + uid(i)})
						if !assert.NoError(t, err) {
							return
						}
						switch r.Status {
						case Reserved:
							reserved.Add(1)
						case Paused:
							paused.Add(1)
							once.Do(func() { close(sawPause) })
						case SoldOut:
							soldOut.Add(1)
						default:
							t.Errorf("status %v", r.Status)
						}
					}()
				}
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				select {
				case <-sawPause:
				case <-done:
				}
				toggles := 0
			loop:
				for {
					select {
					case <-done:
						break loop
					default:
					}
					require.NoError(t, d.Resume(ctx, "race"))
					require.NoError(t, d.Pause(ctx, "race"))
					toggles++
					// Sent after Pause returned: never reserved.
					r, err := d.Reserve(ctx, Request{Activity: "race", User: "probe", Qty: 1, ReservationID: "probe" + uid(toggles)})
					require.NoError(t, err)
					assert.True(t, r.Status == Paused || r.Status == SoldOut && r.Local, "after Pause: %v", r.Status)
				}
				require.NoError(t, d.Resume(ctx, "race"))
				assert.Positive(t, paused.Load(), "at least one reservation was refused while paused")
				assert.EqualValues(t, n, reserved.Load()+paused.Load()+soldOut.Load())
				u := readUnits(t, rdb, p, "race", c.shards)
				assert.Equal(t, reserved.Load(), u.held, "held units = Reserved answers")
				assert.Equal(t, reserved.Load(), u.entries, "ledger entries = Reserved answers")
				assert.EqualValues(t, stock, u.stock+u.held+u.inTransfer, "stock conserved")
				assert.EqualValues(t, stock, u.total)
				t.Logf("reserved %d, paused %d, sold out %d, toggles %d", reserved.Load(), paused.Load(), soldOut.Load(), toggles)
			})
		}
	})
}

func TestAdjust(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "a", Stock: 10, PerUserLimit: 5})
		k := activityKeys(prefix, "a")
		r, err := d.Reserve(ctx, Request{Activity: "a", User: "1", Qty: 3, ReservationID: "r1"})
		require.NoError(t, err)
		require.Equal(t, Reserved, r.Status)
		seq := hint(t, rdb, k.meta, "seq")

		a, err := d.Adjust(ctx, AdjustParams{Activity: "a", ID: "top-1", Delta: 5})
		require.NoError(t, err)
		assert.Equal(t, int64(5), a.Applied)
		assert.Equal(t, Level{Remaining: 7, Total: 10}, a.Before)
		assert.Equal(t, Level{Remaining: 12, Total: 15}, a.After)
		assert.False(t, a.Replayed)
		assert.False(t, a.At.IsZero())
		assert.EqualValues(t, 12, hint(t, rdb, k.meta, "stock"))
		assert.EqualValues(t, 15, hint(t, rdb, k.meta, "total"))
		assert.Equal(t, seq+1, hint(t, rdb, k.meta, "seq"), "an adjustment is a write of the fence")
		log := hgetall(t, rdb, k.adj)
		require.Len(t, log, 1)
		assert.Regexp(t, `^5:\d+:12:15:5$`, log["top-1"])
		ttl, err := rdb.PTTL(ctx, k.adj).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "the log expires with the activity")

		// Replay: the first outcome, nothing written.
		b, err := d.Adjust(ctx, AdjustParams{Activity: "a", ID: "top-1", Delta: 5})
		require.NoError(t, err)
		assert.True(t, b.Replayed)
		assert.Equal(t, a.Before, b.Before)
		assert.Equal(t, a.After, b.After)
		assert.Equal(t, a.At, b.At)
		assert.EqualValues(t, 12, hint(t, rdb, k.meta, "stock"))
		assert.Equal(t, seq+1, hint(t, rdb, k.meta, "seq"))
		_, err = d.Adjust(ctx, AdjustParams{Activity: "a", ID: "top-1", Delta: 4})
		assert.ErrorIs(t, err, ErrIDConflict)

		// A withdrawal beyond the unreserved units: refused, nothing written.
		_, err = d.Adjust(ctx, AdjustParams{Activity: "a", ID: "w-big", Delta: -13})
		assert.ErrorIs(t, err, ErrInsufficient)
		assert.EqualValues(t, 12, hint(t, rdb, k.meta, "stock"))
		assert.EqualValues(t, 15, hint(t, rdb, k.meta, "total"))
		assert.Len(t, hgetall(t, rdb, k.adj), 1)

		w, err := d.Adjust(ctx, AdjustParams{Activity: "a", ID: "w-1", Delta: -12})
		require.NoError(t, err)
		assert.Equal(t, int64(-12), w.Applied)
		assert.Equal(t, Level{Remaining: 0, Total: 3}, w.After)
		u := readUnits(t, rdb, prefix, "a", 1)
		assert.EqualValues(t, 10+5-12, u.total, "total = initial + top-ups - withdrawals")
		assert.Equal(t, u.total, u.stock+u.held, "total = remaining + held")

		recs, err := d.Adjustments(ctx, "a")
		require.NoError(t, err)
		require.Len(t, recs, 2)
		byID := map[string]Adjustment{}
		for _, r := range recs {
			byID[r.ID] = r
		}
		assert.Equal(t, int64(5), byID["top-1"].Applied)
		assert.Equal(t, int64(-12), byID["w-1"].Applied)
		assert.Equal(t, int64(-12), byID["w-1"].Delta)

		// Bad input.
		for _, p := range []AdjustParams{{Activity: "a", ID: "", Delta: 1}, {Activity: "a", ID: "x", Delta: 0},
			{Activity: "a", ID: "x", Delta: MaxQuantity + 1}, {Activity: "", ID: "x", Delta: 1}} {
			_, err := d.Adjust(ctx, p)
			assert.ErrorIs(t, err, ErrInvalidArgument, "%+v", p)
		}
		_, err = d.Adjust(ctx, AdjustParams{Activity: "none", ID: "x", Delta: 1})
		assert.ErrorIs(t, err, ErrNotLoaded)

		// Paused: adjusted as usual; frozen: refused.
		require.NoError(t, d.Pause(ctx, "a"))
		_, err = d.Adjust(ctx, AdjustParams{Activity: "a", ID: "top-2", Delta: 1})
		require.NoError(t, err)
		require.NoError(t, d.Freeze(ctx, "a"))
		_, err = d.Adjust(ctx, AdjustParams{Activity: "a", ID: "top-3", Delta: 1})
		assert.ErrorIs(t, err, ErrFrozen)
		assert.EqualValues(t, 1, hint(t, rdb, k.meta, "stock"))
	})
}

// TestAdjustRollbackDetected: a Redis rollback that loses an adjustment
// (seq back to before it) is detected by the next Reserve, like a lost
// reservation.
func TestAdjustRollbackDetected(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var losses lossLog
		d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook))
		mustLoad(t, d, Activity{ID: "a", Stock: 10})
		k := activityKeys(prefix, "a")
		_, err := d.Reserve(ctx, Request{Activity: "a", User: "1", Qty: 1, ReservationID: "r1"})
		require.NoError(t, err)
		seq := hint(t, rdb, k.meta, "seq")
		_, err = d.Adjust(ctx, AdjustParams{Activity: "a", ID: "t", Delta: 5})
		require.NoError(t, err)
		// The rollback: the copy before the adjustment is back.
		require.NoError(t, rdb.HSet(ctx, k.meta, "seq", seq, "stock", 9, "total", 10).Err())
		// A replay writes nothing: its reply shows the seq Redis holds.
		r, err := d.Reserve(ctx, Request{Activity: "a", User: "1", Qty: 1, ReservationID: "r1"})
		require.NoError(t, err)
		assert.Equal(t, Frozen, r.Status)
		assert.Len(t, losses.get("a"), 1)
	})
}

// TestAdjustSoldOutCache: a top-up clears the sold-out flag of this process
// at once and of another process through the release channel.
func TestAdjustSoldOutCache(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		flips := make(chan bool, 16)
		d := newTestDeductor(t, rdb, prefix, WithRecheckInterval(time.Hour))
		other := newTestDeductor(t, rdb, prefix, WithRecheckInterval(time.Hour),
			WithOnSoldOut(func(_ context.Context, a string, sold bool) { flips <- sold }))
		runCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = other.Run(runCtx) }()
		t.Cleanup(func() { cancel(); wg.Wait() })
		waitSubscribed(t, rdb, releaseChannel(prefix))
		mustLoad(t, d, Activity{ID: "a", Stock: 1})
		_, err := d.Reserve(ctx, Request{Activity: "a", User: "1", Qty: 1, ReservationID: "r1"})
		require.NoError(t, err)
		for _, x := range []*Deductor{d, other} {
			r, err := x.Reserve(ctx, Request{Activity: "a", User: "2", Qty: 1, ReservationID: "r2"})
			require.NoError(t, err)
			require.Equal(t, SoldOut, r.Status)
			require.True(t, x.SoldOut("a"))
		}
		require.True(t, <-flips)
		_, err = d.Adjust(ctx, AdjustParams{Activity: "a", ID: "t", Delta: 2})
		require.NoError(t, err)
		assert.False(t, d.SoldOut("a"), "cleared in this process")
		select {
		case sold := <-flips:
			assert.False(t, sold)
		case <-time.After(10 * time.Second):
			t.Fatal("the other process did not hear that stock came back")
		}
		r, err := other.Reserve(ctx, Request{Activity: "a", User: "2", Qty: 1, ReservationID: "r2"})
		require.NoError(t, err)
		assert.Equal(t, Reserved, r.Status)
	})
}

func TestAdjustSharded(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "s", Stock: 9, PerUserLimit: 3, Shards: 3})
		a, err := d.Adjust(ctx, AdjustParams{Activity: "s", ID: "top", Delta: 5})
		require.NoError(t, err)
		assert.Equal(t, int64(5), a.Applied)
		assert.Equal(t, Level{9, 9}, a.Before)
		assert.Equal(t, Level{14, 14}, a.After)
		for k, ks := range ledgerKeys(prefix, "s", 3) {
			log := hgetall(t, rdb, ks.adj)
			require.Len(t, log, 1)
			assert.Regexp(t, fmt.Sprintf(`^%d:\d+:\d+:\d+:5$`, split(5, 3)[k]), log[shardAdjID("top", k)])
		}
		st, err := d.Stats(ctx, "s")
		require.NoError(t, err)
		assert.EqualValues(t, 14, st.Total)
		assert.EqualValues(t, 14, st.Remaining)
		b, err := d.Adjust(ctx, AdjustParams{Activity: "s", ID: "top", Delta: 5})
		require.NoError(t, err)
		assert.True(t, b.Replayed)
		assert.Equal(t, int64(5), b.Applied)
		assert.EqualValues(t, 14, readUnits(t, rdb, prefix, "s", 3).total)
		_, err = d.Adjust(ctx, AdjustParams{Activity: "s", ID: "top", Delta: 4})
		assert.ErrorIs(t, err, ErrIDConflict)

		// Hold 3 units, then withdraw more than the rest: refused before
		// anything is written.
		for i := range 3 {
			r, err := d.Reserve(ctx, Request{Activity: "s", User: uid(i), Qty: 1, ReservationID: "r" + uid(i)})
			require.NoError(t, err)
			require.Equal(t, Reserved, r.Status)
		}
		before := readUnits(t, rdb, prefix, "s", 3)
		_, err = d.Adjust(ctx, AdjustParams{Activity: "s", ID: "w-big", Delta: -12})
		assert.ErrorIs(t, err, ErrInsufficient)
		assert.Equal(t, before, readUnits(t, rdb, prefix, "s", 3), "nothing written")
		for _, ks := range ledgerKeys(prefix, "s", 3) {
			assert.Len(t, hgetall(t, rdb, ks.adj), 1)
		}

		w, err := d.Adjust(ctx, AdjustParams{Activity: "s", ID: "w", Delta: -10})
		require.NoError(t, err)
		assert.Equal(t, int64(-10), w.Applied)
		u := readUnits(t, rdb, prefix, "s", 3)
		assert.EqualValues(t, 9+5-10, u.total)
		assert.Equal(t, u.total, u.stock+u.held+u.inTransfer, "conservation")
		w2, err := d.Adjust(ctx, AdjustParams{Activity: "s", ID: "w", Delta: -10})
		require.NoError(t, err)
		assert.True(t, w2.Replayed)
		assert.Equal(t, u, readUnits(t, rdb, prefix, "s", 3))

		// A Deductor that does not know the layout learns it from the
		// directory.
		fresh := newTestDeductor(t, rdb, prefix)
		w3, err := fresh.Adjust(ctx, AdjustParams{Activity: "s", ID: "w", Delta: -10})
		require.NoError(t, err)
		assert.True(t, w3.Replayed)
		assert.Equal(t, int64(-10), w3.Applied)

		recs, err := newTestDeductor(t, rdb, prefix).Adjustments(ctx, "s")
		require.NoError(t, err)
		require.Len(t, recs, 2)
		sum := map[string]int64{}
		for _, r := range recs {
			sum[r.ID] = r.Applied
		}
		assert.Equal(t, map[string]int64{"top": 5, "w": -10}, sum)
	})
}

// TestAdjustShardedPartial: a Reserve that takes units between the read of
// the shards and the withdrawal's steps leaves a partial withdrawal,
// reported in Applied with ErrInsufficient; a retry answers the same.
func TestAdjustShardedPartial(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "s", Stock: 9, Shards: 3})
		var once sync.Once
		d.afterPeek = func() {
			once.Do(func() {
				for i := range 3 {
					r, err := d.Reserve(ctx, Request{Activity: "s", User: uid(i), Qty: 1, ReservationID: "r" + uid(i)})
					require.NoError(t, err)
					require.Equal(t, Reserved, r.Status)
				}
			})
		}
		a, err := d.Adjust(ctx, AdjustParams{Activity: "s", ID: "w", Delta: -9})
		require.ErrorIs(t, err, ErrInsufficient)
		assert.Equal(t, int64(-6), a.Applied)
		u := readUnits(t, rdb, prefix, "s", 3)
		assert.EqualValues(t, 0, u.stock)
		assert.EqualValues(t, 3, u.held)
		assert.EqualValues(t, 3, u.total, "9 - 6 withdrawn")
		b, err := d.Adjust(ctx, AdjustParams{Activity: "s", ID: "w", Delta: -9})
		require.ErrorIs(t, err, ErrInsufficient)
		assert.Equal(t, int64(-6), b.Applied)
		assert.Equal(t, u, readUnits(t, rdb, prefix, "s", 3), "the retry wrote nothing")
	})
}

// TestAdjustConcurrent: top-ups and withdrawals race with reservations;
// the totals read from the keys match the applied adjustments.
func TestAdjustConcurrent(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		for _, shards := range []int{0, 3} {
			t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
				ctx := context.Background()
				p := fmt.Sprintf("%ss%d:", prefix, shards)
				d := newTestDeductor(t, rdb, p)
				const initial = 100
				mustLoad(t, d, Activity{ID: "c", Stock: initial, Shards: shards})
				var reserved, applied atomic.Int64
				var wg sync.WaitGroup
				for i := range 300 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r, err := d.Reserve(ctx, Request{Activity: "c", User: uuidOf(i), Qty: 1, ReservationID: "r" + uid(i)})
						if assert.NoError(t, err) && r.Status == Reserved {
							reserved.Add(1)
						}
					}()
				}
				for i := range 40 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						delta := int64(5)
						if i%2 == 1 {
							delta = -4
						}
						a, err := d.Adjust(ctx, AdjustParams{Activity: "c", ID: "adj" + uid(i), Delta: delta})
						if err != nil {
							assert.ErrorIs(t, err, ErrInsufficient)
						}
						applied.Add(a.Applied)
					}()
				}
				wg.Wait()
				u := readUnits(t, rdb, p, "c", shards)
				assert.Equal(t, initial+applied.Load(), u.total, "total = initial + top-ups - withdrawals")
				assert.Equal(t, u.total, u.stock+u.held+u.inTransfer, "= remaining + held")
				assert.Equal(t, reserved.Load(), u.held)
				recs, err := d.Adjustments(ctx, "c")
				require.NoError(t, err)
				var logged int64
				for _, r := range recs {
					logged += r.Applied
				}
				assert.Equal(t, applied.Load(), logged, "the log sums to the applied units")
			})
		}
	})
}

func TestNoRebuy(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		for _, c := range adminCases {
			for _, noRebuy := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/norebuy=%v", c.name, noRebuy), func(t *testing.T) {
					ctx := context.Background()
					p := fmt.Sprintf("%s%s:%v:", prefix, c.name, noRebuy)
					d := newTestDeductor(t, rdb, p, c.opts...)
					mustLoad(t, d, Activity{ID: "n", Stock: 10, PerUserLimit: 2, Shards: c.shards, NoRebuy: noRebuy})
					st, err := d.Stats(ctx, "n")
					require.NoError(t, err)
					assert.Equal(t, noRebuy, st.NoRebuy)
					for _, v := range metaField(t, rdb, p, "n", c.shards, "norebuy") {
						assert.Equal(t, map[bool]string{false: "0", true: "1"}[noRebuy], v)
					}
					r, err := d.Reserve(ctx, Request{Activity: "n", User: "buyer", Qty: 2, ReservationID: "first"})
					require.NoError(t, err)
					require.Equal(t, Reserved, r.Status)
					rel, err := d.Release(ctx, "n", "first")
					require.NoError(t, err)
					require.Equal(t, ReleaseDone, rel.Status)
					r, err = d.Reserve(ctx, Request{Activity: "n", User: "buyer", Qty: 1, ReservationID: "again"})
					require.NoError(t, err)
					var ever int64
					for _, k := range ledgerKeys(p, "n", c.shards) {
						if v, ok := hgetall(t, rdb, k.ever)["buyer"]; ok {
							ever, _ = strconv.ParseInt(v, 10, 64)
						}
					}
					if noRebuy {
						assert.Equal(t, LimitReached, r.Status, "released units still count")
						assert.EqualValues(t, 2, ever)
					} else {
						assert.Equal(t, Reserved, r.Status)
						assert.EqualValues(t, 0, ever, "nothing written without NoRebuy")
					}
					// Another buyer is not affected.
					r, err = d.Reserve(ctx, Request{Activity: "n", User: "other", Qty: 2, ReservationID: "o"})
					require.NoError(t, err)
					assert.Equal(t, Reserved, r.Status)
				})
			}
		}
	})
}

// obsLog records observer events.
type obsLog struct {
	mu sync.Mutex
	ev []observe.Event
}

func (o *obsLog) Observe(_ context.Context, e observe.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ev = append(o.ev, e)
}

func (o *obsLog) pairs() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, e := range o.ev {
		out = append(out, e.Stage+" "+e.Outcome+" "+e.Activity)
	}
	return out
}

func TestObserver(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		var o obsLog
		d := newTestDeductor(t, rdb, prefix, WithObserver(nil), WithObserver(&o), WithRecheckInterval(time.Hour))
		mustLoad(t, d, Activity{ID: "o", Stock: 1})
		_, _ = d.Reserve(ctx, Request{Activity: "o", User: "1", Qty: 1, ReservationID: "a"})
		_, _ = d.Reserve(ctx, Request{Activity: "o", User: "2", Qty: 1, ReservationID: "b"})
		_, _ = d.Reserve(ctx, Request{Activity: "o", User: "3", Qty: 1, ReservationID: "c"}) // local
		_, _ = d.Reserve(ctx, Request{Activity: "o", User: "", Qty: 1, ReservationID: "d"})
		_, _ = d.Release(ctx, "o", "a")
		_, _ = d.Release(ctx, "o", "a")
		_ = d.Pause(ctx, "o")
		_, _ = d.Reserve(ctx, Request{Activity: "o", User: "2", Qty: 1, ReservationID: "b"})
		_ = d.Resume(ctx, "o")
		_ = d.Pause(ctx, "none")
		_, _ = d.Adjust(ctx, AdjustParams{Activity: "o", ID: "t", Delta: 1})
		_, _ = d.Adjust(ctx, AdjustParams{Activity: "o", ID: "t", Delta: 1})
		_, _ = d.Adjust(ctx, AdjustParams{Activity: "o", ID: "w", Delta: -5})
		assert.Equal(t, []string{
			"stock.reserve reserved o",
			"stock.reserve sold_out o",
			"stock.reserve sold_out o",
			"stock.reserve error o",
			"stock.release released o",
			"stock.release duplicate o",
			"stock.pause ok o",
			"stock.reserve paused o",
			"stock.resume ok o",
			"stock.pause not_loaded none",
			"stock.adjust ok o",
			"stock.adjust replayed o",
			"stock.adjust insufficient o",
		}, o.pairs())
		o.mu.Lock()
		defer o.mu.Unlock()
		assert.EqualValues(t, 1, o.ev[10].Value)
		assert.NotNil(t, o.ev[3].Err)
	})
}
