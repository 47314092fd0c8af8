package status

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/ordertest"
)

// cartLines are the lines of every cart of the fixture: activity, units.
var cartLines = []struct {
	act string
	qty int64
}{{"s/M", 1}, {"s/L", 2}, {"b", 3}}

// shopLine is the shop's inventory row of a line refunded to the shop.
type shopLine struct {
	OrderNo string `gorm:"primaryKey;size:32"`
	LineNo  int    `gorm:"primaryKey;autoIncrement:false"`
	Qty     int64
}

// shopLineHook records every line of the refunded orders it is given.
func shopLineHook(ctx context.Context, tx *gorm.DB, orders []order.Order) error {
	for _, o := range orders {
		for _, l := range o.Lines {
			if err := tx.Create(&shopLine{OrderNo: o.OrderNo, LineNo: l.LineNo, Qty: l.Qty}).Error; err != nil {
				return err
			}
		}
	}
	return nil
}

type cartFixture struct {
	db    *gorm.DB
	rs    map[string]*redisStock // per line activity
	clock *fixedClock
	c     *Canceller
	nos   []string
	init  int64
}

// newCartFixture writes n carts (users 100..) of cartLines, each line
// reserved in its activity's Redis ledger first as "<id>#<i>".
func newCartFixture(t *testing.T, db *gorm.DB, initial int64, n int) *cartFixture {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&shopLine{}))
	f := &cartFixture{db: db, clock: newClock(), init: initial, rs: map[string]*redisStock{}}
	addActivity(t, db, "s", 0, 10)
	for _, l := range cartLines {
		addActivity(t, db, l.act, initial, 10)
		f.rs[l.act] = ordertest.NewRedisStock(t, l.act, initial)
	}
	rel := order.ReleaserFunc(func(ctx context.Context, act, id string) error { return f.rs[act].Release(ctx, act, id) })
	proc, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(f.clock))
	require.NoError(t, err)
	f.c, err = NewCanceller(db, nil, rel, WithClock(f.clock), WithKeyPrefix(testenv.Prefix(t)), WithRefundHook(shopLineHook))
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		m := msg(i, "s", num(100+i))
		m.Version, m.Qty = order.MessageVersion, 0
		for k, l := range cartLines {
			m.Lines = append(m.Lines, order.Line{ActivityID: l.act, Qty: l.qty})
			f.rs[l.act].Reserve(t, m.ReservationID+"#"+strconv.Itoa(k), l.qty)
		}
		out, err := proc.Handle(context.Background(), m)
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status, out.Reason)
		f.nos = append(f.nos, out.OrderNo)
	}
	return f
}

// lines reads the line rows of orderNo.
func (f *cartFixture) lines(t *testing.T, no string) []order.Line {
	t.Helper()
	ls, err := readLines(f.db, defaultTables().Line, no)
	require.NoError(t, err)
	require.Len(t, ls, len(cartLines))
	return ls
}

// check counts, per line activity, from Redis and SQL: Redis stock + held
// = initial; DB stock + the units of the lines that hold theirs = initial;
// Redis holds what the lines hold; and every line's reservation was
// released once if the line gave its units back (cancelled, or refunded
// to the sale), never otherwise.
func (f *cartFixture) check(t *testing.T) {
	t.Helper()
	for _, cl := range cartLines {
		var live int64
		require.NoError(t, f.db.Raw("SELECT COALESCE(SUM(qty),0) FROM seckill_order_line WHERE activity_id = ? AND (status = '' OR status = ? AND restock <> ?)",
			cl.act, order.OrderRefunded, "sale").Scan(&live).Error)
		stock, held, released := f.rs[cl.act].Counts(t)
		require.Equal(t, f.init, stock+held, "%s: Redis stock + held = initial", cl.act)
		require.Equal(t, f.init, dbStock(t, f.db, cl.act)+live, "%s: DB stock + live lines = initial", cl.act)
		require.Equal(t, held, live, "%s: Redis holds what the lines hold", cl.act)
		for _, no := range f.nos {
			for _, l := range f.lines(t, no) {
				if l.ActivityID != cl.act {
					continue
				}
				want := int64(0)
				if releasable(l) {
					want = 1
				}
				require.Equal(t, want, released[l.ReservationID], "releases of %s (%s %s)", l.ReservationID, l.Status, l.Restock)
			}
		}
	}
}

// CancelLine under 8 concurrent callers per line cancels each line once:
// its units back once in SQL and Redis, the other lines untouched, the
// order still CREATED and payable; the whole-order Cancel afterwards
// cancels the other lines, not that one again.
func TestCancelLineOnceUnderRacing(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCartFixture(t, db, 100, 6)
		var res outcomes
		var wg sync.WaitGroup
		for _, no := range f.nos {
			for range 8 {
				wg.Go(func() { res.add(t, "cancel", f.c.CancelLine(ctx, no, 1), ErrAlreadyCancelled) })
			}
		}
		wg.Wait()
		assert.Equal(t, len(f.nos), res.get("cancel:ok"), "one cancellation per line")
		assert.Equal(t, 7*len(f.nos), res.get("cancel:"+ErrAlreadyCancelled.Error()))
		f.check(t)
		assert.EqualValues(t, 100-len(f.nos), dbStock(t, db, "s/M"), "line 0 untouched")
		assert.EqualValues(t, 100, dbStock(t, db, "s/L"), "line 1 back, once")
		for _, no := range f.nos {
			ls := f.lines(t, no)
			assert.Equal(t, []string{"", order.OrderCancelled, ""}, []string{ls[0].Status, ls[1].Status, ls[2].Status})
			var o order.Order
			require.NoError(t, db.Where("order_no = ?", no).First(&o).Error)
			assert.Equal(t, order.OrderCreated, o.Status)
		}

		require.NoError(t, f.c.Pay(ctx, f.nos[0]))
		assert.ErrorIs(t, f.c.CancelLine(ctx, f.nos[0], 0), ErrAlreadyPaid, "a paid order's line is refunded, not cancelled")
		for range 3 {
			wg.Go(func() { res.add(t, "whole", f.c.Cancel(ctx, f.nos[1]), ErrAlreadyCancelled) })
			wg.Go(func() { res.add(t, "line", f.c.CancelLine(ctx, f.nos[1], 2), ErrAlreadyCancelled) })
		}
		wg.Wait()
		assert.Equal(t, 1, res.get("whole:ok"), "the order cancelled once")
		assert.LessOrEqual(t, res.get("line:ok"), 1, "its line 2 at most once, before it")
		ls := f.lines(t, f.nos[1])
		assert.Equal(t, []string{order.OrderCancelled, order.OrderCancelled, order.OrderCancelled}, []string{ls[0].Status, ls[1].Status, ls[2].Status})
		f.check(t)

		assert.ErrorIs(t, f.c.CancelLine(ctx, f.nos[2], 3), ErrOrderNotFound, "no line 3")
		assert.ErrorIs(t, f.c.CancelLine(ctx, "404", 0), ErrOrderNotFound)
	})
}

// RefundLine under 8 concurrent callers per line, with every restock
// choice, refunds each line once: the first choice stands, a restock to
// the sale gives the units back once in SQL and Redis, to the shop runs
// the hook once with that line alone; the whole-order Refund afterwards
// refunds the other lines only.
func TestRefundLineOnceUnderRacing(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCartFixture(t, db, 100, 6)
		for _, no := range f.nos[1:] {
			require.NoError(t, f.c.Pay(ctx, no))
		}
		assert.ErrorIs(t, f.c.RefundLine(ctx, f.nos[0], 0, RestockSale), ErrNotPaid)
		assert.ErrorIs(t, f.c.RefundLine(ctx, f.nos[1], 0, "back"), order.ErrInvalidArgument)
		var res outcomes
		var wg sync.WaitGroup
		for _, no := range f.nos[1:] {
			for k := range 8 {
				r := []Restock{RestockSale, RestockShop, RestockNone, RestockSale}[k%4]
				wg.Go(func() { res.add(t, "refund", f.c.RefundLine(ctx, no, 2, r), ErrAlreadyRefunded) })
			}
		}
		wg.Wait()
		paid := len(f.nos) - 1
		assert.Equal(t, paid, res.get("refund:ok"), "one refund per line")
		assert.Equal(t, 7*paid, res.get("refund:"+ErrAlreadyRefunded.Error()))
		f.check(t)
		var shopUnits, sale int64
		for _, no := range f.nos[1:] {
			l := f.lines(t, no)[2]
			require.Equal(t, order.OrderRefunded, l.Status)
			switch Restock(l.Restock) {
			case RestockShop:
				shopUnits += l.Qty
			case RestockSale:
				sale += l.Qty
			}
		}
		var rows []shopLine
		require.NoError(t, db.Find(&rows).Error)
		var got int64
		for _, r := range rows {
			assert.Equal(t, 2, r.LineNo)
			got += r.Qty
		}
		assert.Equal(t, shopUnits, got, "one shop row per line refunded to the shop")
		assert.EqualValues(t, int64(100-3*len(f.nos))+sale, dbStock(t, db, "b"))

		// The whole-order refund takes the lines still following the order.
		for _, no := range f.nos[1:] {
			wg.Go(func() { res.add(t, "whole", f.c.Refund(ctx, no, RestockSale), ErrAlreadyRefunded) })
			wg.Go(func() { res.add(t, "whole", f.c.Refund(ctx, no, RestockSale), ErrAlreadyRefunded) })
			wg.Go(func() { res.add(t, "late", f.c.RefundLine(ctx, no, 0, RestockNone), ErrAlreadyRefunded) })
		}
		wg.Wait()
		assert.Equal(t, paid, res.get("whole:ok"))
		f.check(t)
		for _, no := range f.nos[1:] {
			for _, l := range f.lines(t, no) {
				assert.Equal(t, order.OrderRefunded, l.Status, "%s", l.ReservationID)
			}
		}
	})
}

// A cart cancelled whole (explicitly, or at expiry by the scan) gives back
// every line once; a payment after the expiry finds it cancelled.
func TestCartCancelledWhole(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCartFixture(t, db, 50, 4)
		require.NoError(t, f.c.CancelLine(ctx, f.nos[0], 0))
		require.NoError(t, f.c.Cancel(ctx, f.nos[0]))
		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), ErrAlreadyCancelled)
		f.check(t)

		f.clock.Add(31 * time.Minute)
		n, err := f.c.ScanExpired(ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		f.check(t)
		for _, cl := range cartLines {
			assert.EqualValues(t, 50, dbStock(t, db, cl.act), cl.act)
			stock, held, _ := f.rs[cl.act].Counts(t)
			assert.EqualValues(t, 50, stock, cl.act)
			assert.Zero(t, held, cl.act)
		}
		assert.ErrorIs(t, f.c.PayRef(ctx, f.nos[1], Payment{Provider: "stripe", Reference: fmt.Sprint("pi_1")}), ErrOrderCancelled)
	})
}

// The result of a cart, read from the database, and the order readers
// show its lines, each with its own state.
func TestCartResultShowsLines(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newCartFixture(t, db, 10, 1)
		require.NoError(t, f.c.CancelLine(ctx, f.nos[0], 1))
		results, err := NewResults(testenv.Redis(t), db, WithKeyPrefix(testenv.Prefix(t)))
		require.NoError(t, err)
		res, err := results.Get(ctx, "s", "100")
		require.NoError(t, err)
		assert.Equal(t, order.StatusSuccess, res.Status)
		require.Len(t, res.Lines, 3)
		assert.Equal(t, []string{"s/M", "s/L", "b"}, []string{res.Lines[0].ActivityID, res.Lines[1].ActivityID, res.Lines[2].ActivityID})
		assert.Equal(t, []string{"", order.OrderCancelled, ""}, []string{res.Lines[0].Status, res.Lines[1].Status, res.Lines[2].Status})
		res, err = results.Reservation(ctx, ResultQuery{Activity: "s", User: "100", ReservationID: "r-0"})
		require.NoError(t, err)
		assert.Len(t, res.Lines, 3)

		orders, err := NewOrders(db)
		require.NoError(t, err)
		o, err := orders.Get(ctx, f.nos[0])
		require.NoError(t, err)
		require.Len(t, o.Lines, 3)
		assert.EqualValues(t, 2, o.Lines[1].Qty)
		byUser, err := orders.ByUser(ctx, "s", "100")
		require.NoError(t, err)
		require.Len(t, byUser, 1)
		assert.Len(t, byUser[0].Lines, 3)
	})
}
