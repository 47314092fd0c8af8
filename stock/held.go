package stock

import (
	"context"
	"fmt"
	"strconv"
)

// Held returns the quantity user holds in activity: the units of the
// buyer's reservations that are neither released nor tombstoned, which is
// what the per-user limit counts. 0 means the buyer holds nothing here (no
// reservation in flight and none that became an order), so a caller may
// give back an eligibility it took for an attempt whose outcome it lost
// (an access token consumed by a request that crashed before its Reserve).
// Read-only (EVALSHA_RO); an activity that is not loaded is an error
// wrapping [ErrNotLoaded].
func (d *Deductor) Held(ctx context.Context, activity, user int64) (int64, error) {
	if activity <= 0 || user <= 0 {
		return 0, fmt.Errorf("%w: activity %d and user %d must be > 0", ErrInvalidRequest, activity, user)
	}
	k := d.keys(activity)
	vals, err := heldScript.RunRO(ctx, d.rdb, []string{k.meta, k.buyers}, strconv.FormatInt(user, 10)).Slice()
	if err != nil {
		return 0, classify("held", err)
	}
	n, err := ints("held", vals, 2)
	if err != nil {
		return 0, err
	}
	if n[0] != 1 {
		return 0, fmt.Errorf("stock: activity %d: %w", activity, ErrNotLoaded)
	}
	return n[1], nil
}
