package payment

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/ordertest"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/status"
)

var eachDB = ordertest.EachDB

// fakeProvider is a payment provider with the state of each
// authorization, answering by idempotency key: a repeated key gets the
// first answer and does nothing again. It can fail a call before doing it
// (fail), or do it and lose the answer (timeout), once per key.
type fakeProvider struct {
	mu       sync.Mutex
	state    map[string]string // reservation → authorized | captured | voided
	answered map[string]error  // idempotency key → its first answer
	calls    map[string]int    // op → calls that took effect
	replays  int               // calls answered from answered
	fail     map[string]bool   // key → fail it once, doing nothing
	timeout  map[string]bool   // key → do it, then answer with a timeout once
	bad      []string          // capture and void both took effect
}

var errProviderDown = errors.New("provider down")

func newFakeProvider() *fakeProvider {
	return &fakeProvider{state: map[string]string{}, answered: map[string]error{}, calls: map[string]int{},
		fail: map[string]bool{}, timeout: map[string]bool{}}
}

func (p *fakeProvider) call(op, key string, a Authorization, do func(st string) (string, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if key != op+":"+a.ReservationID {
		return errors.New("key not derived from the reservation: " + key)
	}
	if p.fail[key] {
		delete(p.fail, key)
		return errProviderDown
	}
	if err, ok := p.answered[key]; ok {
		p.replays++
		if p.timeout[key] {
			delete(p.timeout, key)
			return context.DeadlineExceeded
		}
		return err
	}
	next, err := do(p.state[a.ReservationID])
	p.answered[key] = err
	if err == nil {
		p.calls[op]++
		if next != "" {
			p.state[a.ReservationID] = next
		}
	}
	if p.timeout[key] {
		delete(p.timeout, key)
		return context.DeadlineExceeded // it happened; the answer was lost
	}
	return err
}

func (p *fakeProvider) Authorize(_ context.Context, key string, a Authorization) error {
	return p.call("authorize", key, a, func(st string) (string, error) {
		if st != "" {
			return "", errors.New("authorized before")
		}
		return "authorized", nil
	})
}

func (p *fakeProvider) Capture(_ context.Context, key string, a Authorization) error {
	return p.call("capture", key, a, func(st string) (string, error) {
		switch st {
		case "authorized":
			return "captured", nil
		case "voided":
			p.bad = append(p.bad, a.ReservationID)
			return "", errors.New("voided")
		}
		return "", errors.New("not authorized")
	})
}

func (p *fakeProvider) Void(_ context.Context, key string, a Authorization) error {
	return p.call("void", key, a, func(st string) (string, error) {
		switch st {
		case "authorized":
			return "voided", nil
		case "captured":
			p.bad = append(p.bad, a.ReservationID)
			return "", nil // the contract: a captured one is left alone
		}
		return "", nil // never authorized: nothing to do
	})
}

func (p *fakeProvider) stateOf(resv string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state[resv]
}

type fixture struct {
	db     *gorm.DB
	rs     *ordertest.RedisStock
	prov   *fakeProvider
	flow   *Flow
	c      *status.Canceller // on the clock
	cLate  *status.Canceller // past every payment window
	orders *status.Orders
	clock  *testenv.Clock
	nos    []string
	resv   map[string]string
	init   int64
	// callbacks: the orders are paid by provider callbacks, not captured
	// by the flow, so a paid order's authorization stays as it was
	callbacks bool
}

// newFixture writes n one-unit orders of activity 1, each reserved in
// Redis and authorized at the provider first, with cancellers releasing
// through the flow's voiding releaser.
func newFixture(t *testing.T, db *gorm.DB, initial int64, n int, opts ...status.CancellerOption) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{db: db, prov: newFakeProvider(), clock: testenv.NewEpochClock(0), resv: map[string]string{}, init: initial}
	late := testenv.NewEpochClock(31 * time.Minute)
	day := testenv.EpochDay(0)
	require.NoError(t, db.Create(&order.Activity{ID: "1", Name: "a1", ActivityPrice: 990, Stock: initial, Remaining: initial,
		PerUserLimit: 1, Status: 1, Start: day, End: day.Add(24 * time.Hour)}).Error)
	f.rs = ordertest.NewRedisStock(t, "1", initial)
	var err error
	f.orders, err = status.NewOrders(db)
	require.NoError(t, err)
	// the flow needs a canceller, the canceller the flow's releaser
	var flowRef *Flow
	vr := &lateBound{f: &flowRef, inner: f.rs}
	f.c, err = status.NewCanceller(db, nil, vr, append([]status.CancellerOption{status.WithClock(f.clock)}, opts...)...)
	require.NoError(t, err)
	f.cLate, err = status.NewCanceller(db, nil, vr, append([]status.CancellerOption{status.WithClock(late)}, opts...)...)
	require.NoError(t, err)
	f.flow, err = NewFlow("fakepay", f.prov, f.c, f.orders)
	require.NoError(t, err)
	flowRef = f.flow
	g, err := orderid.New(1, orderid.WithClock(f.clock), orderid.WithEpoch(testenv.Epoch().Add(-24*time.Hour)))
	require.NoError(t, err)
	proc, err := order.NewProcessor(db, g, order.WithClock(f.clock))
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		m := order.Message{Version: order.MessageVersion, MsgID: "m-" + strconv.Itoa(i), ReservationID: "r-" + strconv.Itoa(i),
			ActivityID: "1", UserID: strconv.Itoa(100 + i), Qty: 1, CreatedAt: testenv.Epoch()}
		f.rs.Reserve(t, m.ReservationID, 1)
		require.NoError(t, f.flow.Authorize(ctx, Authorization{Activity: "1", User: m.UserID, ReservationID: m.ReservationID, Amount: 990}))
		out, err := proc.Handle(ctx, m)
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)
		f.nos = append(f.nos, out.OrderNo)
		f.resv[out.OrderNo] = m.ReservationID
	}
	return f
}

// lateBound is the flow's voiding releaser, bound once the flow exists.
type lateBound struct {
	f     **Flow
	inner order.Releaser
}

func (l *lateBound) Release(ctx context.Context, act, id string) error {
	return (*l.f).Releaser(l.inner).Release(ctx, act, id)
}

func (l *lateBound) ReleaseOrder(ctx context.Context, o order.Order) error {
	return (*l.f).Releaser(l.inner).(status.OrderReleaser).ReleaseOrder(ctx, o)
}

func (f *fixture) order(t testing.TB, no string) order.Order {
	t.Helper()
	o, err := f.orders.Get(context.Background(), no)
	require.NoError(t, err)
	return o
}

// check asserts conservation in Redis and SQL, releases exactly once per
// order that gave its units back, and the provider's state per order:
// captured for a paid or refunded one, voided for a cancelled one, never
// both.
func (f *fixture) check(t *testing.T) {
	t.Helper()
	stock, held, released := f.rs.Counts(t)
	require.Equal(t, f.init, stock+held, "Redis: stock + held = initial")
	var dbStock, holding int64
	require.NoError(t, f.db.Raw("SELECT stock FROM seckill_activity WHERE id = '1'").Scan(&dbStock).Error)
	require.NoError(t, f.db.Raw("SELECT COALESCE(SUM(qty),0) FROM seckill_order WHERE status IN ('CREATED','PAID') OR status = 'REFUNDED' AND restock <> 'sale'").
		Scan(&holding).Error)
	require.Equal(t, f.init, dbStock+holding, "DB: stock + holding orders = initial")
	require.Equal(t, held, holding)
	for _, no := range f.nos {
		o := f.order(t, no)
		r := f.resv[no]
		switch o.Status {
		case order.OrderPaid, order.OrderRefunded:
			if !f.callbacks {
				require.Equal(t, "captured", f.prov.stateOf(r), "%s %s", no, o.Status)
			}
		case order.OrderCancelled:
			require.Equal(t, "voided", f.prov.stateOf(r), "%s %s", no, o.Status)
			require.Equal(t, int64(1), released[r], no)
		case order.OrderCreated:
			require.Equal(t, "authorized", f.prov.stateOf(r), "%s %s", no, o.Status)
		default:
			t.Fatalf("%s: status %s", no, o.Status)
		}
	}
	require.Empty(t, f.prov.bad, "capture and void both reached the provider")
}
