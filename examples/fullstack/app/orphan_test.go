package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
	"github.com/seckillkit/seckill/stock"
)

// TestReconcilerOrphanFreezesAndRebuilds: Redis loses an acknowledged
// reservation of size 37 — the size's keys go back to a copy taken before
// the buy, as a replica that missed the write would be promoted — and no
// buyer asks for size 37 again, so the data-loss fence (which judges the
// Deductors' calls) never sees it. The copy counts the lost unit as free.
// The reconciler reports the live order as an orphan; the deployment
// confirms it with a lookup and freezes the size, and the preloader's
// recovery rebuilds it from the DB: the reservation is held again and the
// size's stock is conserved (counted from Redis and SQL). Before, the
// orphan was only logged and Redis kept offering the unit (FC2l's finding).
func TestReconcilerOrphanFreezesAndRebuilds(t *testing.T) {
	cfg := variantConfig(10)
	cfg.ReconcileEvery = 100 * time.Millisecond
	app.SetPreloadEvery(&cfg, 200*time.Millisecond)
	a, base := startApp(t, cfg)
	ctx := context.Background()
	mini := app.Miniredis(a)
	rdb := redis.NewClient(&redis.Options{Addr: mini.Addr()})
	defer rdb.Close()
	sale := app.ActivityID(a)
	s37 := stock.VariantOf(sale, "37")

	// The copy before the buy: every key of size 37.
	tag := "{a:" + sale + "}:v:37:"
	var keys []string
	for _, k := range mini.Keys() {
		if strings.Contains(k, tag) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		t.Fatalf("no key of size 37 (%q) among %v", tag, mini.Keys())
	}
	snap := snapshot(ctx, t, rdb, keys)

	u := login(t, base, "user1")
	cid, ans, tok, path := u.creds()
	code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "o1", "variant": "37"})
	if code != 202 {
		t.Fatalf("buy of size 37: %d %v", code, m)
	}
	resv := u.str(m, "reservation")
	until(t, drainBound, "the order of size 37", func() bool {
		_, view := u.do("GET", "/api/result/"+strings.ReplaceAll(resv, "/", "%2F"), nil)
		return u.str(view, "status") == "created"
	})
	before, err := app.Stock(a).Stats(ctx, s37)
	if err != nil || before.Remaining != 1 {
		t.Fatalf("size 37 after the buy: %+v %v", before, err)
	}

	// The loss: size 37's keys as they were before the buy.
	for _, k := range mini.Keys() { // and the keys the buy made
		if strings.Contains(k, tag) && snap[k] == nil {
			keys = append(keys, k)
		}
	}
	restore(ctx, t, rdb, keys, snap)
	if st, err := app.Stock(a).Stats(ctx, s37); err != nil || st.Remaining != 2 {
		t.Fatalf("size 37 after the loss: %+v %v, want the unit counted free again", st, err)
	}

	// Nobody buys size 37 again. The reconciler finds the orphan, the size
	// is frozen and rebuilt: one unit held (the order's), one left.
	until(t, time.Minute, "size 37 rebuilt with the order's reservation", func() bool {
		st, err := app.Stock(a).Stats(ctx, s37)
		return err == nil && st.Loaded && !st.Frozen && st.Remaining == 1 && st.Epoch != before.Epoch
	})
	var iv load.Invariants
	until(t, drainBound, "settled", func() bool {
		iv = countsOf(t, a)
		return iv.OutboxPending == 0 && iv.InFlight == 0
	})
	for _, v := range load.CheckVariants(iv, map[string]int{"36": 0, "37": 1, "38": 0}, nil) {
		t.Errorf("after the repair: invariant violated: %s", v)
	}
}

// snapshot reads keys (hashes, sets, strings, sorted sets: what the stock
// ledger uses) as restore writes them back; miniredis's DUMP takes
// strings only.
func snapshot(ctx context.Context, t *testing.T, rdb *redis.Client, keys []string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "hash":
			out[k], err = rdb.HGetAll(ctx, k).Result()
		case "set":
			out[k], err = rdb.SMembers(ctx, k).Result()
		case "string":
			out[k], err = rdb.Get(ctx, k).Result()
		case "zset":
			out[k], err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		default:
			t.Fatalf("key %s of type %s", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// restore writes snap back over keys: each key as it was (a key absent
// from the snapshot is deleted), in one transaction.
func restore(ctx context.Context, t *testing.T, rdb *redis.Client, keys []string, snap map[string]any) {
	t.Helper()
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
			switch v := snap[k].(type) {
			case map[string]string:
				if len(v) > 0 {
					p.HSet(ctx, k, v)
				}
			case []string:
				if len(v) > 0 {
					p.SAdd(ctx, k, v)
				}
			case string:
				p.Set(ctx, k, v, 0)
			case []redis.Z:
				if len(v) > 0 {
					p.ZAdd(ctx, k, v...)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReconcilerLeavesRebuiltCopyAlone: Redis loses the whole sale (its
// keys wiped) after an order; the reconciler's report lists that order as
// an orphan, and the preloader rebuilds the sale from the DB while the
// reconciler is still confirming it. The reconciler must not freeze the
// copy it did not judge: the sale is rebuilt once, and stays open. Before,
// its lookup on the wiped copy found nothing, and its freeze then landed
// on the copy just rebuilt: a second freeze and rebuild, buyers answered
// "busy" in between (the crash tier's C3 met it, its buyers then ran out
// of tries). The hook lets the rebuild happen between the lookups and the
// freeze, every run.
func TestReconcilerLeavesRebuiltCopyAlone(t *testing.T) {
	cfg := embeddedConfig(10, 2)
	cfg.ReconcileEvery = time.Hour // the test runs the repair itself
	app.SetPreloadEvery(&cfg, 100*time.Millisecond)
	ctx := context.Background()
	var a *app.App
	var sale string
	var before stock.Stats
	rebuilt := func() (stock.Stats, bool) {
		st, err := app.Stock(a).Stats(ctx, sale)
		return st, err == nil && st.Loaded && !st.Frozen && st.Epoch != before.Epoch
	}
	// first is the copy the preloader rebuilt first, seen by the hook or,
	// when the repair never reaches it, by the test.
	var first stock.Stats
	hooked := 0
	awaitRebuild := func() {
		until(t, time.Minute, "the preloader's rebuild", func() bool { var ok bool; first, ok = rebuilt(); return ok })
	}
	app.SetBeforeOrphanFreeze(&cfg, func() {
		hooked++
		awaitRebuild()
	})
	a, base := startApp(t, cfg)
	sale = app.ActivityID(a)
	mini := app.Miniredis(a)

	u := login(t, base, "user1")
	cid, ans, tok, path := u.creds()
	code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "w1"})
	if code != 202 {
		t.Fatalf("buy: %d %v", code, m)
	}
	resv := u.str(m, "reservation")
	var orderNo string
	until(t, drainBound, "the order", func() bool {
		_, view := u.do("GET", "/api/result/"+resv, nil)
		orderNo = u.str(view, "order_no")
		return u.str(view, "status") == "created"
	})
	var err error
	if before, err = app.Stock(a).Stats(ctx, sale); err != nil || !before.Loaded {
		t.Fatalf("the sale before the loss: %+v %v", before, err)
	}

	// The loss: every key of the sale.
	tag := "{a:" + sale + "}"
	for _, k := range mini.Keys() {
		if strings.Contains(k, tag) {
			mini.Del(k)
		}
	}
	app.RepairOrphans(ctx, a, sale, []string{orderNo})
	if first.Epoch == 0 {
		awaitRebuild()
	}
	// The rebuilt copy holds the order's reservation: a repair now finds
	// it, and freezes nothing.
	app.RepairOrphans(ctx, a, sale, []string{orderNo})
	st, err := app.Stock(a).Stats(ctx, sale)
	if err != nil || st.Frozen || st.Epoch != first.Epoch {
		t.Errorf("after the repairs (hook reached %d times): %+v %v, want the copy rebuilt at epoch %d open and rebuilt once",
			hooked, st, err, first.Epoch)
	}
	if st.Remaining != before.Remaining {
		t.Errorf("remaining %d after the rebuild, want %d (the order's unit held)", st.Remaining, before.Remaining)
	}
}
