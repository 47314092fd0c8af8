package stock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldInRedis counts, straight from Redis, the units held in the ledgers
// of the given activities (or variants) and the stock each has left.
func heldInRedis(t *testing.T, rdb redis.UniversalClient, prefix string, activities ...string) (held int64, left map[string]int64) {
	t.Helper()
	left = map[string]int64{}
	for _, a := range activities {
		k := activityKeys(prefix, a)
		left[a] = hint(t, rdb, k.meta, "stock")
		for _, s := range hgetall(t, rdb, k.buyers) {
			n, err := strconv.ParseInt(s, 10, 64)
			require.NoError(t, err)
			held += n
		}
		for id, rec := range hgetall(t, rdb, k.ledger) {
			r, err := parseRecord(id, rec)
			require.NoError(t, err)
			if r.State == Held {
				assert.Positive(t, r.Qty)
			}
		}
	}
	return held, left
}

// cartFixture loads a plain activity "p1", a plain activity "p2" and an
// activity "v" with variants A, B, C (C holds one unit).
func cartFixture(t *testing.T, d *Deductor) []string {
	t.Helper()
	mustLoad(t, d, Activity{ID: "p1", Stock: 10, PerUserLimit: 5})
	mustLoad(t, d, Activity{ID: "p2", Stock: 10, PerUserLimit: 5})
	mustLoad(t, d, Activity{ID: "v", PerUserLimit: 5, Variants: []Variant{{ID: "A", Stock: 10}, {ID: "B", Stock: 10}, {ID: "C", Stock: 1}}})
	return []string{"p1", "p2", VariantOf("v", "A"), VariantOf("v", "B"), VariantOf("v", "C")}
}

// TestLinesAllOrNothing: a 3-line cart is held whole or not at all, within
// one activity (one script) and across activities (steps undone on a
// refusal); a retry replays; ReleaseLines gives everything back once.
func TestLinesAllOrNothing(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		all := cartFixture(t, d)
		A, B, C := all[2], all[3], all[4]

		// Within one activity: line 3 (C, 1 unit) refuses 2 units.
		one := Lines{User: "1", ReservationID: "cart1", Lines: []Line{{Activity: A, Qty: 1}, {Activity: B, Qty: 1}, {Activity: C, Qty: 2}}}
		res, err := d.ReserveLines(ctx, one)
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.Equal(t, 2, res.Line)
		held, left := heldInRedis(t, rdb, prefix, all...)
		assert.Zero(t, held, "a refusal on line 3 leaves nothing held")
		assert.Equal(t, int64(10), left[A])
		assert.Empty(t, hgetall(t, rdb, activityKeys(prefix, A).ledger), "one script: nothing written")

		// Across activities: p1, p2, then C refuses: p1 and p2 undone.
		across := Lines{User: "1", ReservationID: "cart2", Lines: []Line{{Activity: "p1", Qty: 2}, {Activity: "p2", Qty: 1}, {Activity: C, Qty: 2}}}
		res, err = d.ReserveLines(ctx, across)
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.Equal(t, 2, res.Line)
		held, left = heldInRedis(t, rdb, prefix, all...)
		assert.Zero(t, held, "the lines before the refusal are released")
		assert.Equal(t, int64(10), left["p1"])
		res, err = d.ReserveLines(ctx, across)
		require.NoError(t, err)
		assert.Equal(t, Released, res.Status, "a retry of a refused cart holds nothing")
		held, _ = heldInRedis(t, rdb, prefix, all...)
		assert.Zero(t, held)

		// A cart that fits: held whole, a retry replays without deducting.
		ok := Lines{User: "1", ReservationID: "cart3", Lines: []Line{{Activity: "p1", Qty: 2}, {Activity: A, Qty: 1}, {Activity: C, Qty: 1}}}
		res, err = d.ReserveLines(ctx, ok)
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		assert.Equal(t, -1, res.Line)
		assert.False(t, res.Replayed)
		res, err = d.ReserveLines(ctx, ok)
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		assert.True(t, res.Replayed)
		held, left = heldInRedis(t, rdb, prefix, all...)
		assert.Equal(t, int64(4), held)
		assert.Equal(t, int64(8), left["p1"])
		assert.Zero(t, left[C])
		assert.Equal(t, Held, ledger(t, d, C)[lineID("cart3", 2)].State, "an ordinary ledger entry")

		rels, err := d.ReleaseLines(ctx, ok)
		require.NoError(t, err)
		for _, r := range rels {
			assert.Equal(t, ReleaseDone, r.Status)
		}
		rels, err = d.ReleaseLines(ctx, ok)
		require.NoError(t, err)
		for _, r := range rels {
			assert.Equal(t, ReleaseDuplicate, r.Status)
		}
		held, left = heldInRedis(t, rdb, prefix, all...)
		assert.Zero(t, held)
		assert.Equal(t, int64(10), left["p1"])
		assert.Equal(t, int64(1), left[C])
	})
}

// TestLinesCrashBetweenSteps: a kill after the first step (the test hook
// stops the call there) leaves line 1 held as an ordinary ledger entry;
// the reconciler's path (walk the ledger, release what has no order) or
// ReleaseLines leaves nothing held, and a late retry deducts nothing.
func TestLinesCrashBetweenSteps(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		all := cartFixture(t, d)
		d.linesStep = func(step int) bool { return step == 1 }
		for _, how := range []string{"reconciler", "release-lines"} {
			cart := Lines{User: "7", ReservationID: "crash-" + how, Lines: []Line{{Activity: "p1", Qty: 1}, {Activity: "p2", Qty: 1},
				{Activity: all[2], Qty: 1}}}
			_, err := d.ReserveLines(ctx, cart)
			require.ErrorIs(t, err, errStopped)
			held, _ := heldInRedis(t, rdb, prefix, all...)
			require.Equal(t, int64(1), held, "line 1 is held after the crash")
			r := ledger(t, d, "p1")[lineID(cart.ReservationID, 0)]
			assert.Equal(t, "7", r.User, "with the buyer")
			assert.False(t, r.ReservedAt.IsZero(), "and the time")
			switch how {
			case "reconciler":
				// No order exists for any entry: release every held one.
				for _, a := range all {
					for id, r := range ledger(t, d, a) {
						if r.State == Held {
							_, err := d.Release(ctx, a, id)
							require.NoError(t, err)
						}
					}
				}
			default:
				_, err := d.ReleaseLines(ctx, cart)
				require.NoError(t, err)
			}
			held, left := heldInRedis(t, rdb, prefix, all...)
			assert.Zero(t, held, how)
			assert.Equal(t, int64(10), left["p1"], how)
		}
		d.linesStep = nil
		cart := Lines{User: "7", ReservationID: "crash-release-lines", Lines: []Line{{Activity: "p1", Qty: 1}, {Activity: "p2", Qty: 1},
			{Activity: all[2], Qty: 1}}}
		res, err := d.ReserveLines(ctx, cart)
		require.NoError(t, err)
		assert.Equal(t, Released, res.Status, "a retry after ReleaseLines deducts nothing")
		held, _ := heldInRedis(t, rdb, prefix, all...)
		assert.Zero(t, held)
	})
}

// TestLimitGroupHammer: 3 concurrent sales of one product in a limit group
// of 2 units per buyer; many goroutines per buyer, each with its own
// reservation ID, on random sales: no buyer ever holds more than 2 over the
// 3 sales, the group counter equals the units held, and releasing gives
// the allowance back.
func TestLimitGroupHammer(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		sales := []string{"s1", "s2", "s3"}
		for _, s := range sales {
			mustLoad(t, d, Activity{ID: s, Stock: 1000, PerUserLimit: 2})
		}
		const buyers, perBuyer, limit = 8, 24, 2
		var wg sync.WaitGroup
		errs := make(chan error, buyers*perBuyer)
		for b := range buyers {
			for g := range perBuyer {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := d.ReserveLines(ctx, Lines{User: uid(b), ReservationID: fmt.Sprint("g", b, "-", g),
						Lines: []Line{{Activity: sales[g%3], Qty: 1, Group: "shoe", GroupLimit: limit}}})
					if err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		perUser := map[string]int64{}
		for _, s := range sales {
			_, per := heldSum(ledger(t, d, s))
			for u, n := range per {
				perUser[u] += n
			}
		}
		gk := groupKeys(prefix, "shoe")
		for b := range buyers {
			u := uid(b)
			assert.Equal(t, int64(limit), perUser[u], "buyer %s holds the group's limit, no more", u)
			assert.Equal(t, perUser[u], hint(t, rdb, gk[0], u), "the group counter agrees")
		}
		// Release one of buyer 0's lines: the allowance comes back.
		var id, sale string
		for _, s := range sales {
			for rid, r := range ledger(t, d, s) {
				if r.User == "0" && r.State == Held {
					id, sale = rid, s
				}
			}
		}
		require.NotEmpty(t, id)
		var g, n int
		_, err := fmt.Sscanf(id, "g0-%d#%d", &g, &n)
		require.NoError(t, err)
		cart := Lines{User: "0", ReservationID: fmt.Sprint("g0-", g), Lines: []Line{{Activity: sale, Qty: 1, Group: "shoe", GroupLimit: limit}}}
		_, err = d.ReleaseLines(ctx, cart)
		require.NoError(t, err)
		assert.Equal(t, int64(1), hint(t, rdb, gk[0], "0"))
		res, err := d.ReserveLines(ctx, Lines{User: "0", ReservationID: "again", Lines: []Line{{Activity: "s3", Qty: 1, Group: "shoe", GroupLimit: limit}}})
		require.NoError(t, err)
		assert.Equal(t, Reserved, res.Status)
		res, err = d.ReserveLines(ctx, Lines{User: "0", ReservationID: "over", Lines: []Line{{Activity: "s1", Qty: 1, Group: "shoe", GroupLimit: limit}}})
		require.NoError(t, err)
		assert.Equal(t, LimitReached, res.Status)
		assert.True(t, res.Group)
		assert.Equal(t, int64(2), hint(t, rdb, gk[0], "0"))
	})
}

// TestLimitGroupGivenBackOnRefusal: a cart whose stock line is refused
// gives its group allowance back; a retry of a taken line replays.
func TestLimitGroupGivenBackOnRefusal(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		mustLoad(t, d, Activity{ID: "x", Stock: 0, PerUserLimit: 2})
		mustLoad(t, d, Activity{ID: "y", Stock: 5, PerUserLimit: 2})
		gk := groupKeys(prefix, "p")
		res, err := d.ReserveLines(ctx, Lines{User: "1", ReservationID: "c", Lines: []Line{
			{Activity: "y", Qty: 1, Group: "p", GroupLimit: 3}, {Activity: "x", Qty: 1, Group: "p", GroupLimit: 3}}})
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.False(t, res.Group)
		held, err := rdb.HGet(ctx, gk[0], "1").Int64()
		if err != redis.Nil {
			require.NoError(t, err)
		}
		assert.Zero(t, held, "the allowance is given back")
		y := activityKeys(prefix, "y")
		assert.Equal(t, int64(5), hint(t, rdb, y.meta, "stock"))

		code, err := takeOne(t, d, "p", "r#0", "2", "x", 2, 3)
		require.NoError(t, err)
		assert.Equal(t, groupTaken, code)
		code, err = takeOne(t, d, "p", "r#0", "2", "x", 2, 3)
		require.NoError(t, err)
		assert.Equal(t, groupBefore, code, "a retry replays")
		assert.Equal(t, int64(2), hint(t, rdb, gk[0], "2"), "and takes nothing more")
		code, err = takeOne(t, d, "p", "r#0", "3", "x", 2, 3)
		require.NoError(t, err)
		assert.Equal(t, groupConflict, code)
		g, err := d.groupGive(ctx, "p", "r#0")
		require.NoError(t, err)
		assert.Equal(t, giveBackNow, g)
		g, err = d.groupGive(ctx, "p", "r#0")
		require.NoError(t, err)
		assert.Equal(t, giveBackBefore, g)
		g, err = d.groupGive(ctx, "p", "late#0")
		require.NoError(t, err)
		assert.Equal(t, giveBackTombstone, g)
		code, err = takeOne(t, d, "p", "late#0", "2", "x", 1, 3)
		require.NoError(t, err)
		assert.Equal(t, groupReleased, code, "a take after its give-back takes nothing")
	})
}

// TestExtendLinesOnce: a hold is extended once by its buyer: ReservedAt
// moves forward by the extension; a second extension (or a retry) changes
// nothing; another buyer or a released line cannot extend.
func TestExtendLinesOnce(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		all := cartFixture(t, d)
		cart := Lines{User: "1", ReservationID: "e", Lines: []Line{{Activity: "p1", Qty: 1}, {Activity: all[3], Qty: 1}}}
		res, err := d.ReserveLines(ctx, cart)
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		before := ledger(t, d, "p1")[lineID("e", 0)].ReservedAt

		at, first, err := d.ExtendLines(ctx, cart, 10*time.Minute)
		require.NoError(t, err)
		assert.True(t, first)
		assert.Equal(t, before.Add(10*time.Minute), at)
		assert.Equal(t, at, ledger(t, d, "p1")[lineID("e", 0)].ReservedAt, "the ledger time moved")
		assert.Equal(t, res.Lines[1].ReservedAt.Add(10*time.Minute), ledger(t, d, all[3])[lineID("e", 1)].ReservedAt, "each line's")

		at2, first, err := d.ExtendLines(ctx, cart, 10*time.Minute)
		require.NoError(t, err)
		assert.False(t, first, "a second extension is refused")
		assert.Equal(t, at, at2, "and changes nothing")
		assert.Equal(t, at, ledger(t, d, "p1")[lineID("e", 0)].ReservedAt)

		other := cart
		other.User = "2"
		at3, first, err := d.ExtendLines(ctx, other, time.Minute)
		require.NoError(t, err)
		assert.False(t, first)
		assert.True(t, at3.IsZero(), "another buyer cannot extend")

		_, err = d.ReleaseLines(ctx, cart)
		require.NoError(t, err)
		cart.ReservationID = "never"
		at4, first, err := d.ExtendLines(ctx, cart, time.Minute)
		require.NoError(t, err)
		assert.False(t, first)
		assert.True(t, at4.IsZero())
	})
}

func TestLinesInvalid(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		long := fmt.Sprintf("%0127d", 1) // no room for "#0"
		for _, req := range []Lines{
			{User: "1", ReservationID: "r"},
			{User: "1", ReservationID: "r", Lines: []Line{{Activity: "a", Qty: 1}, {Activity: "a", Qty: 1}}},
			{User: "1", ReservationID: "r", Lines: []Line{{Activity: "a", Qty: 0}}},
			{User: "1", ReservationID: long, Lines: []Line{{Activity: "a", Qty: 1}}},
			{User: "1", ReservationID: "r", Lines: []Line{{Activity: "a", Qty: 1, Group: "g"}}},
			{User: "1", ReservationID: "r", Lines: []Line{{Activity: "a", Qty: 1, Group: "g", GroupLimit: 1}, {Activity: "b", Qty: 1, Group: "g", GroupLimit: 2}}},
			{User: "a:b", ReservationID: "r", Lines: []Line{{Activity: "a", Qty: 1}}},
		} {
			_, err := d.ReserveLines(ctx, req)
			require.ErrorIs(t, err, ErrInvalidArgument, "%+v", req)
		}
	})
}

// TestSweepGroupAfterCrash: a cart of 3 grouped lines killed after its
// first step holds line 0 and the allowances of all 3 lines. The
// reconciler's path releases line 0; SweepGroup then gives back every
// allowance whose line holds nothing — the released line 0, and lines 1
// and 2, never reserved, which it tombstones first (a late step reserves
// nothing) — and leaves a whole cart's allowances alone. Counted from the
// group's hash and ledger in Redis.
func TestSweepGroupAfterCrash(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		all := cartFixture(t, d)
		gk := groupKeys(prefix, "grp")
		grouped := func(id string) Lines {
			return Lines{User: "7", ReservationID: id, Lines: []Line{{Activity: "p1", Qty: 1, Group: "grp", GroupLimit: 6},
				{Activity: "p2", Qty: 1, Group: "grp", GroupLimit: 6}, {Activity: all[2], Qty: 1, Group: "grp", GroupLimit: 6}}}
		}
		whole, err := d.ReserveLines(ctx, grouped("whole"))
		require.NoError(t, err)
		require.Equal(t, Reserved, whole.Status)
		d.linesStep = func(step int) bool { return step == 1 }
		_, err = d.ReserveLines(ctx, grouped("cut"))
		require.ErrorIs(t, err, errStopped)
		d.linesStep = nil
		require.Equal(t, int64(6), hint(t, rdb, gk[0], "7"), "3 + 3 allowances taken")

		// A sweep before the allowances are old enough does nothing.
		n, err := d.SweepGroup(ctx, "grp", time.Hour)
		require.NoError(t, err)
		assert.Zero(t, n)

		// The reconciler: the cut cart's held line has no order.
		rr, err := d.Release(ctx, "p1", lineID("cut", 0))
		require.NoError(t, err)
		require.Equal(t, ReleaseDone, rr.Status)
		n, err = d.SweepGroup(ctx, "grp", 0)
		require.NoError(t, err)
		assert.Equal(t, 3, n, "the cut cart's three allowances")
		assert.Equal(t, int64(3), hint(t, rdb, gk[0], "7"), "the whole cart's remain")
		for i := range 3 {
			rec := hgetall(t, rdb, gk[1])[lineID("cut", i)]
			assert.Contains(t, rec, ":X:", "line %d given back", i)
			assert.Contains(t, hgetall(t, rdb, gk[1])[lineID("whole", i)], ":R:", "the whole cart's line %d kept", i)
		}
		// Lines 1 and 2 were tombstoned: the cart's late retry deducts nothing.
		res, err := d.ReserveLines(ctx, grouped("cut"))
		require.NoError(t, err)
		assert.Equal(t, Released, res.Status)
		held, _ := heldInRedis(t, rdb, prefix, all...)
		assert.Equal(t, int64(3), held, "only the whole cart's lines are held")
		n, err = d.SweepGroup(ctx, "grp", 0)
		require.NoError(t, err)
		assert.Zero(t, n, "idempotent")

		_, err = d.SweepGroup(ctx, "bad group!", 0)
		assert.ErrorIs(t, err, ErrInvalidArgument)
		_, err = d.SweepGroup(ctx, "grp", -time.Second)
		assert.ErrorIs(t, err, ErrInvalidArgument)
	})
}

// TestRebuildGroupAfterLostTakes: the group's takes of two carts vanish
// (their records and the buyer's count, the group's fence untouched: a
// loss the fence cannot see, as a hand-made deletion); Redis would then
// admit a cart beyond the cap. RebuildGroup with
// the live lines of each activity (as the database holds them) takes
// them again: the buyer's allowance equals the live lines, the cap holds
// in Redis again, a second call takes nothing, and a line given back
// (cancelled) or tombstoned is not taken again.
func TestRebuildGroupAfterLostTakes(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		all := cartFixture(t, d)
		gk := groupKeys(prefix, "grp")
		acts := []string{"p1", "p2", all[2]}
		cart := func(user, id string) Lines {
			l := Lines{User: user, ReservationID: id}
			for _, a := range acts {
				l.Lines = append(l.Lines, Line{Activity: a, Qty: 1, Group: "grp", GroupLimit: 6})
			}
			return l
		}
		for _, id := range []string{"c1", "c2"} {
			res, err := d.ReserveLines(ctx, cart("7", id))
			require.NoError(t, err)
			require.Equal(t, Reserved, res.Status)
		}
		res, err := d.ReserveLines(ctx, cart("8", "c3"))
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		// Buyer 8 cancels c3: its allowances are given back (X).
		_, err = d.ReleaseLines(ctx, cart("8", "c3"))
		require.NoError(t, err)
		require.Equal(t, int64(6), hint(t, rdb, gk[0], "7"))

		// The loss: buyer 7's takes vanish (records and count).
		for _, id := range []string{"c1", "c2"} {
			for i := range acts {
				require.NoError(t, rdb.HDel(ctx, gk[1], lineID(id, i)).Err())
			}
		}
		require.NoError(t, rdb.HSet(ctx, gk[0], "7", 0).Err())
		// Redis now admits a cart the cap forbids (the DB guard would refuse it).
		over, err := d.ReserveLines(ctx, cart("7", "c4"))
		require.NoError(t, err)
		require.Equal(t, Reserved, over.Status, "the lost takes let a cart beyond the cap through")
		_, err = d.ReleaseLines(ctx, cart("7", "c4")) // the DB refused it: released
		require.NoError(t, err)

		// The rebuild from the live lines of every activity: c1 and c2
		// (buyer 7), and c3's — cancelled after the DB was read: given back,
		// so not taken again.
		live := map[string][]Reservation{}
		for i, a := range acts {
			live[a] = []Reservation{{ID: lineID("c1", i), User: "7", Qty: 1}, {ID: lineID("c2", i), User: "7", Qty: 1},
				{ID: lineID("c3", i), User: "8", Qty: 1}}
		}
		total, err := d.RebuildGroup(ctx, "grp", live)
		require.NoError(t, err)
		assert.Equal(t, 6, total, "c1's and c2's three lines each")
		assert.Equal(t, int64(6), hint(t, rdb, gk[0], "7"), "buyer 7's allowance equals the live lines")
		assert.NotContains(t, hgetall(t, rdb, gk[0]), "8", "c3 stays given back")
		rec := hgetall(t, rdb, gk[1])
		assert.Contains(t, rec[lineID("c1", 2)], ":R:", "taken again")
		assert.True(t, strings.HasSuffix(rec[lineID("c1", 2)], ":"+all[2]), "with the line's activity, for the sweep: %s", rec[lineID("c1", 2)])
		// The cap holds in Redis again.
		res, err = d.ReserveLines(ctx, cart("7", "c5"))
		require.NoError(t, err)
		assert.Equal(t, LimitReached, res.Status)
		assert.True(t, res.Group)
		// Idempotent.
		n, err := d.RebuildGroup(ctx, "grp", map[string][]Reservation{"p1": {{ID: lineID("c1", 0), User: "7", Qty: 1}}})
		require.NoError(t, err)
		assert.Zero(t, n)
		// The sweep keeps the rebuilt allowances (their lines are held).
		n, err = d.SweepGroup(ctx, "grp", 0)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Equal(t, int64(6), hint(t, rdb, gk[0], "7"))

		for _, bad := range []struct {
			group, act string
			live       []Reservation
		}{
			{"bad group!", "p1", nil},
			{"grp", "bad act!", nil},
			{"grp", "p1", []Reservation{{ID: "", User: "7", Qty: 1}}},
			{"grp", "p1", []Reservation{{ID: "x#0", User: "", Qty: 1}}},
			{"grp", "p1", []Reservation{{ID: "x#0", User: "7", Qty: 0}}},
		} {
			_, err := d.RebuildGroup(ctx, bad.group, map[string][]Reservation{bad.act: bad.live})
			assert.ErrorIs(t, err, ErrInvalidArgument, "%+v", bad)
		}
	})
}

// takeOne takes one line's allowance in group through group_take.lua.
func takeOne(t *testing.T, d *Deductor, group, id, user, activity string, qty, limit int64) (groupCode, error) {
	t.Helper()
	c, _, _, err := d.groupTake(context.Background(), group, user, limit, []groupLine{{id: id, activity: activity, qty: qty}})
	return c, err
}

// TestGroupCartsOfOneBuyerDoNotRefuseEachOther: one buyer sends several
// 2-line carts of one limit group (a cap of 2) at once, with stock to
// spare: exactly one is reserved and the buyer ends at the cap; the others
// are refused by the group. Taken line by line, two carts could each take
// a first line, both be refused the second and give back: every cart
// refused "limit reached" while the buyer held nothing.
func TestGroupCartsOfOneBuyerDoNotRefuseEachOther(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		const rounds, carts, limit = 60, 6, 2
		for _, s := range []string{"ga", "gb"} {
			mustLoad(t, d, Activity{ID: s, Stock: rounds * limit, PerUserLimit: limit})
		}
		for r := range rounds {
			user := uid(r + 1)
			start := make(chan struct{})
			var wg sync.WaitGroup
			res := make([]LinesResult, carts)
			errs := make([]error, carts)
			for c := range carts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res[c], errs[c] = d.ReserveLines(ctx, Lines{User: user, ReservationID: fmt.Sprint("r", r, "-", c), Lines: []Line{
						{Activity: "ga", Qty: 1, Group: "pair", GroupLimit: limit},
						{Activity: "gb", Qty: 1, Group: "pair", GroupLimit: limit}}})
				}()
			}
			close(start)
			wg.Wait()
			reserved := 0
			for c := range carts {
				require.NoError(t, errs[c])
				switch {
				case res[c].Status == Reserved:
					reserved++
				case res[c].Status == LimitReached && res[c].Group:
				default:
					t.Fatalf("round %d, cart %d: %+v", r, c, res[c])
				}
			}
			require.Equal(t, 1, reserved, "round %d: carts reserved of %d (the buyer held nothing else)", r, carts)
			require.Equal(t, int64(limit), groupHeld(t, rdb, prefix, "pair")[user], "round %d: the buyer's allowance", r)
		}
	})
}

// TestCartInTwoGroups: a cart whose lines lie in two limit groups, the
// lines interleaved, takes each group's allowances in one call. The second
// group's refusal names its line and gives the first group's back; a
// refusal in a group names the first line whose units cross the cap; a
// cart within both caps takes both, and its retry replays.
func TestCartInTwoGroups(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		for _, s := range []string{"ta", "tb", "tc"} {
			mustLoad(t, d, Activity{ID: s, Stock: 50, PerUserLimit: 10})
		}
		cart := func(id string, qa, qb int64) Lines {
			return Lines{User: "7", ReservationID: id, Lines: []Line{
				{Activity: "ta", Qty: 1, Group: "a", GroupLimit: 3},
				{Activity: "tb", Qty: qb, Group: "b", GroupLimit: 2},
				{Activity: "tc", Qty: qa, Group: "a", GroupLimit: 3}}}
		}
		res, err := d.ReserveLines(ctx, cart("over-b", 1, 3))
		require.NoError(t, err)
		assert.Equal(t, LinesResult{Status: LimitReached, Line: 1, Group: true, Lines: res.Lines}, res)
		assert.Zero(t, groupHeld(t, rdb, prefix, "a")["7"], "group a's allowances given back")
		assert.Zero(t, groupHeld(t, rdb, prefix, "b")["7"])

		res, err = d.ReserveLines(ctx, cart("over-a", 3, 1))
		require.NoError(t, err)
		assert.Equal(t, LinesResult{Status: LimitReached, Line: 2, Group: true, Lines: res.Lines}, res, "line 2 crosses a's cap (1 + 3 > 3)")
		assert.Zero(t, groupHeld(t, rdb, prefix, "a")["7"])

		res, err = d.ReserveLines(ctx, cart("fits", 2, 2))
		require.NoError(t, err)
		require.Equal(t, Reserved, res.Status)
		assert.Equal(t, int64(3), groupHeld(t, rdb, prefix, "a")["7"])
		assert.Equal(t, int64(2), groupHeld(t, rdb, prefix, "b")["7"])
		res, err = d.ReserveLines(ctx, cart("fits", 2, 2))
		require.NoError(t, err)
		assert.True(t, res.Status == Reserved && res.Replayed, "a retry replays: %+v", res)
		assert.Equal(t, int64(3), groupHeld(t, rdb, prefix, "a")["7"], "and takes nothing more")
		assert.Equal(t, int64(2), groupHeld(t, rdb, prefix, "b")["7"])
	})
}
