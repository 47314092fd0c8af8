package order

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// shopItem is a row of the shop's own table, written by a TxHook.
type shopItem struct {
	OrderNo string `gorm:"primaryKey;size:32"`
	UserID  string `gorm:"size:64;not null"`
	Ext     string `gorm:"size:255;not null;default:''"`
}

func (shopItem) TableName() string { return "shop_item" }

// shopHook writes one shop_item per new order through tx and records the
// reservations of each call. failFor makes the calls that contain that
// reservation fail after writing their rows.
type shopHook struct {
	mu      sync.Mutex
	calls   [][]string
	failFor string
	wrap    func(error) error
}

var errShop = errors.New("injected: shop refused")

func (h *shopHook) hook(ctx context.Context, tx *gorm.DB, orders []Order) error {
	resv := make([]string, len(orders))
	items := make([]shopItem, len(orders))
	for i, o := range orders {
		resv[i] = o.ReservationID
		items[i] = shopItem{OrderNo: o.OrderNo, UserID: o.UserID, Ext: string(o.Ext)}
	}
	h.mu.Lock()
	h.calls = append(h.calls, resv)
	fail := h.failFor != "" && slices.Contains(resv, h.failFor)
	h.mu.Unlock()
	if err := tx.WithContext(ctx).Create(&items).Error; err != nil {
		return err
	}
	if fail {
		err := fmt.Errorf("%w: %s", errShop, h.failFor)
		if h.wrap != nil {
			err = h.wrap(err)
		}
		return err
	}
	return nil
}

func (h *shopHook) callsWith(resv string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.calls {
		if slices.Contains(c, resv) {
			n++
		}
	}
	return n
}

func (h *shopHook) nCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

func withShop(t *testing.T, db *gorm.DB) {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&shopItem{}))
}

// The hook writes the shop's rows in the consumer's transaction, once per
// new order: a batch in one call, redeliveries and duplicates in none, and
// a batch that falls back to one by one commits exactly the rows of the
// orders that exist.
func TestTxHookWritesShopRowsOnce(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		withShop(t, db)
		addActivity(t, db, "1", 100, 1)
		addActivity(t, db, "2", 3, 1) // fewer units than the batch below
		h := &shopHook{}
		p := newProc(t, db, WithTxHook(h.hook))

		var msgs []Message
		for i := 0; i < 5; i++ {
			msgs = append(msgs, msg(i, "1", uuidUser(100+i))) // a shop's UUID buyers
		}
		mustProcess(t, p, msgs)
		assert.Equal(t, 1, h.nCalls(), "one call for the batch")
		assert.EqualValues(t, 5, rowCount(t, db, "shop_item", ""))
		// every shop row belongs to an order
		assert.EqualValues(t, 5, rowCount(t, db, "shop_item", "order_no IN (SELECT order_no FROM seckill_order)"))
		assert.EqualValues(t, 1, rowCount(t, db, "shop_item", "user_id = ?", uuidUser(103)), "the hook sees the string user ID")

		// redelivered batch, a redelivered message, the same reservation
		// under a new message ID: no new order, no call, no row
		for _, o := range mustProcess(t, p, msgs) {
			assert.True(t, o.Duplicate)
		}
		out, err := p.Handle(ctx, msgs[2])
		require.NoError(t, err)
		assert.True(t, out.Duplicate)
		again := msgs[3]
		again.MsgID = "other-id"
		out, err = p.Handle(ctx, again)
		require.NoError(t, err)
		assert.True(t, out.Duplicate)
		assert.Equal(t, 1, h.nCalls())
		assert.EqualValues(t, 5, rowCount(t, db, "shop_item", ""))

		// 5 messages for 3 units: the batch rolls back (its hook call
		// with it), then one by one: 3 orders, 3 shop rows. The hook runs
		// before the stock update, so the two sold-out messages call it
		// too, in transactions that roll back.
		var short []Message
		for i := 10; i < 15; i++ {
			short = append(short, msg(i, "2", num(100+i)))
		}
		outs := mustProcess(t, p, short)
		succ := 0
		for _, o := range outs {
			if o.Status == StatusSuccess {
				succ++
			}
		}
		assert.Equal(t, 3, succ)
		assert.EqualValues(t, 3, countOrders(t, db, "activity_id = ?", "2"))
		assert.EqualValues(t, 8, rowCount(t, db, "shop_item", ""))
		assert.EqualValues(t, 8, rowCount(t, db, "shop_item", "order_no IN (SELECT order_no FROM seckill_order)"))
		assert.Equal(t, 1+1+5, h.nCalls(), "the rolled-back batch call, then one per message")
		checkConservation(t, db, "2", 3)
	})
}

// A hook error rolls the order back with the shop's row: nothing of the
// message is committed, on either path, and the error reaches the caller.
func TestTxHookErrorRollsBackTheOrder(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		withShop(t, db)
		addActivity(t, db, "1", 10, 1)
		h := &shopHook{failFor: "r-1"}
		p := newProc(t, db, WithTxHook(h.hook))

		_, err := p.Handle(ctx, msg(1, "1", "101"))
		require.ErrorIs(t, err, errShop)
		assert.False(t, isPermanent(err))
		_, err = p.Process(ctx, []Message{msg(0, "1", "100"), msg(1, "1", "101"), msg(2, "1", "102")})
		require.ErrorIs(t, err, errShop)
		assert.Equal(t, 2, h.callsWith("r-1"))

		assert.EqualValues(t, 0, rowCount(t, db, "seckill_order", ""))
		assert.EqualValues(t, 0, rowCount(t, db, "message_dedup", ""))
		assert.EqualValues(t, 0, rowCount(t, db, "shop_item", ""))
		assert.EqualValues(t, 10, dbStock(t, db, "1"))

		// the neighbours alone go through
		mustProcess(t, p, []Message{msg(0, "1", "100"), msg(2, "1", "102")})
		assert.EqualValues(t, 2, rowCount(t, db, "seckill_order", ""))
		assert.EqualValues(t, 2, rowCount(t, db, "shop_item", ""))
		checkConservation(t, db, "1", 10)
	})
}

// In the Consumer a hook that keeps failing for one message fails that
// message only: the batch falls back to one by one, the message is tried
// WithMaxAttempts times and dead-lettered, its neighbours commit; a
// Permanent hook error dead-letters it at its first one-by-one attempt.
func TestTxHookFailingForOneMessageInConsumer(t *testing.T) {
	t.Parallel()
	for _, permanent := range []bool{false, true} {
		t.Run(fmt.Sprintf("permanent=%v", permanent), func(t *testing.T) {
			t.Parallel()
			eachDB(t, func(t *testing.T, db *gorm.DB) {
				withShop(t, db)
				addActivity(t, db, "1", 10, 1)
				h := &shopHook{failFor: "r-1"}
				if permanent {
					h.wrap = Permanent
				}
				led := newLedger()
				var kms []Record
				for i := 0; i < 3; i++ {
					m := msg(i, "1", num(100+i))
					led.reserve("1", Reservation{ID: m.ReservationID})
					kms = append(kms, kmsg(t, int64(i), m))
				}
				dlq := &dlqSink{}
				c, err := NewConsumer(newProc(t, db, WithTxHook(h.hook)), led, WithDeadLetter(dlq),
					WithMaxAttempts(3), WithBackoff(time.Millisecond, 2*time.Millisecond))
				require.NoError(t, err)
				sess := &fakeSession{ctx: context.Background()}
				require.NoError(t, runClaim(t, c, sess, kms))

				require.Equal(t, 1, dlq.count())
				assert.EqualValues(t, 1, dlq.msgs[0].Offset)
				assert.ErrorIs(t, dlq.errs[0], errShop)
				assert.True(t, isPermanent(dlq.errs[0]))
				attempts := 3
				if permanent {
					attempts = 1
				}
				assert.Equal(t, 1+attempts, h.callsWith("r-1"), "the batch, then the one-by-one attempts")
				assert.EqualValues(t, 2, sess.lastMarked())
				assert.EqualValues(t, 2, rowCount(t, db, "seckill_order", ""))
				assert.EqualValues(t, 0, rowCount(t, db, "seckill_order", "reservation_id = ?", "r-1"))
				assert.EqualValues(t, 0, rowCount(t, db, "message_dedup", "reservation_id = ?", "r-1"))
				assert.EqualValues(t, 2, rowCount(t, db, "shop_item", ""))
				assert.Equal(t, 0, led.releases(), "the dead-lettered reservation is the Reconciler's")
				checkConservation(t, db, "1", 10)
			})
		})
	}
}
