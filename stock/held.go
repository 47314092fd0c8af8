package stock

import (
	"context"
	"errors"
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
// asked (a buyer's reservations all live there). For an activity with
// variants ([Activity.Variants], its plain ID) it is the sum over all its
// variants (what the activity's own per-user limit counts), read in one
// script call once this Deductor knows the variant list (the first call
// learns it: up to two more); Held of VariantOf(activity, v) is the
// variant's alone.
func (d *Deductor) Held(ctx context.Context, activity, user string) (int64, error) {
	if err := checkActivity(activity); err != nil {
		return 0, err
	}
	if err := checkID(ErrInvalidArgument, "user ID", user); err != nil {
		return 0, err
	}
	_, isVariant := parentOf(activity)
	if !isVariant && d.varsOf(activity).list != "" {
		if n, ok, err := d.heldVariants(ctx, activity, user); err != nil || ok {
			return n, err
		}
		// No variants any more: asked as a plain activity below.
	}
	n, err := onLayout(d, activity, func(l *layout) (int64, *layout, error) {
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
	if errors.Is(err, ErrNotLoaded) && !isVariant && d.layoutOf(activity) == nil {
		// Not loaded as a plain activity: it may have variants.
		if n, ok, verr := d.heldVariants(ctx, activity, user); verr != nil || ok {
			return n, verr
		}
	}
	return n, err
}

// heldVariants is Held of an activity with variants: vheld.lua over the
// buyers hash of every variant of the list this Deductor knows, learning
// the list when it is not Redis's. ok is false when the activity has no
// variants in Redis (its vars hash is absent).
func (d *Deductor) heldVariants(ctx context.Context, activity, user string) (held int64, ok bool, err error) {
	vi := d.varsOf(activity)
	for range 3 {
		ks := make([]string, 0, 1+len(vi.buyers))
		ks = append(ks, varsKey(d.o.prefix, activity))
		ks = append(ks, vi.buyers...)
		vals, err := vheldScript.RunRO(ctx, d.rdb, ks, vi.list, user).Slice()
		if err != nil {
			return 0, false, classify("held", err)
		}
		if len(vals) != 2 {
			return 0, false, badReply("held", "%d values, want 2", len(vals))
		}
		code, ok := vals[0].(int64)
		if !ok {
			return 0, false, badReply("held", "code of type %T", vals[0])
		}
		switch varsCode(code) {
		case varsLearn:
			list, ok := vals[1].(string)
			if !ok {
				return 0, false, badReply("held", "list of type %T", vals[1])
			}
			if list == "" {
				d.forgetVars(activity)
				return 0, false, nil
			}
			vi = d.learnVars(activity, list)
			continue
		case varsDecided:
			n, ok := vals[1].(int64)
			if !ok || n < 0 {
				return 0, false, badReply("held", "held %v of type %T", vals[1], vals[1])
			}
			return n, true, nil
		default:
			return 0, false, badReply("held", "status code %d", code)
		}
	}
	return 0, false, fmt.Errorf("stock: held in activity %s: %w: its variant list changed during the call", activity, ErrUnavailable)
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
