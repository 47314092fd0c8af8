package checkouthttp_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouthttp"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/stock"
)

// TestOutcomeTable: every Kind and every Reason, ended by the "force" step
// of a real checkout, answers the reference deployment's status code, JSON
// and Retry-After; Status agrees with what Buy sent, and so does the hook.
func TestOutcomeTable(t *testing.T) {
	e := newEnv(t, 10)
	const r1 = "u2.u1-a1"
	secret := "dial tcp 10.0.0.1:6379: connection refused"
	refused := func(r checkout.Reason, final bool, msg string) checkout.Outcome {
		return checkout.Outcome{Kind: checkout.Refused, Reason: r, Final: final, Message: msg}
	}
	withRetry := func(o checkout.Outcome, d time.Duration) checkout.Outcome { o.RetryAfter = d; return o }
	cases := []struct {
		name  string
		o     checkout.Outcome
		code  int
		body  string
		retry string
	}{
		{"accepted", checkout.Outcome{Kind: checkout.Accepted, Reservation: r1}, 202, `{"status":"queued","reservation":"` + r1 + `"}`, ""},
		{"replayed queued", checkout.Outcome{Kind: checkout.Replayed, Reservation: r1, Result: order.Result{Status: order.StatusQueued, ReservationID: r1}},
			202, `{"status":"queued","reservation":"` + r1 + `"}`, ""},
		{"replayed created", checkout.Outcome{Kind: checkout.Replayed, Reservation: r1, Result: order.Result{Status: order.StatusSuccess, OrderNo: "77", ReservationID: r1}},
			200, `{"status":"created","reservation":"` + r1 + `","order_no":"77"}`, ""},
		{"replayed failed", checkout.Outcome{Kind: checkout.Replayed, Reservation: r1, Result: order.Result{Status: order.StatusFailed, Reason: order.ReasonLimit, ReservationID: r1}},
			200, `{"status":"failed","reservation":"` + r1 + `","reason":"limit_reached"}`, ""},
		{"replayed cancelled", checkout.Outcome{Kind: checkout.Replayed, Reservation: r1, Result: order.Result{Status: order.StatusFailed, Reason: status.ReasonCancelled, OrderNo: "78", ReservationID: r1}},
			200, `{"status":"cancelled","reservation":"` + r1 + `","order_no":"78"}`, ""},
		{"sold_out", refused(checkout.SoldOut, true, "sold out"), 409, `{"status":"sold_out","message":"sold out"}`, ""},
		{"already_bought", refused(checkout.AlreadyBought, true, "the per-buyer limit is reached"), 409, `{"status":"already_bought","message":"the per-buyer limit is reached"}`, ""},
		{"limited", refused(checkout.Limited, false, "too many requests, retry shortly"), 429, `{"status":"limited","message":"too many requests, retry shortly"}`, ""},
		{"limited retry-after", withRetry(refused(checkout.Limited, false, "slow down"), 1500*time.Millisecond), 429, `{"status":"limited","message":"slow down"}`, "2"},
		{"captcha", refused(checkout.BadCaptcha, false, "wrong or expired captcha"), 400, `{"status":"captcha","message":"wrong or expired captcha"}`, ""},
		{"token", refused(checkout.BadToken, true, "invalid access token"), 403, `{"status":"token","message":"invalid access token"}`, ""},
		{"denied", refused(checkout.Denied, true, "refused by risk control"), 403, `{"status":"denied","message":"refused by risk control"}`, ""},
		{"not_started", refused(checkout.NotStarted, false, "the sale has not started"), 425, `{"status":"not_started","message":"the sale has not started"}`, ""},
		{"ended", refused(checkout.Ended, true, "the sale has ended"), 410, `{"status":"ended","message":"the sale has ended"}`, ""},
		{"paused", withRetry(refused(checkout.Paused, false, "the sale is paused, retry shortly"), 5*time.Second), 503, `{"status":"paused","message":"the sale is paused, retry shortly"}`, "5"},
		{"busy refusal", refused(checkout.TryAgain, false, "the sale is paused for a moment, retry shortly"), 503, `{"status":"busy","message":"the sale is paused for a moment, retry shortly"}`, ""},
		{"retry", refused(checkout.HandoffFailed, false, "could not place the order, please retry"), 503, `{"status":"retry","message":"could not place the order, please retry"}`, ""},
		{"released", checkout.Outcome{Kind: checkout.Refused, Reason: checkout.Released, Final: true, Message: "start a new attempt", Reservation: r1},
			409, `{"status":"failed","reservation":"` + r1 + `","reason":"released"}`, ""},
		{"bad_request", refused(checkout.BadRequest, true, "invalid quantity"), 400, `{"status":"bad_request","message":"invalid quantity"}`, ""},
		{"a step's own final reason", refused("blocked_region", true, "not sold in your region"), 403, `{"status":"blocked_region","message":"not sold in your region"}`, ""},
		{"a step's own retryable reason", refused("warming_up", false, "retry shortly"), 503, `{"status":"warming_up","message":"retry shortly"}`, ""},
		{"busy", checkout.Outcome{Kind: checkout.Busy, Reason: checkout.TryAgain, Message: secret, Err: errors.New(secret)}, 503, `{"status":"busy","message":"busy, retry shortly"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			e.force.Store(&o)
			w := e.buy("u1", "a1")
			require.Equal(t, c.code, w.Code)
			require.JSONEq(t, c.body, w.Body.String())
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
			require.Equal(t, c.retry, w.Header().Get("Retry-After"))
			require.NotContains(t, w.Body.String(), "10.0.0.1")
			if c.code >= 400 && c.o.Reason != checkout.Released {
				// Every refusal decodes as the one error type of the
				// library's HTTP APIs, nothing left over.
				var e admin.ErrorAnswer
				dec := json.NewDecoder(strings.NewReader(w.Body.String()))
				dec.DisallowUnknownFields()
				require.NoError(t, dec.Decode(&e))
				require.JSONEq(t, c.body, mustJSON(t, e))
			}
			require.Equal(t, c.code, checkouthttp.Status(c.o))
			h := e.lastHeard()
			require.Equal(t, c.code, h.code)
			require.Equal(t, c.o.Kind, h.o.Kind)
			require.Equal(t, "force", h.o.Step)
		})
	}
	e.force.Store(nil)
	require.Contains(t, e.log.String(), secret, "a Busy outcome's error goes to the log")
	require.Zero(t, e.queue.len(), "the forced outcomes reserved nothing")
}

// TestBuyAcceptedReplayedSettledPaid walks one attempt through the real
// composition: accepted, replayed while queued (its message handed on
// again), replayed once the order exists, and paid.
func TestBuyAcceptedReplayedSettledPaid(t *testing.T) {
	e := newEnv(t, 10)
	id := resv(t, "u1", "a1")
	w := e.buy("u1", "a1")
	require.Equal(t, http.StatusAccepted, w.Code)
	require.JSONEq(t, `{"status":"queued","reservation":"`+id+`"}`, w.Body.String())
	require.Equal(t, checkout.Accepted, e.lastHeard().o.Kind)
	require.Equal(t, 1, e.queue.len())

	w = e.buy("u1", "a1")
	require.Equal(t, http.StatusAccepted, w.Code)
	require.JSONEq(t, `{"status":"queued","reservation":"`+id+`"}`, w.Body.String())
	require.Equal(t, checkout.Replayed, e.lastHeard().o.Kind)
	require.Equal(t, 2, e.queue.len(), "the replay handed the message on again")

	e.drain()
	no := e.orderNo(id)
	w = e.buy("u1", "a1")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"created","reservation":"`+id+`","order_no":"`+no+`"}`, w.Body.String())

	require.NoError(t, e.db.Model(&order.Order{}).Where("order_no = ?", no).Update("status", order.OrderPaid).Error)
	w = e.buy("u1", "a1")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"paid","reservation":"`+id+`","order_no":"`+no+`"}`, w.Body.String())
	held, err := e.stock.Held(t.Context(), sale, "u1")
	require.NoError(t, err)
	require.EqualValues(t, 1, held, "one unit for every retry")
}

// countingBody counts the reads of a request body.
type countingBody struct {
	io.ReadCloser
	reads int
}

func (c *countingBody) Read(p []byte) (int, error) { c.reads++; return c.ReadCloser.Read(p) }

// TestSoldOutBuyerRefusedWithoutReadingBody: once the sale is sold out, a
// buyer none of whose attempts won is refused 409 sold_out before a byte
// of the body is read; the winner's retry still reads its body and gets its
// reservation back.
func TestSoldOutBuyerRefusedWithoutReadingBody(t *testing.T) {
	e := newEnv(t, 1)
	require.Equal(t, http.StatusAccepted, e.buy("winner", "a1").Code)
	w := e.buy("loser", "a1") // Redis answers sold out: the in-process flag is set
	require.Equal(t, http.StatusConflict, w.Code)
	require.JSONEq(t, `{"status":"sold_out","message":"sold out"}`, w.Body.String())
	require.True(t, e.stock.SoldOut(sale))

	r := request(http.MethodPost, "/buy/"+goodSig, "late", `{"token":"","captcha_id":"","captcha":"","request_id":"a1"}`)
	body := &countingBody{ReadCloser: r.Body}
	r.Body = body
	w = e.serve(r)
	require.Equal(t, http.StatusConflict, w.Code)
	require.JSONEq(t, `{"status":"sold_out","message":"sold out"}`, w.Body.String())
	require.Zero(t, body.reads, "the body was read")
	h := e.lastHeard()
	require.Equal(t, checkout.StepSoldOut, h.o.Step)
	require.Equal(t, http.StatusConflict, h.code)

	r = request(http.MethodPost, "/buy/"+goodSig, "winner", `{"token":"","captcha_id":"","captcha":"","request_id":"a1"}`)
	body = &countingBody{ReadCloser: r.Body}
	r.Body = body
	w = e.serve(r)
	require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
	require.JSONEq(t, `{"status":"queued","reservation":"`+resv(t, "winner", "a1")+`"}`, w.Body.String())
	require.NotZero(t, body.reads)
}

// TestHandoffFailedThenReleased: neither Kafka nor the outbox takes the
// order: 503 retry, the reservation released through the fence; the retry
// of that attempt answers 409 failed/released; nothing internal leaks.
func TestHandoffFailedThenReleased(t *testing.T) {
	e := newEnv(t, 10)
	e.queue.setDown(true)
	w := e.buy("u1", "a1")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.JSONEq(t, `{"status":"retry","message":"could not place the order, please retry"}`, w.Body.String())
	held, err := e.stock.Held(t.Context(), sale, "u1")
	require.NoError(t, err)
	require.Zero(t, held)

	e.queue.setDown(false)
	w = e.buy("u1", "a1")
	require.Equal(t, http.StatusConflict, w.Code)
	require.JSONEq(t, `{"status":"failed","reservation":"`+resv(t, "u1", "a1")+`","reason":"released"}`, w.Body.String())
	require.NotContains(t, w.Body.String(), "10.0.0")
}

// TestRedisFailureIsBusy: a Redis error answers 503 busy with the generic
// message; the error text goes to the log only.
func TestRedisFailureIsBusy(t *testing.T) {
	e := newEnv(t, 10)
	e.mr.SetError("ERR internal-secret-text")
	w := e.buy("u1", "a1")
	e.mr.SetError("")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.JSONEq(t, `{"status":"busy","message":"busy, retry shortly"}`, w.Body.String())
	require.Equal(t, checkout.Busy, e.lastHeard().o.Kind)
	require.Contains(t, e.log.String(), "internal-secret-text")

	// A result read that fails: Redis and the database gone.
	e.mr.SetError("ERR internal-secret-text")
	sqlDB, err := e.db.DB()
	require.NoError(t, err)
	require.NoError(t, sqlDB.Close())
	w = e.get("/result/"+resv(t, "u1", "a1"), "u1")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.JSONEq(t, `{"status":"busy","message":"busy, retry shortly"}`, w.Body.String())
	require.Contains(t, e.log.String(), "result read failed")
}

// TestBuyRequestRules: the transport's refusals, and the body rules of the
// reference deployment (an unknown field named, capped and escaped).
func TestBuyRequestRules(t *testing.T) {
	e := newEnv(t, 10)
	long := strings.Repeat("x", 40) + `\u2028\"<` // JSON escapes: the name is 40 x, U+2028, a quote and <
	cases := []struct {
		name        string
		method, sig string
		user, ctype string
		body        string
		code        int
		want        string
	}{
		{"get", http.MethodGet, goodSig, "u1", "", "", 405, `{"status":"bad_request","message":"method not allowed"}`},
		{"text body", http.MethodPost, goodSig, "u1", "text/plain", `{}`, 415, `{"status":"bad_request","message":"the body must be application/json"}`},
		{"not signed in", http.MethodPost, goodSig, "", "application/json", `{}`, 401, `{"status":"unauthorized","message":"sign in first"}`},
		{"unknown field", http.MethodPost, goodSig, "u1", "application/json", `{"token":"","user":"u2"}`, 400,
			`{"status":"bad_request","message":"bad body: unknown field \"user\""}`},
		{"unknown long field", http.MethodPost, goodSig, "u1", "application/json; charset=utf-8", `{"` + long + `":1}`, 400,
			`{"status":"bad_request","message":"bad body: unknown field \"` + strings.Repeat("x", 32) + `\"..."}`},
		{"unknown escaped field", http.MethodPost, goodSig, "u1", "application/json", `{"a\u2028\"<b":1}`, 400,
			`{"status":"bad_request","message":"bad body: unknown field \"a\\u2028\\\"\u003cb\""}`},
		{"wrong type", http.MethodPost, goodSig, "u1", "application/json", `{"request_id":7}`, 400,
			`{"status":"bad_request","message":"bad body: wrong type for field \"request_id\": want a string, got \"number\""}`},
		{"not JSON", http.MethodPost, goodSig, "u1", "application/json", `{"token":`, 400,
			`{"status":"bad_request","message":"bad body: not JSON (the body ends too soon)"}`},
		{"empty", http.MethodPost, goodSig, "u1", "", ``, 400, `{"status":"bad_request","message":"bad body: empty body"}`},
		{"too large", http.MethodPost, goodSig, "u1", "application/json", `{"token":"` + strings.Repeat("t", 4100) + `"}`, 413,
			`{"status":"bad_request","message":"bad body: body too large (at most 4096 bytes)"}`},
		{"bad request_id", http.MethodPost, goodSig, "u1", "application/json", `{"request_id":"no spaces"}`, 400,
			`{"status":"bad_request","message":"request_id: 1-40 of [A-Za-z0-9_-]"}`},
		{"bad link", http.MethodPost, "forged", "u1", "application/json", `{"request_id":"a1"}`, 403,
			`{"status":"token","message":"invalid buy link"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := request(c.method, "/buy/"+c.sig, c.user, c.body)
			r.Header.Del("Content-Type")
			if c.ctype != "" {
				r.Header.Set("Content-Type", c.ctype)
			}
			w := e.serve(r)
			require.Equal(t, c.code, w.Code, w.Body.String())
			require.JSONEq(t, c.want, w.Body.String())
		})
	}
	require.Zero(t, e.queue.len(), "nothing was reserved")
	held, err := e.stock.Held(t.Context(), sale, "u1")
	require.NoError(t, err)
	require.Zero(t, held)
}

// TestResultOwnerOnly: a buyer reads its own result; another buyer reading
// the same reservation gets exactly what an unknown reservation reads.
func TestResultOwnerOnly(t *testing.T) {
	e := newEnv(t, 10)
	id := resv(t, "u1", "a1")
	require.Equal(t, http.StatusAccepted, e.buy("u1", "a1").Code)
	unknown := e.get("/result/"+resv(t, "u2", "never"), "u2")
	require.Equal(t, http.StatusOK, unknown.Code)
	require.JSONEq(t, `{"status":"unknown"}`, unknown.Body.String())

	w := e.get("/result/"+id, "u1")
	require.JSONEq(t, `{"status":"queued","reservation":"`+id+`"}`, w.Body.String())
	w = e.get("/result/"+id, "u2")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, unknown.Body.String(), w.Body.String())

	e.drain()
	no := e.orderNo(id)
	w = e.get("/result/"+id, "u1")
	require.JSONEq(t, `{"status":"created","reservation":"`+id+`","order_no":"`+no+`"}`, w.Body.String())
	w = e.get("/result/"+id, "u2")
	require.Equal(t, unknown.Body.String(), w.Body.String())
	require.NotContains(t, w.Body.String(), no)

	require.Equal(t, http.StatusUnauthorized, e.get("/result/"+id, "").Code)
	require.JSONEq(t, `{"status":"unknown"}`, e.get("/result/not%20an%20id", "u1").Body.String())
}

// TestStreamEndsAtFinalStatus: the owner's stream says queued, then, once
// the order is written, created, and ends by itself.
func TestStreamEndsAtFinalStatus(t *testing.T) {
	e := newEnv(t, 10)
	id := resv(t, "u1", "a1")
	require.Equal(t, http.StatusAccepted, e.buy("u1", "a1").Code)
	s := e.openStream("/events/"+id, "u1")
	k := e.waiting() // the first event is out
	e.drain()
	k.tick(t)
	s.end(t)
	require.Equal(t, http.StatusOK, s.w.Code)
	require.Equal(t, "text/event-stream", s.w.Header().Get("Content-Type"))
	no := e.orderNo(id)
	ev := s.events(t)
	require.Len(t, ev, 2)
	require.JSONEq(t, `{"status":"queued","reservation":"`+id+`"}`, ev[0])
	require.JSONEq(t, `{"status":"created","reservation":"`+id+`","order_no":"`+no+`"}`, ev[1])
	require.True(t, k.stopped.Load(), "the ticker was stopped")

	// A stream of a settled result answers once and ends, with no ticker.
	s = e.openStream("/events/"+id, "u1")
	s.end(t)
	require.Len(t, s.events(t), 1)
	require.Empty(t, e.tickers)
}

// TestStreamOwnerOnly (the reference deployment's N1): a stream on another
// buyer's reservation says unknown and nothing else, before and after the
// order is written, until its request ends.
func TestStreamOwnerOnly(t *testing.T) {
	e := newEnv(t, 10)
	id := resv(t, "u1", "a1")
	require.Equal(t, http.StatusAccepted, e.buy("u1", "a1").Code)
	s := e.openStream("/events/"+id, "u2")
	k := e.waiting()
	k.tick(t) // a read while the order is queued
	e.drain()
	k.tick(t) // a read after the order is written
	k.tick(t) // … and the stream is back waiting: that read is done
	s.cancel()
	s.end(t)
	require.True(t, k.stopped.Load())
	ev := s.events(t)
	require.Equal(t, []string{`{"status":"unknown"}`}, ev)
	require.NotContains(t, s.w.Body.String(), e.orderNo(id))
	require.NotContains(t, s.w.Body.String(), id)
}

// TestStreamCap: a buyer holds at most the cap of streams at once (429
// limited beyond); another buyer is not affected; a stream whose request
// ends gives its slot back.
func TestStreamCap(t *testing.T) {
	e := newEnv(t, 10, checkouthttp.WithMaxStreams(2))
	path := "/events/" + resv(t, "u1", "a1")
	var open []*stream
	for range 2 {
		open = append(open, e.openStream(path, "u1"))
		e.waiting()
	}
	w := e.get(path, "u1")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.JSONEq(t, `{"status":"limited","message":"too many open result streams"}`, w.Body.String())

	open = append(open, e.openStream(path, "u2"))
	e.waiting()

	open[0].cancel()
	open[0].end(t)
	open = append(open, e.openStream(path, "u1"))
	e.waiting()
	require.Equal(t, http.StatusTooManyRequests, e.get(path, "u1").Code)
	for _, s := range open {
		s.cancel()
		s.end(t)
	}
	open = append(open[:0], e.openStream(path, "u1"), e.openStream(path, "u1"))
	e.waiting()
	e.waiting()
	for _, s := range open {
		s.cancel()
		s.end(t)
	}
}

// TestNew: what New refuses.
func TestNew(t *testing.T) {
	e := newEnv(t, 1)
	user := func(*http.Request) (string, bool) { return "", false }
	link := checkouthttp.WithLink(func(r *http.Request) string { return r.PathValue("sig") })
	for name, f := range map[string]func() (*checkouthttp.Handler, error){
		"nil checkout": func() (*checkouthttp.Handler, error) { return checkouthttp.New(nil, user, link) },
		"nil user":     func() (*checkouthttp.Handler, error) { return checkouthttp.New(e.co, nil, link) },
		"no link":      func() (*checkouthttp.Handler, error) { return checkouthttp.New(e.co, user) },
		"nil link":     func() (*checkouthttp.Handler, error) { return checkouthttp.New(e.co, user, checkouthttp.WithLink(nil)) },
		"zero poll": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithPollInterval(0))
		},
		"zero streams": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithMaxStreams(0))
		},
		"nil logger": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithLogger(nil))
		},
		"nil ticker": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithTicker(nil))
		},
		"nil hook": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithOnOutcome(nil))
		},
		"nil ip": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithIP(nil))
		},
		"nil device": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithDevice(nil))
		},
		"nil resv": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithReservation(nil))
		},
		"nil order fn": func() (*checkouthttp.Handler, error) {
			return checkouthttp.New(e.co, user, link, checkouthttp.WithOrderStatus(nil))
		},
	} {
		_, err := f()
		require.ErrorIs(t, err, checkout.ErrInvalidConfig, name)
	}
	h, err := checkouthttp.New(e.co, user, link, nil)
	require.NoError(t, err)
	require.NotNil(t, h)
	var v map[string]string
	require.NoError(t, json.Unmarshal(e.get("/result/x", "").Body.Bytes(), &v))
	require.Equal(t, "unauthorized", v["status"])
}

// mustJSON encodes v.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestBuyVariant: the body's "variant" buys that variant: the answers name
// it, the retry gets the same reservation, the settled answer and the
// result read carry the order's line; another variant under the same
// request ID is another reservation (the sale's cap 1 refuses it); an
// unknown or malformed variant is 400 bad_request.
func TestBuyVariant(t *testing.T) {
	e := newEnvVariants(t, 0, []stock.Variant{{ID: "M", Stock: 2}, {ID: "L", Stock: 1}})
	buy := func(user, id, variant string) *httptest.ResponseRecorder {
		return e.serve(request(http.MethodPost, "/buy/ok", user, `{"request_id":"`+id+`","variant":"`+variant+`"}`))
	}
	id := resv(t, "u1", "a1") + "/M"
	w := buy("u1", "a1", "M")
	require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
	require.JSONEq(t, `{"status":"queued","reservation":"`+id+`","variant":"M"}`, w.Body.String())
	w = buy("u1", "a1", "M")
	require.Equal(t, http.StatusAccepted, w.Code)
	require.JSONEq(t, `{"status":"queued","reservation":"`+id+`","variant":"M"}`, w.Body.String())
	require.Equal(t, checkout.Replayed, e.lastHeard().o.Kind)

	w = e.get("/result/"+url.PathEscape(id), "u1")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"queued","reservation":"`+id+`","variant":"M","lines":[{"activity":"sale1/M","qty":1}]}`, w.Body.String())

	e.drain()
	no := e.orderNo(id)
	w = buy("u1", "a1", "M")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"created","reservation":"`+id+`","order_no":"`+no+`","variant":"M","lines":[{"activity":"sale1/M","qty":1,"price":990}]}`,
		w.Body.String())
	w = e.get("/result/"+url.PathEscape(id), "u1")
	require.JSONEq(t, `{"status":"created","reservation":"`+id+`","order_no":"`+no+`","variant":"M","lines":[{"activity":"sale1/M","qty":1,"price":990}]}`,
		w.Body.String())
	require.JSONEq(t, `{"status":"unknown"}`, e.get("/result/"+url.PathEscape(id), "u2").Body.String())

	w = buy("u1", "a1", "L")
	require.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	require.Equal(t, checkout.AlreadyBought, e.lastHeard().o.Reason)

	for _, v := range []string{"XL", "a b", "a/b"} {
		w = buy("u2", "b-"+strings.ReplaceAll(strings.ReplaceAll(v, " ", ""), "/", ""), v)
		require.Equal(t, http.StatusBadRequest, w.Code, "%q: %s", v, w.Body.String())
		var ans admin.ErrorAnswer
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ans))
		require.Equal(t, "bad_request", ans.Status, v)
	}
	held, err := e.stock.Held(t.Context(), stock.VariantOf(sale, "M"), "u1")
	require.NoError(t, err)
	require.EqualValues(t, 1, held)
}
