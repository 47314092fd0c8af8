package crash

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cartBound bounds a cart buyer's run and a paused buyer's marker: limits
// for a loaded 2-core machine, not expectations.
const cartBound = 2 * time.Minute

// RunCartKill is the scenario of TestCartKillBetweenLines (the chaos
// battery's FC1 runs it too, with another seed) on the Redis rdb, which
// the buyers reach through redisCfg.
func RunCartKill(t *testing.T, dsn string, rdb redis.UniversalClient, redisCfg CartBuyerConfig, seed uint64) {
	t.Helper()
	rig := NewCartRig(t, dsn, rdb, redisCfg, DefaultCartSale("ck:"))
	rng := rand.New(rand.NewPCG(seed, 27))
	b1, m1 := rig.StartBuyer(1, 60, 3, seed, "2:1")
	b2, m2 := rig.StartBuyer(2, 60, 3, seed+1, "3:2")
	b3, _ := rig.StartBuyer(3, 60, 3, seed+2, "")
	for _, w := range []struct {
		b *CartBuyer
		m string
	}{{b1, m1}, {b2, m2}} {
		if err := WaitFile(w.m, w.b, cartBound); err != nil {
			t.Fatalf("%v\n%s", err, Tail(w.b.LogPath, 10))
		}
	}
	killAt := time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
	time.Sleep(killAt) // the seeded moment of buyer3's kill: a schedule, not a synchronisation
	for _, b := range []*CartBuyer{b1, b2, b3} {
		pid := b.PID()
		if err := b.Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill -9 %s (pid %d)", b.Cfg.Name, pid)
	}
	cut1, cut2 := PausedCart(t, m1), PausedCart(t, m2)
	t.Logf("buyer1 killed between lines 0 and 1 of cart %s; buyer2 between lines 1 and 2 of cart %s; buyer3 after %v", cut1, cut2, killAt)

	s := rig.Sale
	// Killed: the first lines held with no order, the allowances taken.
	held := map[string]string{cut1 + "#0": s.Plain[0], cut2 + "#0": s.Plain[0], cut2 + "#1": s.Plain[1]}
	for id, unit := range held {
		if !rig.LineHeld(unit, id) {
			t.Errorf("line %s of a killed cart is not held before the reconciler", id)
		}
	}
	if rig.LineHeld(s.Plain[1], cut1+"#1") {
		t.Errorf("line %s was reserved after the pause", cut1+"#1")
	}
	rig.Check("killed, before the reconciler", CartCheck{})

	released := rig.Reconcile()
	t.Logf("the reconciler released %d line(s): %s", len(released), strings.Join(released, " "))
	for id, unit := range held {
		if rig.LineHeld(unit, id) {
			t.Errorf("line %s of a killed cart is still held after the reconciler", id)
		}
	}
	c := rig.Check("after the reconciler", CartCheck{Settled: true})
	for _, id := range []string{cut1 + "#0", cut1 + "#1", cut1 + "#2", cut2 + "#0", cut2 + "#1", cut2 + "#2"} {
		if g := rig.GroupEntry(id); g != "R" {
			t.Errorf("the killed cart's allowance %s is %q, want still taken (R) until the group's sweep", id, g)
		}
	}
	if c.LeakedAllowances == 0 {
		t.Errorf("no allowance held beyond the live lines after the kills between lines")
	}

	// The limit group's reconciler (stock.Deductor.SweepGroup): every
	// buyer process is dead, so any allowance is old enough. It gives back
	// the cut carts' allowances, released or never reserved (tombstoned),
	// without the buyers' journals: nothing of a cut cart is held anywhere.
	given, err := rig.Deductor().SweepGroup(context.Background(), s.Group, 0)
	if err != nil {
		t.Fatalf("SweepGroup: %v", err)
	}
	t.Logf("the group's sweep gave back %d allowance(s)", given)
	for _, id := range []string{cut1 + "#0", cut1 + "#1", cut1 + "#2", cut2 + "#0", cut2 + "#1", cut2 + "#2"} {
		if g := rig.GroupEntry(id); g != "X" {
			t.Errorf("the killed cart's allowance %s is %q after the sweep, want given back (X)", id, g)
		}
	}
	rig.Check("after the reconciler and the group's sweep", CartCheck{Settled: true, ExactGroup: true})

	for _, b := range []*CartBuyer{b1, b2, b3} {
		rig.Restart(b, 30)
	}
	rig.WaitAll(cartBound)
	rig.Reconcile()
	c = rig.Check("restarted, reconciled", CartCheck{Settled: true, ExactGroup: true})
	for _, id := range []string{cut1, cut2} {
		cart := rig.Cart(id)
		if cart.Order != "" || !contains(cart.Kinds, "F") {
			t.Errorf("killed cart %s: journal %v, want finished without an order", id, cart.Kinds)
		}
		for i := 0; i < 3; i++ {
			if g := rig.GroupEntry(id + "#" + string(rune('0'+i))); g != "X" {
				t.Errorf("killed cart %s line %d: allowance %q, want given back (X)", id, i, g)
			}
		}
	}
	if c.Ordered == 0 {
		t.Errorf("the run sold too little to count: %s", c)
	}
}
