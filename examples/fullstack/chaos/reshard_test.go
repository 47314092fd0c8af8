package chaos

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// F13 reshards the private Redis Cluster mid-sale: the sale's hash slot
// (every key of the activity shares the tag {a:<id>}) is migrated from its
// master to another master the way redis-cli --cluster reshard does it
// (CLUSTER SETSLOT IMPORTING on the target, MIGRATING on the source,
// MIGRATE of the slot's keys in small batches with a seeded pause between
// batches, then SETSLOT NODE on every master), while the wave's buys run,
// and back again at the heal. Meanwhile a script whose keys are split
// between the two nodes gets TRYAGAIN and a key already moved an ASK
// redirection: go-redis retries both, or the service answers busy and the
// buyer retries. Nothing may be lost or doubled: the battery's check
// counts every invariant, and every accepted reservation must still be in
// the stock ledger (checkLedgerKept) with no data-loss alert.

// reshardBatch is how many keys one MIGRATE moves.
const reshardBatch = 4

func reshardFault() fault {
	return fault{
		sys:    func(sc *sysConfig) { sc.cluster = true },
		strike: func(r *run) error { return reshard(r, false) },
		window: seededWindow(500*time.Millisecond, 2*time.Second),
		heal:   func(r *run) error { return reshard(r, true) },
		check: func(r *run, st crash.State) {
			checkLedgerKept(r, st)
			if n := r.counts["data-loss alerts"]; n > 0 {
				r.violation("resharding raised %d data-loss alerts: a migration is not a loss", n)
			}
		},
	}
}

// reshard migrates the sale's slot from its master to another master
// (back to the first owner when back is set) and points the checker at
// the new owner.
func reshard(r *run, back bool) error {
	rc := r.sys.cluster
	ctx := r.ctx
	slot, err := rc.slotOf(ctx, prefix+"{a:1}:meta")
	if err != nil {
		return err
	}
	nodes, err := rc.view(ctx, rc.addrs[0])
	if err != nil {
		return err
	}
	var src, dst clusterNode
	var masters []clusterNode
	for _, n := range nodes {
		if !n.isMaster() || n.failing() {
			continue
		}
		masters = append(masters, n)
		if n.owns(slot) {
			src = n
		}
	}
	for _, n := range masters {
		if n.id == src.id {
			continue
		}
		if back && n.addr != r.killed {
			continue
		}
		if dst.id == "" {
			dst = n
		}
	}
	if src.id == "" || dst.id == "" {
		return fmt.Errorf("chaos: reshard: slot %d: no source or target master (source %q, target %q)", slot, src.addr, dst.addr)
	}
	if !back {
		r.killed = src.addr // the first owner: the heal moves the slot back to it
	}
	r.slot = slot
	sc, dc := rc.client(src.addr), rc.client(dst.addr)
	defer sc.Close()
	defer dc.Close()
	r.note("reshard: slot %d (the sale's keys) from %s to %s while buys run", slot, src.addr, dst.addr)
	if err := dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.id).Err(); err != nil {
		return fmt.Errorf("chaos: SETSLOT IMPORTING on %s: %w", dst.addr, err)
	}
	if err := sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.id).Err(); err != nil {
		return fmt.Errorf("chaos: SETSLOT MIGRATING on %s: %w", src.addr, err)
	}
	host, port, _ := net.SplitHostPort(dst.addr)
	moved, batches := 0, 0
	for {
		keys, err := sc.ClusterGetKeysInSlot(ctx, slot, reshardBatch).Result()
		if err != nil {
			return fmt.Errorf("chaos: GETKEYSINSLOT on %s: %w", src.addr, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := sc.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("chaos: MIGRATE of %d keys to %s: %w", len(keys), dst.addr, err)
		}
		moved += len(keys)
		batches++
		// The seeded pause between batches keeps the slot split between
		// the two nodes while the buys run: a schedule, not a
		// synchronisation.
		time.Sleep(time.Duration(5+r.rng.IntN(25)) * time.Millisecond)
	}
	// The new owner first, then the old one, then every other master (as
	// redis-cli --cluster reshard does).
	order := []clusterNode{dst, src}
	for _, n := range masters {
		if n.id != src.id && n.id != dst.id {
			order = append(order, n)
		}
	}
	for _, n := range order {
		c := rc.client(n.addr)
		err := c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dst.id).Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("chaos: SETSLOT NODE on %s: %w", n.addr, err)
		}
	}
	r.count("reshard keys moved", moved)
	r.note("reshard: %d keys moved in %d MIGRATE batches; slot %d now served by %s", moved, batches, slot, dst.addr)
	r.sys.setCheckerRedis(dst.addr)
	return rc.waitFor("every node agrees on the slot's new owner", func(ctx context.Context) (bool, error) {
		for _, a := range rc.addrs {
			m, ok, err := rc.masterOf(ctx, a, slot)
			if err != nil || !ok || m.id != dst.id {
				return false, nil
			}
		}
		return true, nil
	})
}
