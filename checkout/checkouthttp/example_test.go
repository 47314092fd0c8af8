package checkouthttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouthttp"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// A service mounts a sale on its own mux, behind its own sessions: the
// buyer comes from the session, the link token from the path.
func Example() {
	co, done := newSale() // the service's checkout of one sale, below
	defer done()

	h, err := checkouthttp.New(co, sessionUser,
		checkouthttp.WithLink(func(r *http.Request) string { return r.PathValue("sig") }))
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/buy/{sig}", h.Buy)
	mux.HandleFunc("GET /api/result/{reservation}", h.Result)
	mux.HandleFunc("GET /api/events/{reservation}", h.Stream)

	// What a browser would send.
	call := func(method, path, user, body string) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Demo-User", user)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	call("POST", "/api/buy/signed", "alice", `{"request_id":"a1"}`)
	call("POST", "/api/buy/signed", "alice", `{"request_id":"a1","coupon":"x"}`)
	call("GET", "/api/result/u5.alice-a1", "alice", "")
	call("GET", "/api/result/u5.alice-a1", "bob", "")
	// Output:
	// 202 {"status":"queued","reservation":"u5.alice-a1"}
	// 400 {"status":"bad_request","message":"bad body: unknown field \"coupon\""}
	// 200 {"status":"queued","reservation":"u5.alice-a1"}
	// 200 {"status":"unknown"}
}

// sessionUser stands for the service's session lookup.
func sessionUser(r *http.Request) (string, bool) {
	u := r.Header.Get("X-Demo-User")
	return u, u != ""
}

// newSale builds a checkout of one sale of 10 units over an embedded Redis,
// with a stand-in for the order pipeline (a service passes an
// *handoff.Submitter and (*status.Results).Reservation) and for the link
// check ((*token.Signer).Verify).
func newSale() (*checkout.Checkout, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	st, err := stock.New(rdb)
	if err != nil {
		panic(err)
	}
	if _, err := st.Load(context.Background(), stock.Activity{ID: "sale1", Stock: 10, PerUserLimit: 1}); err != nil {
		panic(err)
	}
	p := &pipeline{queued: map[string]string{}}
	co, err := checkout.New(checkout.Config{
		Activity: "sale1", Stock: st, Submitter: p, Results: p.result,
		Link: func(_ context.Context, v token.VerifyParams) (token.Claims, error) {
			if v.Token != "signed" {
				return token.Claims{}, token.ErrRefused
			}
			return token.Claims{}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	return co, func() { _ = rdb.Close(); mr.Close() }
}

// pipeline stands for the order pipeline: it queues and never settles.
type pipeline struct {
	mu     sync.Mutex
	queued map[string]string // reservation → buyer
}

func (p *pipeline) Submit(_ context.Context, m order.Message) (handoff.Route, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queued[m.ReservationID] = m.UserID
	return handoff.RouteKafka, nil
}

func (p *pipeline) result(_ context.Context, q status.ResultQuery) (order.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queued[q.ReservationID] != q.User {
		return order.Result{}, nil
	}
	return order.Result{Activity: q.Activity, User: q.User, Status: order.StatusQueued, ReservationID: q.ReservationID}, nil
}
