package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// The buy chain: POST /api/buy/{activity}/{sig} runs buyChain's steps in
// order, cheapest refusals first, through one loop (handleBuy) that applies
// the Redis breaker to the steps that call Redis, counts each refusal by
// its step, and undoes what earlier steps took (the access token, the
// reservation) when a later one refuses or fails. The README's flow
// diagram is generated from this list (TestFlowDiagramMatchesChain).
//
// The sold-out flag and the global bucket come before the Redis-backed risk
// rules so the 99 % of losers cost no Redis round trip once the stock is
// gone; they reveal nothing the activity endpoint doesn't already show. The
// captcha is checked before the access token is consumed so a typo doesn't
// burn the user's token.

// buyStep is one link of the chain: every step has the same signature.
type buyStep struct {
	name string // the stage: seckill_refusals_total{stage}, the diagram
	io   string // what it costs: "no I/O", "Redis", "Kafka → DB"
	does string // one line for the diagram
	// guarded steps run inside the Redis breaker: a failure they return
	// counts against Redis, and an open breaker answers "busy" without
	// running them.
	guarded bool
	run     func(ctx context.Context, b *buy) verdict
	// undo gives back what the step took, when a later step refuses or
	// fails with verdict.undo. nil: the step takes nothing.
	undo func(ctx context.Context, b *buy)
}

// buy is one buy request travelling down the chain.
type buy struct {
	w      http.ResponseWriter
	r      *http.Request
	at     time.Time // when the request reached the chain (one clock read for all steps)
	user   string
	req    buyRequest
	parsed bool   // req was read by the sold-out step
	resv   string // the reservation ID: the client's attempt, or made by reserve
	qty    int64  // what the replayed reservation holds
	found  bool   // replay: the attempt's reservation exists
	took   []int  // the steps that took something, in order (for undo)
	// released: the hand-off already released the reservation (the
	// submitter's fence), so the reserve step's undo has nothing to do.
	released bool
}

// verdict is a step's answer; the zero verdict means "go on".
type verdict struct {
	outcome string // the buy's outcome (seckill_buy_outcomes_total); "" = go on
	code    int    // the HTTP status
	status  string // a refusal: its machine status and message,
	msg     string
	body    any   // or a whole answer, written as JSON,
	err     error // or an infrastructure failure: 503 busy, logged
	undo    bool  // give back what earlier steps took
	// retryAfter, if set, is sent as the Retry-After header (seconds).
	retryAfter string
}

func (v verdict) done() bool { return v.outcome != "" || v.err != nil }

// refusal is a denial in the API's error shape; it is also the outcome.
func refusal(code int, status, msg string) verdict {
	return verdict{outcome: status, code: code, status: status, msg: msg}
}

// failure is an infrastructure failure.
func failure(err error) verdict { return verdict{outcome: "busy", err: err} }

// answer is a whole answer that ends the chain.
func answer(outcome string, code int, body any) verdict {
	return verdict{outcome: outcome, code: code, body: body}
}

// buyChain lists the steps in the order they run.
func (a *App) buyChain() []buyStep {
	return []buyStep{
		{name: "activity", io: "no I/O", does: "the path names this node's sale", run: a.stepActivity},
		{name: "window", io: "no I/O", does: "the sale is open by this node's clock", run: a.stepWindow},
		{name: "soldout", io: "no I/O", does: "in-process sold-out flag (stock.Deductor.SoldOut); a retry that won passes", run: a.stepSoldOut},
		{name: "global", io: "no I/O", does: "this node's global bucket (limiter.TokenBucket)", run: a.stepGlobal},
		{name: "body", io: "no I/O", does: "JSON body; shape of access token, captcha ID, request ID", run: a.stepBody},
		{name: "risk", io: "Redis", does: "blacklist, behaviour, device (risk.Checker)", guarded: true, run: a.stepRisk},
		{name: "user_limit", io: "Redis", does: "per-user window (limiter; its own local fallback, no breaker)", run: a.stepUserLimit},
		{name: "replay", io: "Redis", does: "a retried attempt gets its reservation back (stock ledger)", guarded: true, run: a.stepLookup},
		{name: "resubmit", io: "DB|Kafka", does: "… answered from the DB, or its message handed on again", run: a.stepResubmit},
		{name: "path", io: "no I/O", does: "signed buy path (token.Signer.Verify, HMAC)", run: a.stepPath},
		{name: "captcha", io: "Redis", does: "captcha, verified once (captcha.Store)", guarded: true, run: a.stepCaptcha},
		{name: "access_token", io: "Redis", does: "access token, consumed once (token.Pool.Consume)", guarded: true, run: a.stepToken, undo: a.undoToken},
		{name: "reserve", io: "Redis", does: "stock.Reserve: one Lua call (DB pool when Redis is out)", guarded: true, run: a.stepReserve, undo: a.undoReserve},
		{name: "submit", io: "Kafka|DB", does: "order.Submitter: Kafka, else outbox, else release", run: a.stepSubmit},
	}
}

// handleBuy runs the buy chain: the one loop of the chain's policies.
func (a *App) handleBuy(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := r.Context()
	b := &buy{w: w, r: r, at: start}
	b.user, _ = userOf(r)
	v := verdict{}
	var at int
	for i := range a.buy {
		s := &a.buy[i]
		v = a.runStep(ctx, s, b)
		if v.done() {
			at = i
			break
		}
		if s.undo != nil {
			b.took = append(b.took, i)
		}
	}
	if !v.done() { // every step passed: accepted
		v = answer("queued", http.StatusAccepted, map[string]string{"status": "queued", "reservation": b.resv})
	}
	if v.undo {
		for i := len(b.took) - 1; i >= 0; i-- {
			a.buy[b.took[i]].undo(context.WithoutCancel(ctx), b)
		}
	}
	a.answerStep(b.w, b.r, a.buy[at].name, v)
	a.m.buyOutcomes.WithLabelValues(v.outcome).Inc()
	a.m.buyLatency.Observe(time.Since(start).Seconds())
}

// runStep runs s, inside the Redis breaker when s is guarded.
func (a *App) runStep(ctx context.Context, s *buyStep, b *buy) verdict {
	if !s.guarded {
		return s.run(ctx, b)
	}
	var v verdict
	err := a.p.brRedis.Execute(ctx, func(ctx context.Context) error {
		v = s.run(ctx, b)
		return v.err
	})
	if err != nil && v.err == nil { // the breaker refused: the step never ran
		v = failure(err)
	}
	return v
}

// answerStep writes a chain's answer (the buy chain's, the token chain's)
// and counts a refusal by its stage.
func (a *App) answerStep(w http.ResponseWriter, r *http.Request, stage string, v verdict) {
	if v.retryAfter != "" {
		w.Header().Set("Retry-After", v.retryAfter)
	}
	switch {
	case v.err != nil:
		a.fail(w, r, stage, v.err)
	case v.body != nil:
		writeJSON(w, v.code, v.body)
	default:
		a.refuse(w, r, stage, v.code, v.status, v.msg)
	}
}

// ---- the steps, in chain order ----

func (a *App) stepActivity(_ context.Context, b *buy) verdict {
	if b.r.PathValue("activity") != a.sale.key {
		return refusal(http.StatusNotFound, "token", "unknown activity")
	}
	return verdict{}
}

func (a *App) stepWindow(_ context.Context, b *buy) verdict {
	now := b.at.Add(a.cfg.ClockSkew) // -clock-skew (tests), as a.now()
	switch {
	case now.Before(a.sale.act.StartTime):
		return refusal(http.StatusTooEarly, "not_started", "the sale has not started")
	case !now.Before(a.sale.act.EndTime):
		return refusal(http.StatusGone, "ended", "the sale has ended")
	}
	return verdict{}
}

// stepSoldOut refuses in-process once the stock is gone, unless the request
// is the retry of an attempt whose request ID won a unit before the sale
// sold out: that one goes on and gets its reservation back
// (stock.SoldOutFor knows the winners; no I/O either way). A buyer none of
// whose attempts is in the ledger (SoldOutForPrefix over the buyer's
// reservation-ID prefix: nearly every buyer of a sold-out sale) is refused
// before the body is read at all: reading it cost each refusal the parse
// and net/http's background read of the connection.
func (a *App) stepSoldOut(_ context.Context, b *buy) verdict {
	if !a.p.stock.SoldOut(a.sale.act.ID) || !a.poolSoldOut() {
		return verdict{}
	}
	if a.p.stock.SoldOutForPrefix(a.sale.act.ID, clientReservationPrefix(b.user)) {
		a.m.reserve.WithLabelValues("sold_out_local").Inc()
		return refusal(http.StatusConflict, "sold_out", "sold out")
	}
	err := readBuyRequest(b.r, &b.req)
	resv, ok := checkedReservationID(b.user, b.req.RequestID)
	if err != nil || !ok || a.p.stock.SoldOutFor(a.sale.act.ID, resv) {
		a.m.reserve.WithLabelValues("sold_out_local").Inc()
		return refusal(http.StatusConflict, "sold_out", "sold out")
	}
	b.parsed = true
	return verdict{}
}

func (a *App) stepGlobal(_ context.Context, _ *buy) verdict {
	if !a.p.global.Allow() {
		a.m.limited.WithLabelValues("global").Inc()
		return refusal(http.StatusTooManyRequests, "limited", "too many requests, retry shortly")
	}
	return verdict{}
}

// stepBody reads the body and checks shapes, no I/O: a missing or
// malformed access token or captcha ID can never pass, so it costs no Redis
// round trip.
func (a *App) stepBody(_ context.Context, b *buy) verdict {
	if !b.parsed {
		if err := readBuyRequest(b.r, &b.req); err != nil {
			// What is wrong, with at most a short, escaped piece of the
			// input (badBody); counted as the refusal would be.
			a.m.refused.WithLabelValues("body").Inc()
			return answer("bad_request", http.StatusBadRequest, badBody("bad body", err))
		}
	}
	switch {
	case !token.ValidPoolToken(b.req.Token):
		return refusal(http.StatusForbidden, "token", "no valid access token")
	case !captcha.ValidID(b.req.CaptchaID) || b.req.Captcha == "":
		return refusal(http.StatusBadRequest, "captcha", "captcha missing")
	case b.req.RequestID == "":
		return verdict{}
	}
	resv, ok := checkedReservationID(b.user, b.req.RequestID)
	if !ok {
		return refusal(http.StatusBadRequest, "bad_request", requestIDRule)
	}
	b.resv = resv
	return verdict{}
}

// stepRisk: blacklist, behaviour, device. A Challenge decision is satisfied
// by the captcha every buy carries.
func (a *App) stepRisk(ctx context.Context, b *buy) verdict {
	dec, err := a.p.checker.Check(ctx, risk.Subject{UserID: b.user, IP: a.p.ips.ClientIP(b.r), DeviceID: b.r.Header.Get("X-Device-ID")})
	switch {
	case err != nil:
		return failure(err)
	case dec.Action != risk.Deny:
		return verdict{}
	case dec.Throttled:
		return refusal(http.StatusTooManyRequests, "limited", "too many attempts ("+dec.Reason+")")
	}
	return refusal(http.StatusForbidden, "denied", "refused by risk control ("+dec.Reason+")")
}

// stepUserLimit: the per-user window's own failure policy (FallbackLocal)
// decides a Redis outage, so the step is not guarded (allowUser).
func (a *App) stepUserLimit(ctx context.Context, b *buy) verdict {
	lr, err := a.p.perUser.AllowN(ctx, b.user, 1)
	if err != nil {
		return failure(err)
	}
	if lr.Degraded {
		a.m.limited.WithLabelValues("user_fallback").Inc()
	}
	if !lr.Allowed {
		a.m.limited.WithLabelValues("user").Inc()
		v := refusal(http.StatusTooManyRequests, "limited", "too many attempts, slow down")
		v.retryAfter = strconv.Itoa(int(lr.RetryAfter.Seconds()) + 1)
		return v
	}
	return verdict{}
}

// stepLookup: a retry of an attempt that reserved gets its reservation, not
// a second one (before the one-time path, captcha and token, which the
// attempt spent). A reservation that was released answers failed, and the
// access token is given back: the buyer holds nothing and may start a new
// attempt. An unknown reservation (a first attempt, or one that never
// reached Reserve) goes on down the chain — unless the ledger is frozen
// for a rebuild, when absence proves nothing (503 busy).
func (a *App) stepLookup(ctx context.Context, b *buy) verdict {
	if b.resv == "" {
		return verdict{}
	}
	rec, found, err := a.lookupReservation(ctx, b.resv)
	switch {
	case errors.Is(err, stock.ErrFrozen):
		// Redis lost the sale's state and it is being rebuilt: this
		// attempt's reservation may be in flight to an order, so no later
		// step may refuse it for good. The buyer retries shortly.
		return refusal(http.StatusServiceUnavailable, "busy", "the sale is paused for a moment, retry shortly")
	case err != nil:
		return failure(err)
	case !found:
		return verdict{}
	case rec.User != "" && rec.User != b.user:
		// Another buyer's reservation under this attempt's ID (IDs are one
		// to one, so only a bug or a hand-made entry gets here): never
		// this buyer's to replay or to order.
		a.logger(ctx).Error("attempt ID names another buyer's reservation", "reservation", b.resv)
		return refusal(http.StatusConflict, "bad_request", "request_id already used")
	case rec.State != stock.Held:
		a.restoreToken(ctx, b.user, b.req.Token)
		return answer("failed", http.StatusConflict, map[string]string{"status": "failed", "reservation": b.resv, "reason": "released"})
	}
	b.found, b.qty = true, rec.Qty
	return verdict{}
}

// stepResubmit answers a found reservation with its result when the
// database has one, else hands its message on again (the consumer settles
// duplicates by reservation ID) and answers queued.
func (a *App) stepResubmit(ctx context.Context, b *buy) verdict {
	if !b.found {
		return verdict{}
	}
	res, err := a.p.results.Reservation(ctx, order.ResultQuery{Activity: a.sale.act.ID, User: b.user, ReservationID: b.resv})
	if err != nil {
		return failure(err)
	}
	if res.Status == order.StatusSuccess || res.Status == order.StatusFailed {
		return answer("replayed", http.StatusOK, a.view(ctx, res))
	}
	if err := a.p.submit(ctx, a.message(b, b.qty)); err != nil {
		a.logger(ctx).Warn("resubmit failed", "reservation", b.resv, "err", err)
		return refusal(http.StatusServiceUnavailable, "retry", "could not place the order, please retry")
	}
	return answer("queued", http.StatusAccepted, map[string]string{"status": "queued", "reservation": b.resv})
}

func (a *App) stepPath(ctx context.Context, b *buy) verdict {
	if _, err := a.p.signer.Verify(ctx, token.VerifyParams{Token: b.r.PathValue("sig"), Activity: a.sale.key, User: b.user}); err != nil {
		return refusal(http.StatusForbidden, "token", "invalid buy link")
	}
	return verdict{}
}

func (a *App) stepCaptcha(ctx context.Context, b *buy) verdict {
	ok, err := a.p.captcha.Verify(ctx, captcha.VerifyParams{ID: b.req.CaptchaID, Answer: b.req.Captcha, User: b.user})
	switch {
	case err != nil:
		return failure(err)
	case !ok:
		return refusal(http.StatusBadRequest, "captcha", "wrong or expired captcha")
	}
	return verdict{}
}

// stepToken consumes the access token. One spent by an earlier attempt
// passes when that attempt left the buyer holding nothing (it crashed or
// lost its answer before Reserve, or its reservation was released): the
// per-user limit in stock, not the token, stops a second unit.
func (a *App) stepToken(ctx context.Context, b *buy) verdict {
	err := a.p.pool.Consume(ctx, token.ConsumeParams{Activity: a.sale.key, User: b.user, Token: b.req.Token})
	switch {
	case err == nil:
		return verdict{}
	case errors.Is(err, token.ErrUsed):
		held, err := a.held(ctx, b.user)
		switch {
		case err != nil:
			return failure(err)
		case held > 0:
			return refusal(http.StatusConflict, "already_bought", "access token already used")
		}
		return verdict{}
	case errors.Is(err, token.ErrRefused):
		// One fixed answer for every refusal (not found, another user's,
		// expired, malformed): the reason goes to the log only.
		a.logger(ctx).Debug("access token refused", "user", b.user, "err", err)
		return refusal(http.StatusForbidden, "token", msgInvalidToken)
	}
	return failure(err)
}

// msgInvalidToken is the message of every refused access token at the buy.
const msgInvalidToken = "invalid access token"

// undoToken gives the access token back (restoreToken).
func (a *App) undoToken(ctx context.Context, b *buy) { a.restoreToken(ctx, b.user, b.req.Token) }

// stepReserve is the one Lua call; the reservation ID travels with the
// order. A refusal that is not the buyer's final answer (Redis or its clock
// not ready, a frozen or paused sale, an outage with the DB pool empty)
// gives the access token back, so the retry is possible.
func (a *App) stepReserve(ctx context.Context, b *buy) verdict {
	if b.resv == "" {
		b.resv = a.newReservationID()
	}
	req := stock.Request{Activity: a.sale.act.ID, User: b.user, Qty: 1, ReservationID: b.resv}
	res, err := a.p.stock.Reserve(ctx, req)
	if err == nil {
		res, err = a.reserveFromPool(ctx, req, res)
	}
	if err != nil {
		a.m.reserve.WithLabelValues("error").Inc()
		v := failure(err)
		v.undo = true
		return v
	}
	a.m.reserve.WithLabelValues(res.Status.String()).Inc()
	retry := func(code int, status, msg string) verdict {
		v := refusal(code, status, msg)
		v.undo = true
		return v
	}
	switch res.Status {
	case stock.Reserved:
		return verdict{}
	case stock.SoldOut:
		if res.Fallback { // Redis is out and the DB pool is empty: Redis may have units left
			return retry(http.StatusServiceUnavailable, "busy", "the sale is paused for a moment, retry shortly")
		}
		return refusal(http.StatusConflict, "sold_out", "sold out")
	case stock.LimitReached:
		return refusal(http.StatusConflict, "already_bought", "one per person")
	case stock.NotStarted, stock.NotLoaded: // Redis's clock says "not yet" where ours said "open"
		return retry(http.StatusTooEarly, "not_started", "the sale has not started")
	case stock.Ended:
		return refusal(http.StatusGone, "ended", "the sale has ended")
	case stock.Frozen: // Redis lost the sale's state and it is being rebuilt from the DB
		return retry(http.StatusServiceUnavailable, "busy", "the sale is paused for a moment, retry shortly")
	case stock.Paused: // an operator paused the sale (admin API)
		v := retry(http.StatusServiceUnavailable, "paused", "the sale is paused, retry shortly")
		v.retryAfter = "5"
		return v
	}
	return refusal(http.StatusConflict, "sold_out", res.Status.String())
}

// undoReserve releases a reservation whose hand-off was refused: it must
// not outlive the refusal. (After ErrRetry the submitter has released it
// through the fence already.)
func (a *App) undoReserve(ctx context.Context, b *buy) {
	if b.released {
		return
	}
	if err := a.releaseUnits(ctx, a.sale.act.ID, b.resv); err != nil {
		a.logger(ctx).Warn("release after a refused hand-off failed; the reconciler will release it", "reservation", b.resv, "err", err)
	}
}

// stepSubmit hands the reservation to the order pipeline: Kafka, else the
// outbox, else (order.ErrRetry) a release through the fence.
func (a *App) stepSubmit(ctx context.Context, b *buy) verdict {
	err := a.p.submit(ctx, a.message(b, 1))
	switch {
	case err == nil:
		return verdict{}
	case errors.Is(err, order.ErrRetry):
		a.m.released.WithLabelValues("submit_failed").Inc()
		a.logger(ctx).Warn("submit failed, reservation released", "reservation", b.resv, "err", err)
		b.released = true
		v := refusal(http.StatusServiceUnavailable, "retry", "could not place the order, please retry")
		v.undo = true // the token: "please retry" must be possible
		return v
	}
	// Refused before Kafka or the outbox saw it: release, and fail.
	v := failure(err)
	v.undo = true
	return v
}

// message is the order message of b's reservation.
func (a *App) message(b *buy, qty int64) order.Message {
	return order.Message{MsgID: order.NewMsgID(), ReservationID: b.resv, ActivityID: a.sale.act.ID, UserID: b.user, Qty: qty,
		Price: int64(a.sale.act.ActivityPrice), CreatedAt: time.Now().UTC()}
}

// ---- request IDs ----

type buyRequest struct {
	Token     string `json:"token"`
	CaptchaID string `json:"captcha_id"`
	Captcha   string `json:"captcha"`
	// RequestID is the client's idempotency key for one purchase attempt
	// (1–40 of [A-Za-z0-9_-]), reused on every retry of that attempt: the
	// reservation ID is derived from it, so a retry after a lost answer
	// gets the same reservation back instead of a second one or a refusal.
	// Optional; without it every request is a new attempt.
	RequestID string `json:"request_id"`
}

// readBuyRequest reads a buy's body into req exactly as readJSON does
// (same answers, same errors or lack of them), without encoding/json's
// reflection for the body every client sends: one flat object of the four
// keys spelled as declared, whose values are strings of printable ASCII
// without escapes. Any other body (another spelling, an escape, a number,
// an unknown key, no Content-Length or more than maxBody) goes to
// readJSON's decoder over the same bytes. The sold-out step reads every
// refused buy's body, so this is the hottest decoding of the service.
func readBuyRequest(r *http.Request, req *buyRequest) error {
	n := r.ContentLength
	if n <= 0 || n > maxBody {
		return readJSON(r, req)
	}
	bp := bodyBufs.Get().(*[maxBody]byte)
	defer bodyBufs.Put(bp)
	buf := bp[:n]
	got := 0
	var rerr error
	for got < len(buf) && rerr == nil {
		var k int
		k, rerr = r.Body.Read(buf[got:])
		got += k
	}
	if got == len(buf) {
		// The decoder, too, takes a complete value before looking at a
		// read error, and never looks past the value's end.
		fast := *req
		if parseBuyRequest(string(buf), &fast) {
			*req = fast
			return nil
		}
	}
	// readJSON's decoder over the same stream: the bytes read, then what
	// the body has left (nothing: its Content-Length is read) or its error.
	rest := io.Reader(http.MaxBytesReader(nil, r.Body, maxBody-int64(got)))
	if rerr != nil {
		rest = errReader{rerr}
	}
	dec := json.NewDecoder(io.MultiReader(bytes.NewReader(buf[:got]), rest))
	dec.DisallowUnknownFields()
	return dec.Decode(req)
}

// bodyBufs holds the read buffers of readBuyRequest.
var bodyBufs = sync.Pool{New: func() any { return new([maxBody]byte) }}

// errReader returns err from every Read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// parseBuyRequest parses s when it is a buyRequest in the plain shape
// readBuyRequest describes (JSON whitespace allowed, anything after the
// closing brace ignored, as json.Decoder ignores it) and reports whether
// it was; req's fields are set as the keys come (the last one of a
// repeated key wins, as in encoding/json).
func parseBuyRequest(s string, req *buyRequest) bool {
	i := skipJSONSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i = skipJSONSpace(s, i+1)
	for {
		key, j, ok := plainJSONString(s, i)
		if !ok {
			return false
		}
		if i = skipJSONSpace(s, j); i >= len(s) || s[i] != ':' {
			return false
		}
		val, j, ok := plainJSONString(s, skipJSONSpace(s, i+1))
		if !ok {
			return false
		}
		switch key {
		case "token":
			req.Token = val
		case "captcha_id":
			req.CaptchaID = val
		case "captcha":
			req.Captcha = val
		case "request_id":
			req.RequestID = val
		default:
			return false
		}
		if i = skipJSONSpace(s, j); i >= len(s) {
			return false
		}
		switch s[i] {
		case ',':
			i = skipJSONSpace(s, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
}

// plainJSONString reads the JSON string starting at s[i] when it holds
// only printable ASCII and no escape (what encoding/json decodes to the
// same bytes); end is the index after its closing quote.
func plainJSONString(s string, i int) (v string, end int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipJSONSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func skipJSONSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// maxRequestIDLen bounds the client's request ID so that every attempt's
// reservation ID keeps the library's rule (stock.ValidReservationID): with
// a user ID of at most stock.MaxIDLen bytes, "u64." + user + "-" + request
// ID is at most 4+64+1+40 = 109 of stock.MaxReservationIDLen (128) bytes
// (TestClientReservationIDKeepsTheRule).
const maxRequestIDLen = 40

// requestIDRule is the refusal of a request ID checkedReservationID refuses.
var requestIDRule = "request_id: 1-" + strconv.Itoa(maxRequestIDLen) + " of [A-Za-z0-9_-] (the reservation ID u<len>.<user>-<request_id> is at most " +
	strconv.Itoa(stock.MaxReservationIDLen) + " bytes)"

// validRequestID reports whether id is a usable client idempotency key.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// clientReservationID is the reservation ID of a client's attempt,
// "u<len(user)>.<user>-<request ID>": the user is part of it, so one user's
// attempt can never name another's reservation, and it cannot collide with
// newReservationID's IDs. The length makes it one-to-one: user IDs and
// request IDs may both contain "-", and "u<user>-<request ID>" gave user
// "1" with request ID "2-x" the reservation of user "1-2" with request ID
// "x" (TestClientReservationIDsDoNotCollide).
func clientReservationID(user, requestID string) string {
	return clientReservationPrefix(user) + requestID
}

// checkedReservationID is clientReservationID of a request ID the buy
// accepts: false, before anything is reserved, when requestID is not a
// usable idempotency key or the reservation ID would break the library's
// rule (stock.ValidReservationID, which order applies too), so a buyer never
// holds a reservation that cannot become an order.
func checkedReservationID(user, requestID string) (string, bool) {
	if !validRequestID(requestID) {
		return "", false
	}
	resv := clientReservationID(user, requestID)
	return resv, stock.ValidReservationID(resv)
}

// clientReservationPrefix starts every reservation ID of user's attempts,
// and no other user's.
func clientReservationPrefix(user string) string {
	return "u" + strconv.Itoa(len(user)) + "." + user + "-"
}

var resvSeq atomic.Uint64

// newReservationID is unique across nodes: node tag + time + counter.
func (a *App) newReservationID() string {
	return "r" + a.p.nodeTag + strconv.FormatInt(time.Now().UnixMilli(), 36) + strconv.FormatUint(resvSeq.Add(1), 36)
}

// flowDiagram renders the chain as the README shows it: ⛨ marks a step the
// loop runs inside the Redis breaker.
func flowDiagram(steps []buyStep) string {
	var sb strings.Builder
	sb.WriteString("auth (risk.Auth, before the chain: in-process cache, else one Redis GET)\n")
	for i, s := range steps {
		mark, undo := " ", ""
		if s.guarded {
			mark = "⛨"
		}
		if s.undo != nil {
			undo = "  [undone when a later step refuses]"
		}
		fmt.Fprintf(&sb, "→ %2d. %s %-12s %-10s %s%s\n", i+1, mark, s.name, s.io, s.does, undo)
	}
	sb.WriteString("→ 202 {\"status\":\"queued\",\"reservation\":ID}\n")
	return sb.String()
}
