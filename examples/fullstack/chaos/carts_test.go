package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// The cart scenarios (issue #27): buyer processes (crash/cartbuyer)
// reserve 3-line carts with stock.Deductor.ReserveLines — two plain sales
// and a variant of a third, every line in one limit group — and write
// each as one order with lines in one transaction (order.Processor, whose
// TxHook holds the group's cap in the database), journaling every step;
// the fault strikes while carts are in flight; then the buyers end (each
// settles the carts an error left: its order if the database has one,
// else ReleaseLines), the units the stock's data-loss fence froze are
// rebuilt from the database, the reconciler runs, and crash.CheckCarts
// counts from SQL and Redis: no oversell per sale and variant, every
// per-buyer cap and the group's cap in Redis and in the database,
// conservation per unit (remaining + held = initial in Redis, remaining +
// live lines = initial in the database, and the two equal once settled),
// every order with its 3 lines, no duplicate order, every journaled order
// live, and every cart an order with all its lines or holding no stock;
// the group's allowances equal the buyers' live lines where no write was
// lost.
//
//	FC1   kill -9 of buyers between the lines of a cart (crash.RunCartKill)
//	FC2   Sentinel failover without losing writes (the master refuses writes, the replica in step, SENTINEL FAILOVER)
//	FC2l  Sentinel failover losing the last writes (the replica cut off, the master kill -9'd)
//	FC3   a limit group over 3 sales on 3 Cluster masters, buyers racing, a master killed, a buyer killed
type cartScenario struct {
	id, what string
	run      func(t *testing.T, dsn string, seed uint64)
}

func cartScenarios() []cartScenario {
	return []cartScenario{
		{"FC1", "cart buyers kill -9'd between the lines of a 3-line cart (and at a seeded moment), reconciled, restarted", runFC1},
		{"FC2", "Redis failover mid-cart without losing writes (Sentinel: the master refuses writes, the replica in step, SENTINEL FAILOVER)", runCartFailover(false)},
		{"FC2l", "Redis failover mid-cart losing the last writes (Sentinel: the replica cut off 0.3–0.8 s, the master kill -9'd)", runCartFailover(true)},
		{"FC3", "a limit group split over 3 Cluster masters: 4 buyer processes racing for 10 buyers' caps, the master of one sale kill -9'd (replica promoted, the node restarted), a buyer kill -9'd", runFC3},
	}
}

// TestChaosCarts runs the cart scenarios (SECKILL_CHAOS_RUN selects them
// by ID, as it selects TestChaos's).
func TestChaosCarts(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos battery: real processes, not run with -short")
	}
	dsn := os.Getenv("SECKILL_MYSQL_DSN")
	if dsn == "" {
		t.Skip("SECKILL_MYSQL_DSN not set: the cart scenarios write orders on MariaDB")
	}
	if _, err := execLook("redis-server"); err != nil {
		t.Skip("redis-server not on PATH: the cart scenarios run their own Redis")
	}
	k := readKnobs(t)
	var names []string
	var fns []func(*testing.T)
	for _, sc := range cartScenarios() {
		if k.only != nil && !k.only[sc.id] {
			continue
		}
		for i := 0; i < k.seeds; i++ {
			seed := seedOf(sc.id, i)
			names = append(names, fmt.Sprintf("%s/seed=%d", sc.id, seed))
			fns = append(fns, func(t *testing.T) {
				start := time.Now()
				sc.run(t, dsn, seed)
				t.Logf("%s: %s, %v", sc.id, sc.what, time.Since(start).Round(time.Second))
			})
		}
	}
	runRows(t, k.parallel, names, fns, nil)
}

// cartBound bounds the cart buyers' runs and the waits on Redis: limits
// for a loaded 2-core machine, not expectations.
const cartBound = 2 * time.Minute

func runFC1(t *testing.T, dsn string, seed uint64) {
	srv := crash.StartRedis(t, crash.NoPersistence)
	rdb := srv.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	crash.RunCartKill(t, dsn, rdb, crash.CartBuyerConfig{Redis: srv.Addr()}, seed)
}

// replOffset is a node's master_repl_offset (master or replica).
func replOffset(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "master_repl_offset:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no master_repl_offset in INFO replication")
}

// runCartFailover is FC2 (lossy false) and FC2l (lossy true).
//
// What a lost write can do to a cart (FC2l): the master acknowledged the
// lag's writes and the promoted replica never had them. Per sale and
// variant they are reservations, releases and tombstones, under the
// stock's data-loss fence: the buyers' Deductors saw the higher seq, so
// the first reply from the promoted copy answers Frozen and freezes that
// unit (the carts in flight are refused there and their earlier steps
// released: all or nothing holds); the frozen units are rebuilt from the
// database's live lines, so a cart whose reservation was lost but whose
// order committed is held again, and one that never became an order is
// gone. The limit group's hash has no fence: a lost take leaves Redis
// under the buyer's live lines (Redis could then admit a cart beyond the
// cap, which the database's group row would refuse), a lost give-back
// leaves an allowance taken (the buyer refused early). After the units'
// rebuild the group is rebuilt too (stock.Deductor.RebuildGroup from the
// database's live lines, then the group's sweep): every allowance equals
// the buyer's live lines again, and when the sale resumes Redis admits no
// cart beyond the cap (the database's group row refuses none).
func runCartFailover(lossy bool) func(t *testing.T, dsn string, seed uint64) {
	return func(t *testing.T, dsn string, seed uint64) {
		ctx := context.Background()
		t0 := time.Now()
		rs := startRedisSentinel(t)
		rdb, err := crash.NewRedisClient("", rs.spec(), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		// A larger sale, carts paced: carts are still in flight, and
		// stock and caps left, when the failover ends.
		sale := crash.DefaultCartSale("cf:")
		sale.Users, sale.Stock, sale.VariantStock = 100, 150, 30
		rig := crash.NewCartRig(t, dsn, rdb, crash.CartBuyerConfig{Sentinel: rs.spec()}, sale)
		rig.Pace = 40 * time.Millisecond
		rng := rand.New(rand.NewPCG(seed, 2))
		for i := 1; i <= 3; i++ {
			rig.StartBuyer(i, 150, 3, seed+uint64(i), "")
		}
		t.Logf("Redis up (%v)", time.Since(t0).Round(time.Millisecond))
		rig.WaitOrders(int64(4+rng.IntN(8)), cartBound)
		t.Logf("strike (%v)", time.Since(t0).Round(time.Millisecond))
		old, err := rs.master(ctx)
		if err != nil {
			t.Fatal(err)
		}
		oldIdx := 0
		if rs.addrs[1] == old {
			oldIdx = 1
		}
		master, replica := rs.client(old), rs.client(rs.addrs[1-oldIdx])
		defer master.Close()
		defer replica.Close()
		if lossy {
			lag := 300*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond)))
			rp := rs.nodes[1-oldIdx]
			if err := rp.signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			n, err := master.ClientKillByFilter(ctx, "TYPE", "replica").Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("SIGSTOP replica %s, master %s closed %d replication link(s); %v of writes it will miss", rs.addrs[1-oldIdx], old, n, lag)
			before := rig.Orders()
			time.Sleep(lag) // the lag's length: a schedule, not a synchronisation
			if err := rs.nodes[oldIdx].kill(); err != nil {
				t.Fatal(err)
			}
			if err := rp.signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			t.Logf("kill -9 master %s (orders during the lag: %d); SIGCONT replica", old, rig.Orders()-before)
		} else {
			// Writes refused on the master from now on
			// (min-replicas-to-write 2 with one replica: a script's first
			// write fails NOREPLICAS, so a refused script writes nothing and
			// nothing refused was acknowledged), the replica brought in step
			// with every write acknowledged before, then the Sentinels'
			// failover: nothing acknowledged is lost.
			if err := master.ConfigSet(ctx, "min-replicas-to-write", "2").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rs.waitFor("the replica in step with the master", func(ctx context.Context) (bool, error) {
				m, err1 := replOffset(ctx, master)
				r, err2 := replOffset(ctx, replica)
				return err1 == nil && err2 == nil && m == r, nil
			}); err != nil {
				t.Fatal(err)
			}
			s := redis.NewSentinelClient(&redis.Options{Addr: rs.sAddrs[0], DialTimeout: time.Second})
			err := s.Failover(ctx, sentinelMaster).Err()
			_ = s.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("master %s refuses writes (min-replicas-to-write 2), the replica in step, SENTINEL FAILOVER", old)
		}
		var promoted string
		if err := rs.waitFor("the Sentinels promoted the replica", func(ctx context.Context) (bool, error) {
			m, err := rs.master(ctx)
			if err != nil || m == old {
				return false, nil
			}
			c := rs.client(m)
			defer c.Close()
			info, err := c.Info(ctx, "replication").Result()
			promoted = m
			return err == nil && strings.Contains(info, "role:master"), nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("the Sentinels promoted %s; %d orders so far (%v)", promoted, rig.Orders(), time.Since(t0).Round(time.Millisecond))
		rig.WaitAll(cartBound)
		t.Logf("buyers ended (%v)", time.Since(t0).Round(time.Millisecond))
		rebuilt := rig.RebuildFrozen()
		orphaned := rig.FreezeOrphaned()
		rebuiltO := rig.RebuildFrozen()
		released := rig.Reconcile()
		t.Logf("frozen by the fence and rebuilt from the database: %v; orphans found by the reconciler, frozen and rebuilt: %v %v; released by the reconciler: %d",
			rebuilt, orphaned, rebuiltO, len(released))
		if lossy && len(rebuilt)+len(orphaned) == 0 {
			t.Errorf("the failover lost no reservation that the fence or the reconciler saw: nothing was tested")
		}
		if !lossy && len(orphaned) > 0 {
			t.Errorf("the reconciler found orphans (lost reservations) in %v after a failover that lost nothing", orphaned)
		}
		if lossy {
			// The group's allowances as the loss left them, then rebuilt.
			c0 := rig.Check("after the failover, the units rebuilt", crash.CartCheck{Settled: true, LostWrites: true})
			frozen, err := rig.Rdb.HGet(ctx, crash.GroupMetaKey(sale.Prefix, sale.Group), "frozen").Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			taken, given := rig.RebuildGroup()
			t.Logf("the group rebuilt from the database: %d allowances taken again, %d given back (Redis allowances %d units, the live lines %d, before; the group's fence had frozen it: %v)",
				taken, given, c0.GroupHeldRedis, c0.GroupHeldDB, frozen == "1")
			if c0.GroupHeldRedis < c0.GroupHeldDB && frozen != "1" {
				// The buyers' Deductors, which took from the group before
				// the failover and go on after it, judge their next take
				// against the seq they saw: a lost take is a seq gone back.
				t.Errorf("Redis lost %d units of the group's allowances and the group's fence did not freeze it", c0.GroupHeldDB-c0.GroupHeldRedis)
			}
			if f, _ := rig.Rdb.HGet(ctx, crash.GroupMetaKey(sale.Prefix, sale.Group), "frozen").Result(); f != "" {
				t.Errorf("the group is still frozen after RebuildGroup")
			}
		}
		c := rig.Check("after the failover", crash.CartCheck{Settled: true, ExactGroup: true, LostWrites: lossy})
		if lossy {
			// The sale goes on after the recovery: with the group rebuilt,
			// Redis holds every buyer's cap again and admits no cart beyond
			// it (before RebuildGroup, 6–38 carts a run were admitted and
			// then refused by the database's group row).
			for _, b := range rig.Buyers {
				rig.Restart(b, 60)
			}
			rig.WaitAll(cartBound)
			rig.Reconcile()
			if _, err := rig.Deductor().SweepGroup(ctx, sale.Group, 0); err != nil {
				t.Fatal(err)
			}
			c2 := rig.Check("the sale resumed after the rebuild", crash.CartCheck{Settled: true, ExactGroup: true, LostWrites: true})
			if n := c2.DBGroupRefused - c.DBGroupRefused; n != 0 {
				t.Errorf("after the group's rebuild Redis admitted %d carts beyond the group's cap (refused by the database's group row)", n)
			}
		}
		if !lossy && len(rebuilt) > 0 {
			t.Errorf("the fence froze %v in a failover that lost nothing", rebuilt)
		}
		if c.Ordered == 0 {
			t.Errorf("no cart became an order: %s", c)
		}
	}
}

// runFC3 is FC3: the sales Plain[0], Plain[1] and Varied hash to three
// distinct Cluster masters (CLUSTER KEYSLOT of their hash tags), the
// group to whichever; 10 buyers, 4 buyer processes racing for them.
func runFC3(t *testing.T, dsn string, seed uint64) {
	ctx := context.Background()
	t0 := time.Now()
	rc := startRedisCluster(t)
	// 3-unit carts against a cap of 6: two carts per buyer exactly, so the
	// cap binds; the buyers' other carts race for it.
	sale := crash.DefaultCartSale("cg:")
	sale.Users, sale.MaxQty = 10, 1
	masters := map[string]string{} // master address → the sale on it
	var ids []string
	for i := 0; len(ids) < 3 && i < 1000; i++ {
		id := "fc3-" + strconv.Itoa(i)
		slot, err := rc.slotOf(ctx, "{a:"+id+"}")
		if err != nil {
			t.Fatal(err)
		}
		m, ok, err := rc.masterOf(ctx, rc.addrs[0], slot)
		if err != nil || !ok {
			t.Fatalf("master of slot %d: %v", slot, err)
		}
		if _, taken := masters[m.addr]; !taken {
			masters[m.addr] = id
			ids = append(ids, id)
		}
	}
	if len(ids) < 3 {
		t.Fatalf("no 3 sales on 3 masters: %v", masters)
	}
	sale.Plain, sale.Varied = ids[:2], ids[2]
	t.Logf("sales on 3 masters: %v; group %s", masters, sale.Group)
	addrs := strings.Join(rc.addrs, ",")
	rdb, err := crash.NewRedisClient("", "", addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	rig := crash.NewCartRig(t, dsn, rdb, crash.CartBuyerConfig{Cluster: addrs}, sale)
	rig.Pace = 50 * time.Millisecond
	rng := rand.New(rand.NewPCG(seed, 3))
	var victim *crash.CartBuyer
	for i := 1; i <= 4; i++ {
		b, _ := rig.StartBuyer(i, 80, 3, seed+uint64(i), "")
		if i == 2 {
			victim = b
		}
	}
	rig.WaitOrders(int64(3+rng.IntN(6)), cartBound)
	pid := victim.PID()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	slot, err := rc.slotOf(ctx, "{a:"+sale.Plain[1]+"}")
	if err != nil {
		t.Fatal(err)
	}
	m, ok, err := rc.masterOf(ctx, rc.addrs[0], slot)
	if err != nil || !ok {
		t.Fatalf("master of slot %d: %v", slot, err)
	}
	if err := rc.node(m.addr).kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 buyer2 (pid %d) and master %s of %s (slot %d); %d orders so far (%v)", pid, m.addr, sale.Plain[1], slot, rig.Orders(), time.Since(t0).Round(time.Millisecond))
	var survivor string
	for _, a := range rc.addrs {
		if a != m.addr {
			survivor = a
			break
		}
	}
	if err := rc.waitFor("the killed master's replica promoted", func(ctx context.Context) (bool, error) {
		n, ok, err := rc.masterOf(ctx, survivor, slot)
		if err != nil || !ok || n.addr == m.addr {
			return false, nil
		}
		c := rc.client(n.addr)
		defer c.Close()
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok"), nil
	}); err != nil {
		t.Fatal(err)
	}
	// The killed node restarted on its data: it rejoins as a replica and
	// answers MOVED, which makes the running buyers' clients reload the
	// slot map (without it a client dials the dead address until its
	// own reload, about a minute).
	if err := rc.node(m.addr).start(); err != nil {
		t.Fatal(err)
	}
	if err := waitPort(rc.node(m.addr), m.addr, clusterBound); err != nil {
		t.Fatal(err)
	}
	// The checker's own client, new: the first one's slot map still names
	// the killed master.
	fresh, err := crash.NewRedisClient("", "", addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fresh.Close() })
	rig.Rdb = fresh
	t.Logf("replica promoted; buyer2 restarted (%v)", time.Since(t0).Round(time.Millisecond))
	rig.Restart(victim, 20)
	rig.WaitAll(cartBound)
	t.Logf("buyers ended (%v)", time.Since(t0).Round(time.Millisecond))
	rebuilt := rig.RebuildFrozen()
	orphaned := rig.FreezeOrphaned()
	rebuiltO := rig.RebuildFrozen()
	released := rig.Reconcile()
	t.Logf("frozen by the fence and rebuilt: %v; orphans found by the reconciler, frozen and rebuilt: %v %v; released by the reconciler: %d",
		rebuilt, orphaned, rebuiltO, len(released))
	// The master's kill may lose its last writes (asynchronous
	// replication): the allowances are not claimed equal to the lines.
	c := rig.Check("after the master's and the buyer's kills", crash.CartCheck{Settled: true, LostWrites: true})
	if c.MaxGroup != sale.GroupLimit || c.GroupRefused == 0 {
		t.Errorf("the group's cap did not bind (max %d of %d, %d carts refused by it): %s", c.MaxGroup, sale.GroupLimit, c.GroupRefused, c)
	}
}
