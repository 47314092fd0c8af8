package stock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idsOnMasters returns n activity IDs "<base><i>" whose keys lie on n
// distinct masters of the Cluster, as the Cluster itself says (CLUSTER
// KEYSLOT of every key of the activity, CLUSTER SLOTS for the master
// serving the slot); on any other Redis, the first n candidates.
func idsOnMasters(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix, base string, n int) []string {
	t.Helper()
	if kind != testenv.KindCluster {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = base + strconv.Itoa(i)
		}
		return ids
	}
	ctx := context.Background()
	ranges, err := rdb.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ranges), n, "masters")
	masterOf := func(slot int64) string {
		for _, r := range ranges {
			if slot >= int64(r.Start) && slot <= int64(r.End) {
				return r.Nodes[0].Addr
			}
		}
		t.Fatalf("slot %d not served", slot)
		return ""
	}
	slotOf := func(key string) int64 {
		s, err := rdb.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		return s
	}
	var ids []string
	used := map[string]string{}
	for i := 0; len(ids) < n && i < 1000; i++ {
		id := base + strconv.Itoa(i)
		ks := activityKeys(prefix, id).list()
		slot := slotOf(ks[0])
		for _, k := range ks[1:] {
			require.Equal(t, slot, slotOf(k), "every key of activity %s in one slot", id)
		}
		m := masterOf(slot)
		if _, ok := used[m]; ok {
			continue
		}
		used[m] = id
		ids = append(ids, id)
	}
	require.Len(t, ids, n, "activities on %d distinct masters", n)
	t.Logf("activities by master: %v", used)
	return ids
}

// masterOfGroup logs the slot and master of limit group g's keys on the
// Cluster (one slot for both).
func masterOfGroup(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix, g string) {
	t.Helper()
	if kind != testenv.KindCluster {
		return
	}
	ctx := context.Background()
	ks := groupKeys(prefix, g)
	s0, err := rdb.ClusterKeySlot(ctx, ks[0]).Result()
	require.NoError(t, err)
	s1, err := rdb.ClusterKeySlot(ctx, ks[1]).Result()
	require.NoError(t, err)
	require.Equal(t, s0, s1, "the group's keys in one slot")
	ranges, err := rdb.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	for _, r := range ranges {
		if s0 >= int64(r.Start) && s0 <= int64(r.End) {
			t.Logf("group %s in slot %d, on master %s", g, s0, r.Nodes[0].Addr)
		}
	}
}

// groupHeld reads a limit group's per-buyer units straight from Redis.
func groupHeld(t *testing.T, rdb redis.UniversalClient, prefix, g string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for u, s := range hgetall(t, rdb, groupKeys(prefix, g)[0]) {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		out[u] = n
	}
	return out
}

// TestLimitGroupAcrossMasters: 3 concurrent sales of one product whose
// keys lie on 3 distinct Cluster masters share a limit group of 2 units
// per buyer; many goroutines per buyer reserve 1-line carts and 2-line
// carts across two masters. A reader polls the group's counters in Redis
// while the buyers run: no buyer is ever above the cap. At the end the
// ledgers of the 3 sales, read from Redis, give each buyer at most 2
// units, equal to the group's counter, and every sale's stock is
// conserved.
func TestLimitGroupAcrossMasters(t *testing.T) {
	forEachRedisKind(t, func(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		sales := idsOnMasters(t, kind, rdb, prefix, "gm", 3)
		const stock, group, limit = 1000, "sneaker", 2
		masterOfGroup(t, kind, rdb, prefix, group)
		for _, s := range sales {
			mustLoad(t, d, Activity{ID: s, Stock: stock, PerUserLimit: limit})
		}
		buyers, perBuyer := 8, 12
		if kind != testenv.KindMiniredis {
			buyers, perBuyer = 64, 18
		}

		done := make(chan struct{})
		var peak int64
		var reads int
		var sampler sync.WaitGroup
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			for {
				m, err := rdb.HGetAll(ctx, groupKeys(prefix, group)[0]).Result()
				if err != nil {
					t.Errorf("read the group: %v", err)
					return
				}
				reads++
				for _, s := range m {
					n, _ := strconv.ParseInt(s, 10, 64)
					peak = max(peak, n)
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}()

		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		groupRefusals, reserved := 0, 0
		for b := range buyers {
			for g := range perBuyer {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lines := []Line{{Activity: sales[g%3], Qty: 1, Group: group, GroupLimit: limit}}
					if g%3 == 2 {
						lines = append(lines, Line{Activity: sales[(g+1)%3], Qty: 1, Group: group, GroupLimit: limit})
					}
					res, err := d.ReserveLines(ctx, Lines{User: uid(b), ReservationID: fmt.Sprint("g", b, "-", g), Lines: lines})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						errs = append(errs, err)
					case res.Status == Reserved:
						reserved++
					case res.Status == LimitReached && res.Group:
						groupRefusals++
					default:
						errs = append(errs, fmt.Errorf("buyer %d, cart %d: %v on line %d", b, g, res.Status, res.Line))
					}
				}()
			}
		}
		wg.Wait()
		close(done)
		sampler.Wait()
		require.Empty(t, errs)
		assert.LessOrEqual(t, peak, int64(limit), "a buyer above the group's cap in Redis, during the run")
		assert.Positive(t, groupRefusals, "the group's cap was contended")

		perUser := map[string]int64{}
		for _, s := range sales {
			k := activityKeys(prefix, s)
			l := ledger(t, d, s)
			sum, per := heldSum(l)
			for u, n := range per {
				perUser[u] += n
			}
			assert.Equal(t, int64(stock), hint(t, rdb, k.meta, "stock")+sum, "conservation of %s", s)
		}
		gh := groupHeld(t, rdb, prefix, group)
		atCap := 0
		for b := range buyers {
			u := uid(b)
			assert.LessOrEqual(t, perUser[u], int64(limit), "buyer %s over the group's cap", u)
			assert.Equal(t, perUser[u], gh[u], "buyer %s: the group's counter is the units held", u)
			if perUser[u] == limit {
				atCap++
			}
		}
		assert.Positive(t, atCap)
		t.Logf("%s: %d buyers x %d carts: %d reserved, %d refused by the group, %d buyers at the cap, %d reads of the group, peak %d",
			kind, buyers, perBuyer, reserved, groupRefusals, atCap, reads, peak)
	})
}

// cartState counts, straight from Redis, the units held in each sale and
// the lines of each cart held (by the cart's reservation ID).
func cartState(t *testing.T, rdb redis.UniversalClient, prefix string, sales []string) (held map[string]int64, left map[string]int64, carts map[string]int) {
	t.Helper()
	held, left, carts = map[string]int64{}, map[string]int64{}, map[string]int{}
	for _, s := range sales {
		k := activityKeys(prefix, s)
		left[s] = hint(t, rdb, k.meta, "stock")
		for _, v := range hgetall(t, rdb, k.buyers) {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			held[s] += n
		}
		for id, rec := range hgetall(t, rdb, k.ledger) {
			r, err := parseRecord(id, rec)
			require.NoError(t, err)
			if cart, _, ok := strings.Cut(id, "#"); ok && r.State == Held {
				carts[cart]++
			}
		}
	}
	return held, left, carts
}

// TestLinesAcrossMasters: a 3-line cart over 3 activities on 3 distinct
// Cluster masters, each line in a limit group, is all or nothing: when
// the last line is refused, and when the process dies after the first or
// the second step (the reconciler's walk of the ledgers, or ReleaseLines,
// then leaves nothing held and a late retry deducts nothing); and under
// concurrency, with some processes dying between steps, every cart ends
// held whole or not at all. Counted from Redis.
func TestLinesAcrossMasters(t *testing.T) {
	forEachRedisKind(t, func(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		sales := idsOnMasters(t, kind, rdb, prefix, "cm", 3)
		masterOfGroup(t, kind, rdb, prefix, "cg")
		mustLoad(t, d, Activity{ID: sales[0], Stock: 10, PerUserLimit: 5})
		mustLoad(t, d, Activity{ID: sales[1], Stock: 10, PerUserLimit: 5})
		mustLoad(t, d, Activity{ID: sales[2], Stock: 1, PerUserLimit: 5})
		cart := func(id string, qty2 int64) Lines {
			return Lines{User: "1", ReservationID: id, Lines: []Line{
				{Activity: sales[0], Qty: 1, Group: "cg", GroupLimit: 10},
				{Activity: sales[1], Qty: 1, Group: "cg", GroupLimit: 10},
				{Activity: sales[2], Qty: qty2, Group: "cg", GroupLimit: 10}}}
		}
		full := map[string]int64{sales[0]: 10, sales[1]: 10, sales[2]: 1}
		nothing := func(msg string) {
			t.Helper()
			held, left, carts := cartState(t, rdb, prefix, sales)
			for _, s := range sales {
				assert.Zero(t, held[s], "%s: %s holds nothing", msg, s)
			}
			assert.Equal(t, full, left, msg)
			assert.Empty(t, carts, msg)
			assert.Zero(t, groupHeld(t, rdb, prefix, "cg")["1"], "%s: the group's allowance is back", msg)
		}

		// The last line (2 units of 1) is refused: the first two are undone.
		res, err := d.ReserveLines(ctx, cart("refused", 2))
		require.NoError(t, err)
		assert.Equal(t, SoldOut, res.Status)
		assert.Equal(t, 2, res.Line)
		nothing("refused on line 3")
		for i := range 2 {
			assert.Equal(t, Freed, ledger(t, d, sales[i])[lineID("refused", i)].State, "line %d undone", i)
		}

		// A kill after step 1 or 2 of 3.
		for _, stop := range []int{1, 2} {
			for _, how := range []string{"reconciler", "release-lines"} {
				id := fmt.Sprint("crash-", stop, "-", how)
				d.linesStep = func(step int) bool { return step == stop }
				_, err := d.ReserveLines(ctx, cart(id, 1))
				d.linesStep = nil
				require.ErrorIs(t, err, errStopped)
				held, _, carts := cartState(t, rdb, prefix, sales)
				assert.Equal(t, stop, carts[id], "%s: the lines before the kill are held", id)
				assert.Equal(t, int64(stop), held[sales[0]]+held[sales[1]]+held[sales[2]], id)
				assert.Equal(t, int64(3), groupHeld(t, rdb, prefix, "cg")["1"], "%s: every allowance taken first", id)
				if how == "reconciler" {
					// No order exists for any entry: release every held one.
					for _, s := range sales {
						for rid, r := range ledger(t, d, s) {
							if r.State == Held {
								_, err := d.Release(ctx, s, rid)
								require.NoError(t, err)
							}
						}
					}
					held, left, _ := cartState(t, rdb, prefix, sales)
					assert.Zero(t, held[sales[0]]+held[sales[1]]+held[sales[2]], "%s: the reconciler leaves no stock held", id)
					assert.Equal(t, full, left, id)
					assert.Equal(t, int64(3), groupHeld(t, rdb, prefix, "cg")["1"],
						"%s: the group's allowance stays taken until ReleaseLines (the buyer's side)", id)
				}
				_, err = d.ReleaseLines(ctx, cart(id, 1))
				require.NoError(t, err)
				nothing(id)
				res, err := d.ReserveLines(ctx, cart(id, 1))
				require.NoError(t, err)
				assert.Equal(t, Released, res.Status, "%s: a late retry", id)
				nothing(id + ", retried")
			}
		}

		// Concurrent carts: the third sale has 20 units for 60 buyers, and
		// 20 more buyers' processes die before the third step.
		cs := idsOnMasters(t, kind, rdb, prefix, "cc", 3)
		mustLoad(t, d, Activity{ID: cs[0], Stock: 1000, PerUserLimit: 1})
		mustLoad(t, d, Activity{ID: cs[1], Stock: 1000, PerUserLimit: 1})
		mustLoad(t, d, Activity{ID: cs[2], Stock: 20, PerUserLimit: 1})
		crashing := newTestDeductor(t, rdb, prefix)
		crashing.linesStep = func(step int) bool { return step == 2 }
		const buyers, dying = 60, 20
		req := func(b int) Lines {
			ls := make([]Line, 3)
			for i := range ls {
				ls[i] = Line{Activity: cs[i], Qty: 1, Group: "cc", GroupLimit: 3}
			}
			return Lines{User: uid(b), ReservationID: fmt.Sprint("k", b), Lines: ls}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		reserved := map[string]bool{}
		var errs []error
		for b := range buyers + dying {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dd := d
				if b >= buyers {
					dd = crashing
				}
				res, err := dd.ReserveLines(ctx, req(b))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case b >= buyers && err != errStopped:
					errs = append(errs, fmt.Errorf("buyer %d: %v, want the kill", b, err))
				case b >= buyers:
				case err != nil:
					errs = append(errs, err)
				case res.Status == Reserved:
					reserved[fmt.Sprint("k", b)] = true
				case res.Status != SoldOut || res.Line != 2:
					errs = append(errs, fmt.Errorf("buyer %d: %v on line %d", b, res.Status, res.Line))
				}
			}()
		}
		wg.Wait()
		require.Empty(t, errs)
		// The reconciler of the dead processes: ReleaseLines of their carts.
		for b := buyers; b < buyers+dying; b++ {
			_, err := d.ReleaseLines(ctx, req(b))
			require.NoError(t, err)
		}
		held, left, carts := cartState(t, rdb, prefix, cs)
		assert.Len(t, reserved, 20, "the third sale's 20 units, each in a whole cart")
		for c, n := range carts {
			assert.Equal(t, 3, n, "cart %s is held whole or not at all", c)
			assert.True(t, reserved[c], "cart %s held but not answered Reserved", c)
		}
		assert.Len(t, carts, len(reserved))
		gh := groupHeld(t, rdb, prefix, "cc")
		for b := range buyers + dying {
			want := int64(0)
			if reserved[fmt.Sprint("k", b)] {
				want = 3
			}
			assert.Equal(t, want, gh[uid(b)], "buyer %d's group allowance", b)
		}
		for i, s := range cs {
			assert.Equal(t, int64(20), held[s], "%s: 20 units held, in the whole carts", s)
			assert.Equal(t, []int64{980, 980, 0}[i], left[s], s)
		}
	})
}
