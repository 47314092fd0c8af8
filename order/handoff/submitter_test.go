package handoff

import (
	"context"
	"errors"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubmitBranches(t *testing.T) {
	t.Parallel()
	kafkaDown := errors.New("kafka down")
	dbDown := errors.New("db down")
	for _, tc := range []struct {
		name                 string
		pubErr, fbErr, relEr error
		route                Route
		wantRetry            bool
		stored, released     int
	}{
		{name: "kafka ok", route: RouteKafka},
		{name: "kafka down, fallback stores", pubErr: kafkaDown, route: RouteFallback, stored: 1},
		{name: "both down, released", pubErr: kafkaDown, fbErr: dbDown, route: RouteNone, wantRetry: true, released: 1},
		{name: "all down", pubErr: kafkaDown, fbErr: dbDown, relEr: errors.New("redis down"), route: RouteNone, wantRetry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			led := newLedger()
			led.reserve("1", Reservation{ID: "r-1"})
			led.setFail(tc.relEr)
			var published []order.Message
			pub := Publisher(func(_ context.Context, m order.Message) error {
				if tc.pubErr != nil {
					return tc.pubErr
				}
				published = append(published, m)
				return nil
			})
			fb := &memFallback{fail: tc.fbErr}
			s, err := NewSubmitter(pub, fb.Store, led)
			require.NoError(t, err)
			// a cancelled request context must not stop the compensation
			ctx, cancel := context.WithCancel(context.Background())
			if tc.pubErr != nil {
				cancel()
			}
			defer cancel()
			route, err := s.Submit(ctx, order.Message{ReservationID: "r-1", ActivityID: "1", UserID: "7", Qty: 1})
			assert.Equal(t, tc.route, route)
			if tc.wantRetry {
				require.ErrorIs(t, err, ErrRetry)
				if tc.relEr != nil {
					assert.ErrorIs(t, err, tc.relEr)
				}
			} else {
				require.NoError(t, err)
			}
			assert.Len(t, fb.rows, tc.stored)
			assert.Equal(t, tc.released, led.releases())
			if tc.route == RouteKafka {
				require.Len(t, published, 1)
				m := published[0]
				assert.Equal(t, order.MessageVersion, m.Version, "a zero Version becomes the current one")
				assert.NotEmpty(t, m.MsgID)
				assert.False(t, m.CreatedAt.IsZero())
			}
		})
	}
}

func TestSubmitInvalid(t *testing.T) {
	t.Parallel()
	led := newLedger()
	s, err := NewSubmitter(Publisher(func(context.Context, order.Message) error { return nil }), (&memFallback{}).Store, led)
	require.NoError(t, err)
	_, err = s.Submit(context.Background(), order.Message{ReservationID: "r", ActivityID: "1", UserID: "1"})
	assert.ErrorIs(t, err, order.ErrInvalidMessage)
	_, err = NewSubmitter(nil, (&memFallback{}).Store, led)
	assert.Error(t, err)
}
