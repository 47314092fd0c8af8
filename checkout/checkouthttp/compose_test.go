package checkouthttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouthttp"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// The composition under test: a real one, small. Redis (miniredis) holds
// the stock (stock.Deductor) and the results; SQLite holds the orders.
// handoff.Submitter hands messages to an in-process publisher, a queue the
// test drains into order.Processor (the consumer's transaction), through
// handoff.Fence when the hand-off fails. The checkout runs its default steps
// with a link check (a stub verifier: sig "ok" passes) and, first, a
// "force" step that ends the attempt with an outcome a test sets.

const (
	sale    = "sale1"
	goodSig = "ok"
)

type env struct {
	t       *testing.T
	rdb     *redis.Client
	mr      *miniredis.Miniredis
	db      *gorm.DB
	stock   *stock.Deductor
	proc    *order.Processor
	orders  *status.Orders
	queue   *queue
	co      *checkout.Checkout
	h       *checkouthttp.Handler
	mux     *http.ServeMux
	force   atomic.Pointer[checkout.Outcome]
	log     syncBuffer
	tickers chan *ticker // one per stream that waits, once its first event is out

	mu    sync.Mutex
	heard []heard // WithOnOutcome
}

type heard struct {
	code int
	o    checkout.Outcome
}

// queue is the in-process publisher: Kafka for the test.
type queue struct {
	mu   sync.Mutex
	msgs []order.Message
	down bool // publishes fail (and the fallback always does)
}

func (q *queue) Publish(_ context.Context, m order.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.down {
		return errors.New("kafka: broker 10.0.0.7:9092 down")
	}
	q.msgs = append(q.msgs, m)
	return nil
}

func (q *queue) setDown(b bool) { q.mu.Lock(); q.down = b; q.mu.Unlock() }

func (q *queue) len() int { q.mu.Lock(); defer q.mu.Unlock(); return len(q.msgs) }

// ticker is a stream's hand-driven ticker: a send returns once the stream
// took the tick, that is once it is back waiting after its previous read.
type ticker struct {
	c       chan time.Time
	stopped atomic.Bool
}

func (k *ticker) tick(t *testing.T) {
	t.Helper()
	select {
	case k.c <- time.Time{}:
	case <-time.After(30 * time.Second): // a watchdog against a hang, not a timing assertion
		t.Fatal("the stream took no tick: it ended")
	}
}

// syncBuffer is the log's sink, written by handler goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// newEnv builds the composition with units of stock, and the handler with
// opts added.
func newEnv(t *testing.T, units int64, opts ...checkouthttp.Option) *env {
	t.Helper()
	return newEnvVariants(t, units, nil, opts...)
}

// newEnvVariants is newEnv of a sale with variants (units ignored; each
// variant's DB stock is the activity row "sale1/<variant>").
func newEnvVariants(t *testing.T, units int64, variants []stock.Variant, opts ...checkouthttp.Option) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, queue: &queue{}, tickers: make(chan *ticker, 16)}
	clock := testenv.NewEpochClock(0)
	e.rdb, e.mr = testenv.Miniredis(t)
	e.db = testenv.SQLite(t)
	require.NoError(t, order.AutoMigrate(ctx, e.db))
	day := testenv.EpochDay(0)
	require.NoError(t, e.db.Create(&order.Activity{ID: sale, Name: "sale", ActivityPrice: 990, OriginalPrice: 1990,
		Stock: units, Remaining: units, PerUserLimit: 1, Status: order.ActivityActive, Start: day, End: day.Add(24 * time.Hour)}).Error)

	var err error
	e.stock, err = stock.New(e.rdb, stock.WithKeyPrefix(testenv.Prefix(t)), stock.WithClock(clock))
	require.NoError(t, err)
	_, err = e.stock.Load(ctx, stock.Activity{ID: sale, Stock: units, PerUserLimit: 1, Variants: variants})
	require.NoError(t, err)
	for _, v := range variants {
		require.NoError(t, e.db.Create(&order.Activity{ID: stock.VariantOf(sale, v.ID), Name: "sale " + v.ID, ActivityPrice: 990, OriginalPrice: 1990,
			Stock: v.Stock, Remaining: v.Stock, PerUserLimit: 1, Status: order.ActivityActive, Start: day, End: day.Add(24 * time.Hour)}).Error)
	}

	results, err := status.NewResults(e.rdb, e.db, status.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	ids, err := orderid.New(1, orderid.WithClock(clock), orderid.WithEpoch(testenv.Epoch().Add(-24*time.Hour)))
	require.NoError(t, err)
	e.proc, err = order.NewProcessor(e.db, ids, order.WithClock(clock))
	require.NoError(t, err)
	e.orders, err = status.NewOrders(e.db)
	require.NoError(t, err)
	release := order.ReleaserFunc(func(ctx context.Context, activity, id string) error {
		_, err := e.stock.Release(ctx, activity, id)
		return err
	})
	fence, err := handoff.NewFence(e.db, release, handoff.WithResults(results))
	require.NoError(t, err)
	noOutbox := handoff.Fallback(func(context.Context, order.Message) error { return errors.New("outbox: db 10.0.0.8 down") })
	sub, err := handoff.NewSubmitter(e.queue.Publish, noOutbox, fence, handoff.WithResults(results), handoff.WithClock(clock))
	require.NoError(t, err)

	e.co, err = checkout.New(checkout.Config{
		Activity: sale, Node: "t1", Now: clock.Now,
		Stock: e.stock, Submitter: sub, Results: results.Reservation,
		Link: func(_ context.Context, p token.VerifyParams) (token.Claims, error) {
			if p.Token != goodSig {
				return token.Claims{}, token.ErrRefused
			}
			return token.Claims{}, nil
		},
		Steps: func(d []checkout.Step) []checkout.Step {
			return append([]checkout.Step{{Name: "force", Run: func(context.Context, *checkout.Attempt) checkout.Outcome {
				if o := e.force.Load(); o != nil {
					return *o
				}
				return checkout.Outcome{}
			}}}, d...)
		},
	})
	require.NoError(t, err)

	base := []checkouthttp.Option{
		checkouthttp.WithLink(func(r *http.Request) string { return r.PathValue("sig") }),
		checkouthttp.WithLogger(slog.New(slog.NewTextHandler(&e.log, nil))),
		checkouthttp.WithOrderStatus(func(ctx context.Context, no string) (string, error) {
			o, err := e.orders.Get(ctx, no)
			return o.Status, err
		}),
		checkouthttp.WithOnOutcome(func(_ *http.Request, code int, o checkout.Outcome) {
			e.mu.Lock()
			e.heard = append(e.heard, heard{code, o})
			e.mu.Unlock()
		}),
		checkouthttp.WithTicker(func(time.Duration) (<-chan time.Time, func()) {
			k := &ticker{c: make(chan time.Time)}
			e.tickers <- k
			return k.c, func() { k.stopped.Store(true) }
		}),
	}
	e.h, err = checkouthttp.New(e.co, func(r *http.Request) (string, bool) {
		u := r.Header.Get("X-User")
		return u, u != ""
	}, append(base, opts...)...)
	require.NoError(t, err)
	e.mux = http.NewServeMux()
	e.mux.HandleFunc("/buy/{sig}", e.h.Buy)
	e.mux.HandleFunc("/result/{reservation}", e.h.Result)
	e.mux.HandleFunc("/events/{reservation}", e.h.Stream)
	return e
}

// request is a request of user ("" = not signed in); a body is sent as
// application/json.
func request(method, path, user, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		r.Header.Set("X-User", user)
	}
	return r
}

func (e *env) serve(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.mux.ServeHTTP(w, r)
	return w
}

// buy sends a buy of user with request ID id over the good link.
func (e *env) buy(user, id string) *httptest.ResponseRecorder {
	return e.serve(request(http.MethodPost, "/buy/"+goodSig, user, `{"token":"","captcha_id":"","captcha":"","request_id":"`+id+`"}`))
}

func (e *env) get(path, user string) *httptest.ResponseRecorder {
	return e.serve(request(http.MethodGet, path, user, ""))
}

// drain runs the queued messages through the consumer's transaction.
func (e *env) drain() {
	e.t.Helper()
	e.queue.mu.Lock()
	msgs := e.queue.msgs
	e.queue.msgs = nil
	e.queue.mu.Unlock()
	if len(msgs) == 0 {
		return
	}
	_, err := e.proc.Process(context.Background(), msgs)
	require.NoError(e.t, err)
}

// lastHeard is the last outcome WithOnOutcome heard.
func (e *env) lastHeard() heard {
	e.mu.Lock()
	defer e.mu.Unlock()
	require.NotEmpty(e.t, e.heard)
	return e.heard[len(e.heard)-1]
}

func (e *env) orderNo(resv string) string {
	e.t.Helper()
	var o order.Order
	require.NoError(e.t, e.db.Where("reservation_id = ?", resv).First(&o).Error)
	return o.OrderNo
}

func resv(t *testing.T, user, id string) string {
	t.Helper()
	r, err := checkout.ReservationID(user, id)
	require.NoError(t, err)
	return r
}

// stream is one Stream request running on its own goroutine.
type stream struct {
	w      *httptest.ResponseRecorder
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *env) openStream(path, user string) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{w: httptest.NewRecorder(), cancel: cancel, done: make(chan struct{})}
	r := request(http.MethodGet, path, user, "").WithContext(ctx)
	go func() {
		defer close(s.done)
		e.mux.ServeHTTP(s.w, r)
	}()
	return s
}

// waiting returns the ticker of the next stream that sent its first event
// and waits for a tick.
func (e *env) waiting() *ticker {
	e.t.Helper()
	select {
	case k := <-e.tickers:
		return k
	case <-time.After(30 * time.Second): // a watchdog against a hang, not a timing assertion
		e.t.Fatal("no stream is waiting")
		return nil
	}
}

// end waits for s to return.
func (s *stream) end(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second): // watchdog
		t.Fatal("the stream did not end")
	}
}

// events are the data lines of s's events (after it ended).
func (s *stream) events(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, block := range strings.Split(s.w.Body.String(), "\n\n") {
		if block == "" {
			continue
		}
		ev, data, ok := strings.Cut(block, "\n")
		require.True(t, ok, "event %q", block)
		require.Equal(t, "event: result", ev)
		out = append(out, strings.TrimPrefix(data, "data: "))
	}
	return out
}
