package stock

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// TestReservationIDRule: Reserve accepts exactly the IDs of
// ValidReservationID (1..128 bytes of printable ASCII without space, the
// rule order applies), writes nothing for any other, and Release and
// Lookup still take any ID of up to 128 bytes, so an entry made under the
// earlier rule (any bytes) can be given back.
func TestReservationIDRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	mustLoad(t, d, Activity{ID: "1", Stock: 100, PerUserLimit: 100})

	good := []string{"r", "u36.7c9e6679-7425-40de-944b-e07fc1f90ae7-0123456789abcdef01234567",
		strings.Repeat("x", MaxReservationIDLen), "a:b{c}~!"}
	for _, id := range good {
		require.True(t, ValidReservationID(id), "%q", id)
		res, err := d.Reserve(ctx, Request{Activity: "1", User: "7", Qty: 1, ReservationID: id})
		require.NoError(t, err, "%q", id)
		assert.Equal(t, Reserved, res.Status, "%q", id)
		rel, err := d.Release(ctx, "1", id)
		require.NoError(t, err)
		assert.Equal(t, ReleaseDone, rel.Status)
	}
	before := snapshot(t, rdb, prefix)
	for _, id := range []string{"", strings.Repeat("x", MaxReservationIDLen+1), "a b", "r ", "r\x00", "é", "r\x7f"} {
		assert.False(t, ValidReservationID(id), "%q", id)
		_, err := d.Reserve(ctx, Request{Activity: "1", User: "7", Qty: 1, ReservationID: id})
		assert.ErrorIs(t, err, ErrInvalidArgument, "%q", id)
	}
	assert.Equal(t, before, snapshot(t, rdb, prefix), "a refused ID writes nothing")

	// Release and Lookup: any bytes, up to 128.
	for _, id := range []string{"a b", "é"} {
		_, err := d.Release(ctx, "1", id)
		assert.NoError(t, err, "%q", id)
		_, _, err = d.Lookup(ctx, "1", id)
		assert.NoError(t, err, "%q", id)
	}
	_, err := d.Release(ctx, "1", strings.Repeat("x", MaxReservationIDLen+1))
	assert.ErrorIs(t, err, ErrInvalidArgument)

	// WithMaxReservationIDBytes may lower the limit, never raise it: a
	// longer ID could never become an order.
	_, err = New(rdb, WithKeyPrefix(prefix), WithMaxReservationIDBytes(MaxReservationIDLen+1))
	assert.Error(t, err)
	low := newTestDeductor(t, rdb, prefix, WithMaxReservationIDBytes(8))
	_, err = low.Reserve(ctx, Request{Activity: "1", User: "7", Qty: 1, ReservationID: "123456789"})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "7", Qty: 1, ReservationID: "long-one-of-20-bytes"})
	require.NoError(t, err)
	require.Equal(t, Reserved, res.Status)
	rel, err := low.Release(ctx, "1", "long-one-of-20-bytes")
	require.NoError(t, err, "a lower limit still releases a longer entry")
	assert.Equal(t, ReleaseDone, rel.Status)
}
