package order

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

type traceKey struct{}

// A batch of several messages is one transaction: its hook gets the first
// message's context, and every order its own message's headers.
func TestTraceBatchContextIsFirstMessages(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		var hookCtx []string
		headers := map[string]string{}
		hook := func(ctx context.Context, _ *gorm.DB, orders []Order) error {
			id, _ := ctx.Value(traceKey{}).(string)
			hookCtx = append(hookCtx, id)
			for _, o := range orders {
				headers[o.ReservationID] = o.Headers["traceparent"]
			}
			return nil
		}
		p := newProc(t, db, WithTxHook(hook))
		c, err := NewConsumer(p, newLedger(), WithContextFrom(func(ctx context.Context, h map[string]string) context.Context {
			return context.WithValue(ctx, traceKey{}, h["traceparent"])
		}))
		require.NoError(t, err)
		var kms []Record
		for i := 0; i < 3; i++ {
			km := kmsg(t, int64(i), msg(i, "1", num(100+i)))
			km.Headers = map[string]string{"traceparent": "t" + num(i)}
			kms = append(kms, km)
		}
		require.NoError(t, runClaim(t, c, &fakeSession{ctx: ctx}, kms))
		assert.Equal(t, []string{"t0"}, hookCtx, "one batch transaction, the first message's context")
		assert.Equal(t, map[string]string{"r-0": "t0", "r-1": "t1", "r-2": "t2"}, headers)
		assert.EqualValues(t, 3, countOrders(t, db, ""))
	})
}
