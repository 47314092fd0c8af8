package stock

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupCopy is a copy of a limit group's three hashes, to put back as a
// failover to a replica that missed the later writes would.
type groupCopy [3]map[string]string

func copyGroup(t *testing.T, rdb redis.UniversalClient, keys []string) groupCopy {
	t.Helper()
	var c groupCopy
	for i, k := range keys {
		c[i] = hgetall(t, rdb, k)
	}
	return c
}

func (c groupCopy) restore(t *testing.T, rdb redis.UniversalClient, keys []string) {
	t.Helper()
	ctx := context.Background()
	for i, k := range keys {
		require.NoError(t, rdb.Del(ctx, k).Err())
		if len(c[i]) > 0 {
			require.NoError(t, rdb.HSet(ctx, k, c[i]).Err())
		}
	}
}

// groupCart is a cart of one unit of each of acts in group "grp" (cap 4).
func groupCart(user, id string, acts ...string) Lines {
	l := Lines{User: user, ReservationID: id}
	for _, a := range acts {
		l.Lines = append(l.Lines, Line{Activity: a, Qty: 1, Group: "grp", GroupLimit: 4})
	}
	return l
}

// TestGroupFence: the limit group's data-loss fence. A rollback of the
// group's state (its hashes put back to a copy from before two carts, as
// a failover to a replica that missed them) and a wipe (its keys gone) are
// each seen by the Deductor that saw the later writes: its next cart is
// refused Frozen (Group true) with nothing held, the group is frozen in
// Redis so a Deductor that never knew it refuses too, give-backs still
// work, and RebuildGroup from the live lines lifts the freeze with the
// buyers' allowances equal to their live lines, so the cap holds again.
func TestGroupFence(t *testing.T) {
	for _, loss := range []string{"rollback", "wipe"} {
		t.Run(loss, func(t *testing.T) {
			forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
				ctx := context.Background()
				d := newTestDeductor(t, rdb, prefix)
				cartFixture(t, d)
				gk := groupKeys(prefix, "grp")
				live := map[string][]Reservation{}
				buy := func(d *Deductor, user, id string) LinesResult {
					t.Helper()
					res, err := d.ReserveLines(ctx, groupCart(user, id, "p1", "p2"))
					require.NoError(t, err)
					if res.Status == Reserved {
						for i, a := range []string{"p1", "p2"} {
							live[a] = append(live[a], Reservation{ID: lineID(id, i), User: user, Qty: 1})
						}
					}
					return res
				}
				require.Equal(t, Reserved, buy(d, "7", "c1").Status)
				before := copyGroup(t, rdb, gk)
				require.Equal(t, Reserved, buy(d, "7", "c2").Status)
				require.Equal(t, Reserved, buy(d, "8", "c3").Status)
				require.Equal(t, int64(4), hint(t, rdb, gk[0], "7"))

				if loss == "rollback" {
					before.restore(t, rdb, gk)
					// The first call after the loss is c1's retry (its takes
					// survived the rollback): refused Frozen, and c1's
					// allowance stays taken — the cart may be an order, and
					// the rebuild leaves a given-back line alone.
					res, err := d.ReserveLines(ctx, groupCart("7", "c1", "p1", "p2"))
					require.NoError(t, err)
					assert.Equal(t, Frozen, res.Status, "c1's retry after the rollback")
					assert.Equal(t, int64(2), hint(t, rdb, gk[0], "7"), "c1's allowance kept")
					assert.Contains(t, hgetall(t, rdb, gk[1])[lineID("c1", 0)], ":R:")
				} else {
					for _, k := range gk {
						require.NoError(t, rdb.Del(ctx, k).Err())
					}
				}
				// Without the fence buyer 7 (allowance 2 or 0 in Redis, 4 live)
				// would get another cart.
				res := buy(d, "7", "c4")
				assert.Equal(t, Frozen, res.Status, "the cart after the loss")
				assert.True(t, res.Group)
				assert.Equal(t, "1", hgetall(t, rdb, gk[2])["frozen"], "frozen in Redis")
				held, _ := heldInRedis(t, rdb, prefix, "p1", "p2")
				assert.Equal(t, int64(6), held, "c4 holds nothing (c1–c3 hold 6 units)")

				fresh := newTestDeductor(t, rdb, prefix) // knew nothing of the group
				assert.Equal(t, Frozen, buy(fresh, "9", "c5").Status, "frozen for every Deductor")
				_, err := d.ReleaseLines(ctx, groupCart("8", "c3", "p1", "p2")) // a give-back still works
				require.NoError(t, err)
				live["p1"], live["p2"] = live["p1"][:2], live["p2"][:2] // c3 cancelled

				taken, err := d.RebuildGroup(ctx, "grp", live)
				require.NoError(t, err)
				if loss == "rollback" {
					assert.Equal(t, 2, taken, "c2's two lines taken again")
				} else {
					assert.Equal(t, 4, taken, "c1's and c2's lines taken again")
				}
				assert.Equal(t, int64(4), hint(t, rdb, gk[0], "7"), "buyer 7's allowance equals the live lines")
				assert.Empty(t, hgetall(t, rdb, gk[2])["frozen"], "the freeze lifted")
				assert.Equal(t, LimitReached, buy(d, "7", "c6").Status, "the cap holds again")
				assert.Equal(t, Reserved, buy(fresh, "9", "c7").Status, "others buy again")
				assert.Equal(t, Reserved, buy(d, "9", "c8").Status, "the rebuilding Deductor adopted the new epoch")
			})
		})
	}
}

// TestGroupFenceNoFalseAlarm: two Deductors taking and giving back in one
// group concurrently (replies arriving in any order) never see a loss.
func TestGroupFenceNoFalseAlarm(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		ds := []*Deductor{newTestDeductor(t, rdb, prefix), newTestDeductor(t, rdb, prefix)}
		mustLoad(t, ds[0], Activity{ID: "p1", Stock: 1000, PerUserLimit: 5})
		mustLoad(t, ds[0], Activity{ID: "p2", Stock: 1000, PerUserLimit: 5})
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[Status]int{}
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := ds[w%2]
				for i := range 25 {
					user, id := fmt.Sprint(w*100+i%5), fmt.Sprintf("w%dc%d", w, i)
					res, err := d.ReserveLines(ctx, groupCart(user, id, "p1", "p2"))
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					statuses[res.Status]++
					mu.Unlock()
					if i%3 == 0 {
						_, err := d.ReleaseLines(ctx, groupCart(user, id, "p1", "p2"))
						assert.NoError(t, err)
					}
				}
			}()
		}
		wg.Wait()
		assert.Zero(t, statuses[Frozen], "no loss seen: %v", statuses)
		assert.Positive(t, statuses[Reserved])
		assert.Empty(t, hgetall(t, rdb, groupKeys(prefix, "grp")[2])["frozen"])
	})
}
