package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
)

// hookLog records the payments handed to the conflict and late hooks.
type hookLog struct {
	mu        sync.Mutex
	conflicts []Payment
	late      []string // order numbers
}

func (h *hookLog) opts() []CancellerOption {
	return []CancellerOption{
		WithOnPayConflict(func(_ context.Context, _ order.Order, p Payment) {
			h.mu.Lock()
			h.conflicts = append(h.conflicts, p)
			h.mu.Unlock()
		}),
		WithOnPayCancelled(func(_ context.Context, o order.Order) {
			h.mu.Lock()
			h.late = append(h.late, o.OrderNo)
			h.mu.Unlock()
		}),
	}
}

func (h *hookLog) counts() (conflicts, late int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conflicts), len(h.late)
}

func TestPayRefIdempotentAndConflict(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var h hookLog
		f := newPayFixture(t, db, 10, 2, h.opts()...)
		a := Payment{Provider: "stripe", Reference: "pi_A"}
		require.NoError(t, f.c.PayRef(ctx, f.nos[0], a))
		require.NoError(t, f.c.PayRef(ctx, f.nos[0], a), "the same payment again answers the same")
		o := f.order(t, f.nos[0])
		assert.Equal(t, order.OrderPaid, o.Status)
		assert.Equal(t, map[string]int64{"PAID": 1}, paymentRows(t, db, f.nos[0]))

		b := Payment{Provider: "stripe", Reference: "pi_B"}
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[0], b), ErrPaymentConflict)
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[0], b), ErrPaymentConflict, "a repeated conflict answers the same")
		assert.Equal(t, map[string]int64{"PAID": 1, "CONFLICT": 1}, paymentRows(t, db, f.nos[0]))
		assert.Equal(t, []Payment{b, b}, h.conflicts, "the conflict hook gets the payment to refund, at least once")
		// the same reference of another provider is another payment
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[0], Payment{Provider: "adyen", Reference: "pi_A"}), ErrPaymentConflict)

		// a reference recorded for another order pays nothing
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[1], a), ErrPaymentConflict)
		assert.Equal(t, order.OrderCreated, f.order(t, f.nos[1]).Status)
		assert.Empty(t, paymentRows(t, db, f.nos[1]))

		assert.ErrorIs(t, f.c.PayRef(ctx, "nope", Payment{Provider: "stripe", Reference: "pi_C"}), ErrOrderNotFound)
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[1], Payment{Provider: "", Reference: "x"}), order.ErrInvalidID)
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[1], Payment{Provider: "stripe", Reference: "has space"}), order.ErrInvalidArgument)
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[1], Payment{Provider: "stripe"}), order.ErrInvalidArgument)
		// Pay (no reference) on an order paid by reference is a repeat
		assert.ErrorIs(t, f.c.Pay(ctx, f.nos[0]), ErrAlreadyPaid)
		f.check(t)
	})
}

func TestPayRefLateGoesToLatePaymentHook(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var h hookLog
		f := newPayFixture(t, db, 10, 2, h.opts()...)
		require.NoError(t, f.c.Cancel(ctx, f.nos[0]))
		p := Payment{Provider: "stripe", Reference: "pi_late"}
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[0], p), ErrOrderCancelled)
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[0], p), ErrOrderCancelled, "a replay answers the same")
		assert.Equal(t, map[string]int64{"LATE": 1}, paymentRows(t, db, f.nos[0]))

		// expired, not cancelled yet: PayRef cancels it in its transaction
		q := Payment{Provider: "stripe", Reference: "pi_expired"}
		assert.ErrorIs(t, f.cLate.PayRef(ctx, f.nos[1], q), ErrOrderCancelled)
		o := f.order(t, f.nos[1])
		assert.Equal(t, order.OrderCancelled, o.Status)
		assert.Nil(t, o.LiveSlot)
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[1], q), ErrOrderCancelled, "a replay before expiry too: the row answers")
		conflicts, late := h.counts()
		assert.Equal(t, 0, conflicts)
		assert.Equal(t, 4, late)
		f.check(t)
	})
}

func TestPayRefExpiredReleaseFailsIsPending(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newPayFixture(t, db, 10, 1)
		f.rs.SetFail(errors.New("redis down"))
		err := f.cLate.PayRef(ctx, f.nos[0], Payment{Provider: "stripe", Reference: "pi_1"})
		assert.ErrorIs(t, err, ErrOrderCancelled)
		assert.ErrorIs(t, err, ErrReleasePending)
		f.rs.SetFail(nil)
		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), ErrAlreadyCancelled, "the next Cancel re-issues the release")
		f.check(t)
	})
}

// shopInventory is the shop's own table, written by the refund hook.
type shopInventory struct {
	OrderNo string `gorm:"primaryKey;size:32"`
	Qty     int64
}

func shopHook(fail *atomic.Bool) order.TxHook {
	return func(ctx context.Context, tx *gorm.DB, orders []order.Order) error {
		if fail != nil && fail.Load() {
			return errors.New("shop inventory down")
		}
		for _, o := range orders {
			if err := tx.Create(&shopInventory{OrderNo: o.OrderNo, Qty: o.Qty}).Error; err != nil {
				return err
			}
		}
		return nil
	}
}

func TestRefundRestockChoices(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&shopInventory{}))
		var fail atomic.Bool
		f := newPayFixture(t, db, 10, 5, WithRefundHook(shopHook(&fail)))
		for i, no := range f.nos[:4] {
			require.NoError(t, f.c.PayRef(ctx, no, Payment{Provider: "stripe", Reference: fmt.Sprint("pi_", i)}))
		}
		require.NoError(t, f.c.Refund(ctx, f.nos[0], RestockSale))
		require.NoError(t, f.c.Refund(ctx, f.nos[1], RestockNone))
		fail.Store(true)
		assert.Error(t, f.c.Refund(ctx, f.nos[2], RestockShop), "a hook error rolls the refund back")
		assert.Equal(t, order.OrderPaid, f.order(t, f.nos[2]).Status)
		fail.Store(false)
		require.NoError(t, f.c.Refund(ctx, f.nos[2], RestockShop))

		for i, want := range []Restock{RestockSale, RestockNone, RestockShop} {
			o := f.order(t, f.nos[i])
			assert.Equal(t, order.OrderRefunded, o.Status)
			assert.Equal(t, string(want), o.Restock)
			assert.NotNil(t, o.RefundTime)
			// retries change nothing, whatever they ask
			for _, r := range []Restock{RestockSale, RestockNone, RestockShop} {
				assert.ErrorIs(t, f.c.Refund(ctx, f.nos[i], r), ErrAlreadyRefunded)
			}
		}
		assert.Nil(t, f.order(t, f.nos[0]).LiveSlot, "restocked to the sale: the buyer's slot is free")
		assert.NotNil(t, f.order(t, f.nos[1]).LiveSlot, "not restocked: the units stay the buyer's")
		var shopRows int64
		require.NoError(t, db.Model(&shopInventory{}).Count(&shopRows).Error)
		assert.EqualValues(t, 1, shopRows, "the shop's inventory got the units once")
		assert.EqualValues(t, 10-5+1, dbStock(t, db, "1"), "only the refund to the sale is back on sale")

		assert.ErrorIs(t, f.c.Refund(ctx, f.nos[4], RestockSale), ErrNotPaid)
		require.NoError(t, f.c.Cancel(ctx, f.nos[4]))
		assert.ErrorIs(t, f.c.Refund(ctx, f.nos[4], RestockSale), ErrAlreadyCancelled)
		assert.ErrorIs(t, f.c.Refund(ctx, "nope", RestockSale), ErrOrderNotFound)
		assert.ErrorIs(t, f.c.Refund(ctx, f.nos[3], "back"), order.ErrInvalidArgument)
		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), ErrAlreadyRefunded)
		assert.ErrorIs(t, f.c.Pay(ctx, f.nos[0]), ErrAlreadyPaid)
		assert.NoError(t, f.c.PayRef(ctx, f.nos[0], Payment{Provider: "stripe", Reference: "pi_0"}), "its payment again: the same answer")
		f.check(t)

		// without a refund hook, the shop restock is refused
		f2, err := NewCanceller(db, nil, f.rs)
		require.NoError(t, err)
		assert.ErrorIs(t, f2.Refund(ctx, f.nos[3], RestockShop), order.ErrInvalidArgument)
		assert.Equal(t, order.OrderPaid, f.order(t, f.nos[3]).Status)
		_, err = NewCanceller(db, nil, f.rs, WithRefundHook(nil))
		assert.ErrorIs(t, err, order.ErrInvalidConfig)
	})
}

func TestRefundReleaseFailureRetried(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newPayFixture(t, db, 10, 1)
		require.NoError(t, f.c.PayRef(ctx, f.nos[0], Payment{Provider: "stripe", Reference: "pi_1"}))
		f.rs.SetFail(errors.New("redis down"))
		err := f.c.Refund(ctx, f.nos[0], RestockSale)
		assert.ErrorIs(t, err, ErrReleasePending)
		assert.Equal(t, order.OrderRefunded, f.order(t, f.nos[0]).Status, "refunded and restocked in the DB")
		f.rs.SetFail(nil)
		assert.ErrorIs(t, f.c.Refund(ctx, f.nos[0], RestockNone), ErrAlreadyRefunded, "the retry re-issues the release")
		assert.ErrorIs(t, f.c.Refund(ctx, f.nos[0], RestockSale), ErrAlreadyRefunded)
		f.check(t)
	})
}

// outcomes counts the answers of the racing calls.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) add(t *testing.T, what string, err error, allowed ...error) {
	key := what + ":ok"
	if err != nil {
		key = what + ":other"
		for _, a := range allowed {
			if errors.Is(err, a) {
				key = what + ":" + a.Error()
				break
			}
		}
		if key == what+":other" {
			t.Errorf("%s: %v", what, err)
		}
	}
	o.mu.Lock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[key]++
	o.mu.Unlock()
}

func (o *outcomes) get(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[key]
}

// Pay vs expiry: each order is paid (twice, the same payment) while a
// canceller past its payment window cancels it by delay queue, scan and
// its own PayRef of a second payment. Exactly one terminal state per order,
// the units of a cancelled one given back exactly once in Redis and SQL.
func TestPayRefRacingExpiry(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		const n = 30
		var h hookLog
		f := newPayFixture(t, db, 50, n, h.opts()...)
		var res outcomes
		var wg sync.WaitGroup
		for i, no := range f.nos {
			p := Payment{Provider: "stripe", Reference: fmt.Sprint("pi_", i)}
			for range 2 {
				wg.Go(func() { res.add(t, "pay", f.c.PayRef(ctx, no, p), ErrOrderCancelled) })
			}
			wg.Go(func() {
				res.add(t, "late", f.cLate.PayRef(ctx, no, Payment{Provider: "stripe", Reference: fmt.Sprint("pi_late_", i)}),
					ErrOrderCancelled, ErrPaymentConflict)
			})
		}
		wg.Go(func() {
			_, err := f.cLate.ScanExpired(ctx)
			res.add(t, "scan", err)
		})
		wg.Wait()
		var paid, cancelled int
		for _, no := range f.nos {
			switch rows := paymentRows(t, db, no); f.order(t, no).Status {
			case order.OrderPaid:
				paid++
				assert.Equal(t, map[string]int64{"PAID": 1, "CONFLICT": 1}, rows, no)
			case order.OrderCancelled:
				cancelled++
				assert.EqualValues(t, 0, rows["PAID"], no)
			default:
				t.Errorf("%s: %s", no, f.order(t, no).Status)
			}
		}
		assert.Equal(t, n, paid+cancelled)
		assert.Equal(t, 2*paid, res.get("pay:ok"), "both deliveries of a winning payment say paid")
		conflicts, late := h.counts()
		assert.Equal(t, paid, conflicts, "every second payment of a paid order went to the conflict hook")
		assert.Equal(t, res.get("pay:"+ErrOrderCancelled.Error())+res.get("late:"+ErrOrderCancelled.Error()), late)
		f.check(t)
	})
}

// Refund vs refund vs cancel vs expiry: each paid order is refunded by
// several goroutines with different restock choices while others cancel
// it and scan it as expired. Exactly one refund wins per order, and its
// choice is the one applied, once.
func TestRefundRacingRefundCancelExpiry(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&shopInventory{}))
		const n = 30
		f := newPayFixture(t, db, 50, n, WithRefundHook(shopHook(nil)))
		for i, no := range f.nos {
			require.NoError(t, f.c.PayRef(ctx, no, Payment{Provider: "stripe", Reference: fmt.Sprint("pi_", i)}))
		}
		var res outcomes
		var wg sync.WaitGroup
		for _, no := range f.nos {
			for _, r := range []Restock{RestockSale, RestockSale, RestockShop, RestockNone} {
				wg.Go(func() { res.add(t, "refund", f.c.Refund(ctx, no, r), ErrAlreadyRefunded) })
			}
			wg.Go(func() { res.add(t, "cancel", f.c.Cancel(ctx, no), ErrAlreadyPaid, ErrAlreadyRefunded) })
			wg.Go(func() { res.add(t, "cancel", f.cLate.Cancel(ctx, no), ErrAlreadyPaid, ErrAlreadyRefunded) })
		}
		wg.Go(func() {
			_, err := f.cLate.ScanExpired(ctx)
			res.add(t, "scan", err)
		})
		wg.Wait()
		assert.Equal(t, n, res.get("refund:ok"), "exactly one refund per order")
		assert.Equal(t, 3*n, res.get("refund:"+ErrAlreadyRefunded.Error()))
		assert.Equal(t, 0, res.get("cancel:ok"), "a paid order is never cancelled")
		var shop int64
		for _, no := range f.nos {
			o := f.order(t, no)
			require.Equal(t, order.OrderRefunded, o.Status)
			if o.Restock == string(RestockShop) {
				shop++
			}
		}
		var shopRows int64
		require.NoError(t, db.Model(&shopInventory{}).Count(&shopRows).Error)
		assert.Equal(t, shop, shopRows, "one shop row per refund restocked to the shop")
		f.check(t)
	})
}

// Pay then refund vs cancel: a buyer pays and refunds while the order is
// cancelled; either it is cancelled (the payment late) or paid and
// refunded — its units come back exactly once either way.
func TestPayRefundRacingCancel(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		const n = 30
		f := newPayFixture(t, db, 50, n)
		var res outcomes
		var wg sync.WaitGroup
		for i, no := range f.nos {
			wg.Go(func() {
				err := f.c.PayRef(ctx, no, Payment{Provider: "stripe", Reference: fmt.Sprint("pi_", i)})
				res.add(t, "pay", err, ErrOrderCancelled)
				if err == nil {
					res.add(t, "refund", f.c.Refund(ctx, no, RestockSale), ErrAlreadyRefunded)
				}
			})
			for range 2 {
				wg.Go(func() {
					res.add(t, "cancel", f.c.Cancel(ctx, no), ErrAlreadyPaid, ErrAlreadyRefunded, ErrAlreadyCancelled)
				})
			}
		}
		wg.Wait()
		assert.Equal(t, n, res.get("pay:ok")+res.get("cancel:ok"))
		assert.Equal(t, res.get("pay:ok"), res.get("refund:ok"))
		f.check(t)
		stock, held, _ := f.rs.Counts(t)
		assert.EqualValues(t, 50, stock, "every unit back on sale")
		assert.Zero(t, held)
	})
}

func TestRefundObserved(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var mu sync.Mutex
		var got []string
		obs := observe.Func(func(_ context.Context, e observe.Event) {
			if e.Stage == StageRefund {
				mu.Lock()
				got = append(got, e.Outcome+" "+e.Activity)
				mu.Unlock()
			}
		})
		f := newPayFixture(t, db, 10, 2, WithObserver(obs))
		require.NoError(t, f.c.PayRef(ctx, f.nos[0], Payment{Provider: "stripe", Reference: "pi_1"}))
		require.NoError(t, f.c.Refund(ctx, f.nos[0], RestockNone))
		assert.ErrorIs(t, f.c.Refund(ctx, f.nos[0], RestockNone), ErrAlreadyRefunded)
		assert.ErrorIs(t, f.c.Refund(ctx, f.nos[1], RestockNone), ErrNotPaid)
		assert.Equal(t, []string{"ok 1", "already_refunded 1", "not_paid 1"}, got)
	})
}
