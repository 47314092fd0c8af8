package stock

import (
	"context"
	"fmt"
)

// Held returns the quantity user holds in activity: the units of the
// buyer's reservations that are neither released nor tombstoned, which is
// what the per-user limit counts. 0 means the buyer holds nothing here (no
// reservation in flight and none that became an order), so a caller may
// give back an eligibility it took for an attempt whose outcome it lost
// (an access token consumed by a request that crashed before its Reserve).
// Read-only (EVALSHA_RO); an activity that is not loaded is an error
// wrapping [ErrNotLoaded]. For a sharded activity, the buyer's shard is
// asked (a buyer's reservations all live there).
func (d *Deductor) Held(ctx context.Context, activity, user string) (int64, error) {
	if err := checkActivity(activity); err != nil {
		return 0, err
	}
	if err := checkID(ErrInvalidArgument, "user ID", user); err != nil {
		return 0, err
	}
	return onLayout(d, activity, func(l *layout) (int64, *layout, error) {
		if l != nil {
			return d.heldSharded(ctx, l, user)
		}
		n, err := d.heldKeys(ctx, d.keys(activity), user)
		switch {
		case err != nil:
			return 0, nil, err
		case metaKind(n[0]) == metaDirectory:
			next, err := d.learn(activity, n[1])
			return 0, next, err
		case metaKind(n[0]) != metaLoaded:
			return 0, nil, fmt.Errorf("stock: activity %s: %w", activity, ErrNotLoaded)
		}
		return n[1], nil, nil
	})
}

// heldKeys runs held.lua on one ledger.
func (d *Deductor) heldKeys(ctx context.Context, k keys, user string) ([16]int64, error) {
	vals, err := heldScript.RunRO(ctx, d.rdb, []string{k.meta, k.buyers}, user).Slice()
	if err != nil {
		return [16]int64{}, classify("held", err)
	}
	n, err := ints("held", vals, 2)
	if err == nil && metaKind(n[0]) == metaDirectory && (k.xout != "" || !isShardCount(n[1])) {
		err = badReply("held", "layout of %d shards", n[1])
	}
	return n, err
}
