package status

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// orderReleaser is a Releaser that also implements OrderReleaser, and
// records which of the two the Canceller called.
type orderReleaser struct {
	led *ledger

	mu    sync.Mutex
	plain int
	got   []order.Order
	fail  error
}

func (r *orderReleaser) Release(ctx context.Context, activity, id string) error {
	r.mu.Lock()
	r.plain++
	r.mu.Unlock()
	return r.led.Release(ctx, activity, id)
}

func (r *orderReleaser) ReleaseOrder(ctx context.Context, o order.Order) error {
	r.mu.Lock()
	r.got = append(r.got, o)
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail
	}
	return r.led.Release(ctx, o.ActivityID, o.ReservationID)
}

// errLostStub stands for stock.ErrLost (order does not import stock).
var errLostStub = errors.New("reservation lost by redis")

// TestCancelUsesOrderReleaser: a Releaser that implements OrderReleaser
// gets the cancelled order (so it knows the reservation was made); a loss
// it reports leaves the release pending and the next Cancel re-issues it.
func TestCancelUsesOrderReleaser(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCancelFixture(t, db, 10, 1)
		rel := &orderReleaser{led: f.led, fail: errLostStub}
		c, err := NewCanceller(f.db, f.rdb, rel, WithClock(f.clock))
		require.NoError(t, err)
		want := f.status(t, f.nos[0])

		err = c.Cancel(ctx, f.nos[0])
		assert.ErrorIs(t, err, ErrReleasePending)
		assert.ErrorIs(t, err, errLostStub)
		assert.Equal(t, order.OrderCancelled, f.status(t, f.nos[0]).Status)
		assert.Zero(t, f.led.releases(), "nothing released yet")

		rel.mu.Lock()
		rel.fail = nil
		rel.mu.Unlock()
		err = c.Cancel(ctx, f.nos[0])
		assert.ErrorIs(t, err, ErrAlreadyCancelled)
		assert.NotErrorIs(t, err, ErrReleasePending)
		assert.Equal(t, 1, f.led.releases(), "released once, by the retry")

		rel.mu.Lock()
		defer rel.mu.Unlock()
		assert.Zero(t, rel.plain, "Release not called")
		require.Len(t, rel.got, 2)
		for _, o := range rel.got {
			assert.Equal(t, want.ReservationID, o.ReservationID)
			assert.Equal(t, want.ActivityID, o.ActivityID)
			assert.Equal(t, want.UserID, o.UserID)
			assert.True(t, want.CreatedAt.Equal(o.CreatedAt), "CreatedAt %s, want %s", o.CreatedAt, want.CreatedAt)
			assert.False(t, o.CreatedAt.IsZero())
		}
	})
}
