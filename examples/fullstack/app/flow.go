package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckillkit/seckill/breaker"
	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// Handler returns the service's HTTP handler.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	authed := func(name string, h http.HandlerFunc) http.Handler {
		return a.route(name, a.authenticated(h))
	}
	mux.Handle("GET /{$}", staticHandler())
	mux.Handle("GET /static/", staticHandler())
	mux.Handle("GET /healthz", a.route("healthz", a.handleHealth))
	mux.Handle("GET /metrics", a.m.handler())
	mux.Handle("POST /api/login", a.route("login", a.handleLogin))
	mux.Handle("GET /api/activity", a.route("activity", a.handleActivity))
	mux.Handle("GET /api/captcha", authed("captcha", a.handleCaptcha))
	mux.Handle("POST /api/activity/token", authed("token", a.handleToken))
	mux.Handle("GET /api/activity/path", authed("path", a.handlePath))
	mux.Handle("POST /api/buy/{activity}/{sig}", authed("buy", a.handleBuy))
	mux.Handle("POST /api/buy/{rest...}", authed("buy", func(w http.ResponseWriter, r *http.Request) {
		a.refuse(w, r, "token", http.StatusForbidden, "token", "no valid buy path")
	}))
	mux.Handle("GET /api/result/{reservation}", authed("result", a.handleResult))
	mux.Handle("POST /api/events/{reservation}/ticket", authed("ticket", a.handleTicket))
	mux.Handle("GET /api/events/{reservation}", a.route("events", a.handleEvents))
	mux.Handle("GET /api/ws/{reservation}", a.route("ws", a.handleWS))
	mux.Handle("POST /api/pay", authed("pay", a.handlePay))
	if a.cfg.Demo {
		// DEMO ONLY (-demo): lets scripts, the load generator and the
		// browser test pass the captcha. Never enable in production.
		mux.Handle("GET /api/demo/captcha/{id}", authed("demo_captcha", a.handleDemoCaptcha))
		mux.Handle("GET /api/demo/invariants", a.route("demo_invariants", a.handleInvariants))
	}
	return a.withRequestID(guard(mux))
}

// authenticated runs h for a signed-in caller (the session's user in ctx,
// as risk.UserFrom reads it) and refuses anyone else in the API's one JSON
// error shape: 401 for a missing, malformed or unknown token, 503 when the
// session store cannot answer (never its error text).
func (a *App) authenticated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, err := a.auth.Token(r)
		var user string
		if err == nil {
			user, err = a.authn.Authenticate(r.Context(), tok)
		}
		switch {
		case err == nil && user != "":
			h(w, r.WithContext(risk.WithUser(r.Context(), user)))
		case err == nil, errors.Is(err, risk.ErrRefused):
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeErr(w, http.StatusUnauthorized, "unauthorized", "sign in first")
		default:
			a.fail(w, r, "auth", err)
		}
	}
}

// userOf returns the authenticated user's ID (authenticated put it in ctx).
// It is the string every library package takes (a demo user's decimal ID).
func userOf(r *http.Request) (string, bool) {
	return risk.UserFrom(r.Context())
}

// refuse answers a denial and counts it by stage.
func (a *App) refuse(w http.ResponseWriter, r *http.Request, stage string, code int, status, msg string) {
	a.m.refused.WithLabelValues(stage).Inc()
	writeErr(w, code, status, msg)
}

// fail answers an infrastructure failure: logged with the request ID.
func (a *App) fail(w http.ResponseWriter, r *http.Request, stage string, err error) {
	a.m.refused.WithLabelValues(stage + "_error").Inc()
	if errors.Is(err, breaker.ErrRefused) {
		writeErr(w, http.StatusServiceUnavailable, "busy", "the service is busy, please retry")
		return
	}
	a.logger(r.Context()).Warn("request failed", "stage", stage, "err", err)
	writeErr(w, http.StatusServiceUnavailable, "busy", "the service is busy, please retry")
}

// ---- login and read paths ----

// handleLogin signs a buyer in. In demo mode the seeded demo users sign in
// by their canonical name (no password); outside it, Config.SignIn decides
// (an identity provider the embedding service plugs in), and without one
// sign-in is refused as not configured: no mode lets anyone act as anyone
// by default.
func (a *App) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, "bad_request", "body must be {\"username\":…,\"password\":…}")
		return
	}
	var user string
	switch {
	case a.cfg.Demo:
		id, ok := a.demoUser(req.Username)
		if !ok {
			writeErr(w, http.StatusUnauthorized, "unauthorized", "demo users are user1 … user"+strconv.Itoa(a.cfg.DemoUsers))
			return
		}
		user = strconv.FormatInt(id, 10)
	case a.cfg.SignIn == nil:
		writeErr(w, http.StatusServiceUnavailable, "unavailable", "sign-in is not configured")
		return
	default:
		id, err := a.cfg.SignIn(r.Context(), req.Username, req.Password)
		switch {
		case errors.Is(err, ErrBadCredentials):
			writeErr(w, http.StatusUnauthorized, "unauthorized", "wrong username or password")
			return
		case err != nil:
			a.fail(w, r, "login", err)
			return
		case !stock.ValidID(id):
			a.fail(w, r, "login", fmt.Errorf("sign-in returned an invalid user ID (%d bytes)", len(id)))
			return
		}
		user = id
	}
	tok, err := a.sessions.Create(r.Context(), user, 24*time.Hour)
	if err != nil {
		a.fail(w, r, "login", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": tok, "user_id": user, "username": req.Username})
}

// demoUser maps the canonical name "user42" to 42 when it is a seeded demo
// user. Only that one spelling signs in: "User42", " user42", "user042",
// "user+42" and "42" are refused, so one account has one name.
func (a *App) demoUser(name string) (int64, bool) {
	n, ok := strings.CutPrefix(name, "user")
	if !ok || n == "" || len(n) > 9 || n[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(n, 10, 64)
	if err != nil || id < 1 || id > int64(a.cfg.DemoUsers) {
		return 0, false
	}
	return id, true
}

type activityView struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	ProductName   string    `json:"product_name"`
	Price         string    `json:"price"`
	OriginalPrice string    `json:"original_price"`
	TotalStock    int64     `json:"total_stock"`
	Remaining     int64     `json:"remaining"`
	StartTime     time.Time `json:"start_time"`
	EndTime       time.Time `json:"end_time"`
	PathOpenTime  time.Time `json:"path_open_time"`
	ServerTime    time.Time `json:"server_time"`
	Demo          bool      `json:"demo"`
}

func (a *App) handleActivity(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, activityView{
		ID: a.act.ID, Name: a.act.Name, ProductName: a.act.ProductName,
		Price: a.act.ActivityPrice.String(), OriginalPrice: a.act.OriginalPrice.String(),
		TotalStock: a.act.TotalStock, Remaining: a.cachedRemaining(r.Context()),
		StartTime: a.act.StartTime, EndTime: a.act.EndTime, PathOpenTime: a.pathOpen,
		ServerTime: time.Now().UTC(), Demo: a.cfg.Demo,
	})
}

// cachedRemaining reads the stock for display at most every 200 ms (one
// caller refreshes, the others use the cached value): the read path never
// adds load to the write path's Redis.
func (a *App) cachedRemaining(ctx context.Context) int64 {
	now := time.Now().UnixNano()
	last := a.remainAt.Load()
	if now-last > int64(200*time.Millisecond) && a.remainAt.CompareAndSwap(last, now) {
		if n, err := a.stock.Remaining(ctx, a.act.ID); err == nil {
			a.remaining.Store(n + a.poolRemaining(ctx))
		} else if errors.Is(err, stock.ErrNotLoaded) {
			a.remaining.Store(a.act.Stock)
		}
	}
	return a.remaining.Load()
}

func (a *App) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	out := map[string]any{"redis": a.in.RedisKind, "db": a.in.DBKind, "kafka": a.in.KafkaKind,
		"breaker_redis": a.brRedis.State().String(), "breaker_kafka": a.brKafka.State().String()}
	code := http.StatusOK
	if err := a.in.Redis.Ping(ctx).Err(); err != nil {
		// The reason goes to the log, never to the caller.
		a.logger(r.Context()).Warn("health: redis ping failed", "err", err)
		out["redis_error"], code = "ping failed", http.StatusServiceUnavailable
	}
	if sqlDB, err := a.in.DB.DB(); err != nil || sqlDB.PingContext(ctx) != nil {
		out["db_error"], code = "ping failed", http.StatusServiceUnavailable
	}
	out["status"] = map[bool]string{true: "ok", false: "degraded"}[code == http.StatusOK]
	writeJSON(w, code, out)
}

// ---- credentials: captcha, access token, signed path ----

func (a *App) handleCaptcha(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	// Each image costs milliseconds of CPU: a per-user window bounds it.
	if !a.allowUser(w, r, a.captchaLimit, "captcha_limit", user) {
		return
	}
	// Demo mode only: ?image=none skips rendering for the load generator,
	// which reads the answer through the demo hook anyway.
	image := !(a.cfg.Demo && r.URL.Query().Get("image") == "none")
	ch, err := a.parts.captcha.New(r.Context(), user, image)
	if err != nil {
		a.fail(w, r, "captcha", err)
		return
	}
	if !image { // demo mode only (see above): hand the answer over too
		ans, _ := a.parts.captcha.Answer(r.Context(), ch.ID, user)
		writeJSON(w, http.StatusOK, map[string]any{"id": ch.ID, "expires_at": ch.ExpiresAt, "demo_answer": ans})
		return
	}
	writeJSON(w, http.StatusOK, ch)
}

// handleDemoCaptcha is the demo-only captcha hook (see Config.Demo).
func (a *App) handleDemoCaptcha(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	if n, err := strconv.Atoi(user); err != nil || n < 1 || n > a.cfg.DemoUsers {
		writeErr(w, http.StatusForbidden, "denied", "demo users only")
		return
	}
	ans, ok := a.parts.captcha.Answer(r.Context(), r.PathValue("id"), user)
	if !ok {
		writeErr(w, http.StatusNotFound, "captcha", "unknown captcha")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"answer": ans})
}

// handleToken hands the caller an access token of the sale. Tokens are
// scarce (stock × k), so they are guarded like the buy itself: only inside
// the sale's token window (from the release of the signed path, PathLead
// before the start, until the end; 425 before, 410 after), behind the risk
// checker and a per-user window of their own. Before, any session could take
// one at any time, and scripted sessions emptied the pool an hour before the
// sale (TestTokenHoarding).
func (a *App) handleToken(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user, _ := userOf(r)
	userKey := user
	// The window check is the signed path's own: it runs on the same clock.
	sig, err := a.signer.Sign(token.SignParams{Activity: a.actKey, User: userKey, Start: a.act.StartTime, Expiry: a.act.EndTime})
	switch {
	case errors.Is(err, token.ErrTooEarly):
		a.m.refused.WithLabelValues("token_window").Inc()
		writeJSON(w, http.StatusTooEarly, map[string]any{"status": "not_started", "message": "access tokens are handed out shortly before the start", "opens_at": a.pathOpen})
		return
	case errors.Is(err, token.ErrExpired):
		a.refuse(w, r, "token_window", http.StatusGone, "ended", "the sale has ended")
		return
	case err != nil:
		a.fail(w, r, "token", err)
		return
	}
	if a.stock.SoldOut(a.act.ID) && a.poolSoldOut() {
		a.refuse(w, r, "soldout", http.StatusConflict, "sold_out", "sold out")
		return
	}
	subj := risk.Subject{UserID: userKey, IP: a.ips.ClientIP(r), DeviceID: r.Header.Get("X-Device-ID")}
	dec, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (risk.Decision, error) {
		return a.checker.Check(ctx, subj)
	})
	if err != nil {
		a.fail(w, r, "token_risk", err)
		return
	}
	if dec.Action == risk.Deny {
		a.refuse(w, r, "token_risk", http.StatusForbidden, "denied", "refused by risk control")
		return
	}
	if !a.allowUser(w, r, a.tokenLimit, "token_limit", userKey) {
		return
	}
	g, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (token.Grant, error) {
		return a.pool.Take(ctx, a.actKey, userKey)
	})
	if err != nil {
		a.fail(w, r, "token", err)
		return
	}
	if g.Status == token.Used {
		g = a.tokenBack(ctx, user, g)
	}
	switch g.Status {
	case token.Granted, token.Held:
		// The signed path too (saves a round trip).
		writeJSON(w, http.StatusOK, map[string]any{"token": g.Token, "expires_at": g.ExpiresAt, "path": "/api/buy/" + a.actKey + "/" + sig})
	case token.Empty:
		a.refuse(w, r, "token", http.StatusConflict, "sold_out", "no access tokens left")
	case token.Used:
		a.refuse(w, r, "token", http.StatusConflict, "already_bought", "you already used your access token")
	default:
		a.refuse(w, r, "token", http.StatusTooEarly, "not_started", "the sale is not open yet")
	}
}

// allowUser applies a per-user window l and answers 429 with Retry-After
// when it refuses; it reports whether to go on. One failure policy per
// call: the window's own (FallbackLocal: a Redis failure falls back to a
// local per-user bucket, Result.Degraded, counted) decides what a Redis
// outage does — it is not also wrapped in the Redis breaker, which would
// count the fallback's answers as successes and, once open, never let the
// fallback run.
func (a *App) allowUser(w http.ResponseWriter, r *http.Request, l limiter.Limiter, stage, userKey string) bool {
	res, err := l.AllowN(r.Context(), userKey, 1)
	if err != nil {
		a.fail(w, r, stage, err)
		return false
	}
	if res.Degraded {
		a.m.limited.WithLabelValues(stage + "_fallback").Inc()
	}
	if !res.Allowed {
		a.m.limited.WithLabelValues(stage).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(int(res.RetryAfter.Seconds())+1))
		a.refuse(w, r, stage, http.StatusTooManyRequests, "limited", "too many requests, slow down")
		return false
	}
	return true
}

func (a *App) handlePath(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	sig, err := a.signer.Sign(token.SignParams{Activity: a.actKey, User: user, Start: a.act.StartTime, Expiry: a.act.EndTime})
	switch {
	case errors.Is(err, token.ErrTooEarly):
		writeJSON(w, http.StatusTooEarly, map[string]any{"status": "not_started", "message": "the buy link is released shortly before the start", "opens_at": a.pathOpen})
		return
	case errors.Is(err, token.ErrExpired):
		a.refuse(w, r, "path", http.StatusGone, "ended", "the sale has ended")
		return
	case err != nil:
		a.fail(w, r, "path", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"path": "/api/buy/" + a.actKey + "/" + sig})
}

// ---- the buy chain (docs/ARCHITECTURE.md, "Request flow of a buy") ----

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

// validRequestID reports whether id is a usable client idempotency key.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 40 {
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

// clientReservationID is the reservation ID of a client's attempt: the
// user is part of it, so one user's key can never name another's
// reservation, and it cannot collide with newReservationID's IDs.
func clientReservationID(user, requestID string) string { return "u" + user + "-" + requestID }

// replay answers a retry of an attempt whose reservation exists: with its
// result when the database has one, else by handing its message on again
// (the consumer settles duplicates by reservation ID) and answering queued.
// A reservation that was released answers failed, and the access token is
// given back: the buyer holds nothing and may start a new attempt. It
// reports false when the reservation does not exist (a first attempt, or
// one that never reached Reserve): the normal path runs.
func (a *App) replay(ctx context.Context, w http.ResponseWriter, r *http.Request, user string, req buyRequest, resv string, outcome *string) bool {
	lk, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (lookup, error) {
		rec, found, err := a.lookupReservation(ctx, resv)
		return lookup{rec, found}, err
	})
	switch {
	case err != nil:
		*outcome = "busy"
		a.fail(w, r, "replay", err)
		return true
	case !lk.found:
		return false
	case lk.r.State != stock.Held:
		*outcome = "failed"
		a.restoreToken(ctx, user, req.Token)
		writeJSON(w, http.StatusConflict, map[string]string{"status": "failed", "reservation": resv, "reason": "released"})
		return true
	}
	res, err := a.results.Reservation(ctx, a.act.ID, user, resv)
	if err != nil {
		*outcome = "busy"
		a.fail(w, r, "replay", err)
		return true
	}
	if res.Status == order.StatusSuccess || res.Status == order.StatusFailed {
		*outcome = "replayed"
		writeJSON(w, http.StatusOK, a.view(ctx, res))
		return true
	}
	msg := order.Message{MsgID: order.NewMsgID(), ReservationID: resv, ActivityID: a.act.ID, UserID: user, Qty: lk.r.Qty,
		Price: int64(a.act.ActivityPrice), CreatedAt: time.Now().UTC()}
	if err := a.parts.submit(ctx, msg); err != nil {
		*outcome = "retry"
		writeErr(w, http.StatusServiceUnavailable, "retry", "could not place the order, please retry")
		a.logger(ctx).Warn("resubmit failed", "reservation", resv, "err", err)
		return true
	}
	*outcome = "queued"
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "queued", "reservation": resv})
	return true
}

type lookup struct {
	r     stock.Reservation
	found bool
}

// handleBuy runs the chain, cheapest refusals first:
//
//	auth (risk.Auth, before this handler; in-process cache, else one GET)
//	→ window + in-process sold-out flag (stock.Deductor.SoldOut): no I/O
//	→ global bucket (limiter.TokenBucket, this node): no I/O
//	→ shape of access token and captcha ID: no I/O
//	→ risk checker: blacklist, behaviour, device (Redis, breaker)
//	→ per-user window (limiter, Redis, breaker)
//	→ signed path (token.Signer.Verify, HMAC, no I/O)
//	→ captcha (verify once, Redis, breaker)
//	→ access token (token.Pool.Consume, Redis, breaker)
//	→ stock.Reserve (one Lua call, breaker)
//	→ submit: Kafka, else outbox, else release (order)
//	→ 202 {"status":"queued","reservation":ID}
//
// The sold-out flag and the global bucket come before the Redis-backed risk
// rules so the 99 % of losers cost no Redis round trip once the stock is
// gone; they reveal nothing the activity endpoint doesn't already show.
// The captcha is checked before the access token is consumed so a typo
// doesn't burn the user's token.
func (a *App) handleBuy(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	outcome := "error"
	defer func() {
		a.m.buyOutcomes.WithLabelValues(outcome).Inc()
		a.m.buyLatency.Observe(time.Since(start).Seconds())
	}()
	ctx := r.Context()
	user, _ := userOf(r)
	userKey := user
	deny := func(stage string, code int, status, msg string) {
		outcome = status
		a.refuse(w, r, stage, code, status, msg)
	}
	failed := func(stage string, err error) {
		outcome = "busy"
		a.fail(w, r, stage, err)
	}

	if r.PathValue("activity") != a.actKey {
		deny("path", http.StatusNotFound, "token", "unknown activity")
		return
	}
	now := a.now() // -clock-skew (tests)
	switch {
	case now.Before(a.act.StartTime):
		deny("window", http.StatusTooEarly, "not_started", "the sale has not started")
		return
	case !now.Before(a.act.EndTime):
		deny("window", http.StatusGone, "ended", "the sale has ended")
		return
	}
	var req buyRequest
	parsed := false
	if a.stock.SoldOut(a.act.ID) && a.poolSoldOut() {
		// Refused in-process, unless the request is the retry of an attempt
		// whose request ID won a unit before the sale sold out: that one
		// goes on and gets its reservation back (stock.SoldOutFor knows
		// the winners; no I/O either way).
		err := readJSON(r, &req)
		if err != nil || !validRequestID(req.RequestID) ||
			a.stock.SoldOutFor(a.act.ID, clientReservationID(userKey, req.RequestID)) {
			a.m.reserve.WithLabelValues("sold_out_local").Inc()
			deny("soldout", http.StatusConflict, "sold_out", "sold out")
			return
		}
		parsed = true
	}
	if !a.global.Allow() {
		a.m.limited.WithLabelValues("global").Inc()
		deny("global", http.StatusTooManyRequests, "limited", "too many requests, retry shortly")
		return
	}
	if !parsed {
		if err := readJSON(r, &req); err != nil {
			deny("body", http.StatusBadRequest, "bad_request", "bad body")
			return
		}
	}
	// Shape checks, no I/O: a missing or malformed access token or captcha
	// ID can never pass, so it costs no Redis round trip.
	if !token.ValidPoolToken(req.Token) {
		deny("access_token", http.StatusForbidden, "token", "no valid access token")
		return
	}
	if !captcha.ValidID(req.CaptchaID) || req.Captcha == "" {
		deny("captcha", http.StatusBadRequest, "captcha", "captcha missing")
		return
	}
	resv := ""
	if req.RequestID != "" {
		if !validRequestID(req.RequestID) {
			deny("body", http.StatusBadRequest, "bad_request", "request_id: 1-40 of [A-Za-z0-9_-]")
			return
		}
		resv = clientReservationID(userKey, req.RequestID)
	}

	// Risk: blacklist, behaviour, device.
	subj := risk.Subject{UserID: userKey, IP: a.ips.ClientIP(r), DeviceID: r.Header.Get("X-Device-ID")}
	dec, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (risk.Decision, error) {
		return a.checker.Check(ctx, subj)
	})
	if err != nil {
		failed("risk", err)
		return
	}
	if dec.Action == risk.Deny {
		if dec.Throttled {
			deny("risk", http.StatusTooManyRequests, "limited", "too many attempts ("+dec.Reason+")")
		} else {
			deny("risk", http.StatusForbidden, "denied", "refused by risk control ("+dec.Reason+")")
		}
		return
	}
	// A Challenge decision is satisfied by the captcha every buy carries.

	// Per-user window: its own failure policy (FallbackLocal) decides a
	// Redis outage, so it is not wrapped in the Redis breaker (allowUser).
	lr, err := a.perUser.AllowN(ctx, userKey, 1)
	if err != nil {
		failed("limiter", err)
		return
	}
	if lr.Degraded {
		a.m.limited.WithLabelValues("user_fallback").Inc()
	}
	if !lr.Allowed {
		a.m.limited.WithLabelValues("user").Inc()
		w.Header().Set("Retry-After", strconv.Itoa(int(lr.RetryAfter.Seconds())+1))
		deny("user_limit", http.StatusTooManyRequests, "limited", "too many attempts, slow down")
		return
	}

	// A retry of an attempt that reserved: its reservation, not a second
	// one (before the one-time path, captcha and token, which it spent).
	if resv != "" && a.replay(ctx, w, r, user, req, resv, &outcome) {
		return
	}

	// Signed path: HMAC, no I/O.
	if _, err := a.signer.Verify(ctx, token.VerifyParams{Token: r.PathValue("sig"), Activity: a.actKey, User: userKey}); err != nil {
		deny("path", http.StatusForbidden, "token", "invalid buy link")
		return
	}

	// Captcha, verified once.
	ok, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (bool, error) {
		return a.parts.captcha.Verify(ctx, captcha.VerifyParams{ID: req.CaptchaID, Answer: req.Captcha, User: userKey})
	})
	if err != nil {
		failed("captcha", err)
		return
	}
	if !ok {
		deny("captcha", http.StatusBadRequest, "captcha", "wrong or expired captcha")
		return
	}

	// Access token, consumed once.
	err = a.brRedis.Execute(ctx, func(ctx context.Context) error {
		return a.pool.Consume(ctx, token.ConsumeParams{Activity: a.actKey, User: userKey, Token: req.Token})
	})
	switch {
	case errors.Is(err, token.ErrUsed):
		// Spent by an earlier attempt. If that attempt left the buyer
		// holding nothing (it crashed or lost its answer before Reserve,
		// or its reservation was released), the token's right to try comes
		// back: the per-user limit in stock, not the token, stops a second
		// unit.
		held, herr := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (int64, error) {
			return a.held(ctx, user)
		})
		if herr != nil {
			failed("access_token", herr)
			return
		}
		if held > 0 {
			deny("access_token", http.StatusConflict, "already_bought", "access token already used")
			return
		}
	case isTokenDenial(err):
		deny("access_token", http.StatusForbidden, "token", "invalid access token: "+err.Error())
		return
	case err != nil:
		failed("access_token", err)
		return
	}

	// Reserve: one Lua call. The reservation ID travels with the order.
	if resv == "" {
		resv = a.newReservationID()
	}
	res, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (stock.Result, error) {
		sreq := stock.Request{Activity: a.act.ID, User: user, Qty: 1, RequestID: resv}
		res, err := a.stock.Reserve(ctx, sreq)
		if err != nil {
			return res, err
		}
		return a.reserveFromPool(ctx, sreq, res)
	})
	if err != nil {
		a.m.reserve.WithLabelValues("error").Inc()
		a.restoreToken(ctx, userKey, req.Token)
		failed("reserve", err)
		return
	}
	a.m.reserve.WithLabelValues(res.Status.String()).Inc()
	switch res.Status {
	case stock.Reserved:
	case stock.SoldOut:
		if res.Fallback {
			// Redis cannot be reached and the DB pool is empty: Redis's
			// share may well have units left, so this is not "sold out".
			a.restoreToken(ctx, userKey, req.Token)
			deny("reserve", http.StatusServiceUnavailable, "busy", "the sale is paused for a moment, retry shortly")
			return
		}
		deny("reserve", http.StatusConflict, "sold_out", "sold out")
		return
	case stock.LimitReached:
		deny("reserve", http.StatusConflict, "already_bought", "one per person")
		return
	case stock.NotStarted, stock.NotLoaded:
		// Redis's clock says "not yet" where ours said "open": the user
		// will try again, with the same access token.
		a.restoreToken(ctx, userKey, req.Token)
		deny("reserve", http.StatusTooEarly, "not_started", "the sale has not started")
		return
	case stock.Ended:
		deny("reserve", http.StatusGone, "ended", "the sale has ended")
		return
	case stock.Frozen:
		// Redis lost the sale's state (or an operator froze it) and it is
		// being rebuilt from the database: not sold out, try again shortly.
		a.restoreToken(ctx, userKey, req.Token)
		deny("reserve", http.StatusServiceUnavailable, "busy", "the sale is paused for a moment, retry shortly")
		return
	case stock.Paused:
		// An operator paused the sale (admin API): not sold out; the
		// buyer keeps the access token and retries after the resume.
		a.restoreToken(ctx, userKey, req.Token)
		w.Header().Set("Retry-After", "5")
		deny("reserve", http.StatusServiceUnavailable, "paused", "the sale is paused, retry shortly")
		return
	default:
		deny("reserve", http.StatusConflict, "sold_out", res.Status.String())
		return
	}

	// Submit: Kafka → outbox → release.
	msg := order.Message{MsgID: order.NewMsgID(), ReservationID: resv, ActivityID: a.act.ID, UserID: user, Qty: 1,
		Price: int64(a.act.ActivityPrice), CreatedAt: time.Now().UTC()}
	if err := a.parts.submit(ctx, msg); err != nil {
		if errors.Is(err, order.ErrRetry) {
			outcome = "retry"
			a.m.released.WithLabelValues("submit_failed").Inc()
			a.restoreToken(ctx, userKey, req.Token) // "please retry" must be possible
			writeErr(w, http.StatusServiceUnavailable, "retry", "could not place the order, please retry")
			a.logger(ctx).Warn("submit failed, reservation released", "reservation", resv, "err", err)
			return
		}
		// Not accepted (the message was refused before Kafka or the outbox
		// saw it): the reservation must not outlive the refusal.
		if rerr := a.releaseUnits(context.WithoutCancel(ctx), a.act.ID, resv); rerr != nil {
			err = errors.Join(err, rerr)
		}
		failed("submit", err)
		return
	}
	a.accepted.Add(1)
	outcome = "queued"
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "queued", "reservation": resv})
}

// tokenBack gives a buyer whose token was spent by an attempt that left
// them holding nothing (no reservation in flight, no live order: the attempt
// crashed, lost its answer, or its reservation was released or its order
// cancelled) the same token again, and returns the new grant. Otherwise, or
// when Redis cannot tell, it returns g unchanged (Used): the per-user limit
// in stock is what stops a second unit, the token only rations attempts.
func (a *App) tokenBack(ctx context.Context, user string, g token.Grant) token.Grant {
	held, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (int64, error) {
		return a.held(ctx, user)
	})
	if err != nil || held > 0 {
		return g
	}
	userKey := user
	a.restoreToken(ctx, userKey, g.Token)
	again, err := breaker.Do(ctx, a.brRedis, func(ctx context.Context) (token.Grant, error) {
		return a.pool.Take(ctx, a.actKey, userKey)
	})
	if err != nil {
		return g
	}
	return again
}

// restoreToken gives back an access token consumed by a buy that then
// failed before anything was reserved (or whose reservation was released),
// so the user's retry is not refused as "already used". The per-user cap in
// stock, not the token, is what stops a second order. A failure is logged:
// the user then needs a new token, nothing is lost.
func (a *App) restoreToken(ctx context.Context, user, tok string) {
	ctx = context.WithoutCancel(ctx)
	if err := a.pool.Restore(ctx, token.ConsumeParams{Activity: a.actKey, User: user, Token: tok}); err != nil {
		a.m.refused.WithLabelValues("token_restore_error").Inc()
		a.logger(ctx).Warn("access token not restored", "user", user, "err", err)
	}
}

type limiterResult struct {
	allowed bool
	retry   time.Duration
}

// isTokenDenial: every refusal of the token package wraps token.ErrRefused.
func isTokenDenial(err error) bool { return errors.Is(err, token.ErrRefused) }

var resvSeq atomicCounter

// newReservationID is unique across nodes: node tag + time + counter.
func (a *App) newReservationID() string {
	return "r" + a.nodeTag + strconv.FormatInt(time.Now().UnixMilli(), 36) + strconv.FormatUint(resvSeq.next(), 36)
}

// ---- results, push, pay ----

type resultView struct {
	Status      string `json:"status"` // queued | created | paid | cancelled | failed | unknown
	Reservation string `json:"reservation,omitempty"`
	OrderNo     string `json:"order_no,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

func (v resultView) final() bool {
	return v.Status != "queued" && v.Status != "unknown" && v.Status != ""
}

// resultOf answers for one reservation of the user (or, without one, for
// the user's latest): the database decides whenever it knows the
// reservation (an order, or a FAILED outcome such as a fenced release), so
// the answer never contradicts it; a reservation the database does not know
// yet is asked of the stock ledger: held = still queued, released or
// tombstoned = failed, absent or another user's = unknown.
func (a *App) resultOf(ctx context.Context, user string, resv string) (resultView, error) {
	if resv == "" {
		res, err := a.results.Get(ctx, a.act.ID, user)
		if err != nil {
			return resultView{}, err
		}
		return a.view(ctx, res), nil
	}
	res, err := a.results.Reservation(ctx, a.act.ID, user, resv)
	if err != nil {
		return resultView{}, err
	}
	if res.Status == order.StatusSuccess || res.Status == order.StatusFailed {
		return a.view(ctx, res), nil
	}
	r, ok, err := a.lookupReservation(ctx, resv)
	switch {
	case errors.Is(err, stock.ErrInvalidRequest):
		return resultView{Status: "unknown", Reservation: resv}, nil
	case err != nil:
		return resultView{}, err
	case !ok || r.User != user:
		return resultView{Status: "unknown", Reservation: resv}, nil
	case r.State == stock.Held:
		return resultView{Status: "queued", Reservation: resv}, nil
	default:
		return resultView{Status: "failed", Reservation: resv, Reason: "released"}, nil
	}
}

// settledView is the push view of an outcome the consumer has just
// committed. A new order is "created": it cannot be paid before it exists,
// and a stream that opens later reads the database first (resultOf).
func settledView(res order.Result) resultView {
	v := resultView{Reservation: res.ReservationID, OrderNo: res.OrderNo, Reason: res.Reason}
	switch res.Status {
	case order.StatusQueued:
		v.Status = "queued"
	case order.StatusFailed:
		v.Status = "failed"
	case order.StatusSuccess:
		v.Status = "created"
	default:
		v.Status = "unknown"
	}
	return v
}

// view is the read path's view of a result: an order's current status
// (created, paid, cancelled) is read from the database.
func (a *App) view(ctx context.Context, res order.Result) resultView {
	v := settledView(res)
	if res.Status == order.StatusSuccess {
		var o order.Order
		if err := a.in.DB.WithContext(ctx).Select("status").Where("order_no = ?", res.OrderNo).Take(&o).Error; err == nil {
			v.Status = strings.ToLower(o.Status)
		}
	}
	return v
}

func (a *App) handleResult(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	v, err := a.resultOf(r.Context(), user, r.PathValue("reservation"))
	if err != nil {
		a.fail(w, r, "result", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *App) handlePay(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	var req struct {
		OrderNo string `json:"order_no"`
	}
	if err := readJSON(r, &req); err != nil || req.OrderNo == "" {
		writeErr(w, http.StatusBadRequest, "bad_request", "body must be {\"order_no\":\"…\"}")
		return
	}
	var o order.Order
	err := a.in.DB.WithContext(r.Context()).Where("order_no = ?", req.OrderNo).Take(&o).Error
	if err != nil || o.UserID != user {
		writeErr(w, http.StatusNotFound, "not_found", "no such order")
		return
	}
	err = a.parts.pay(r.Context(), req.OrderNo)
	switch {
	case err == nil, errors.Is(err, order.ErrAlreadyPaid):
		writeJSON(w, http.StatusOK, map[string]string{"status": "paid", "order_no": req.OrderNo})
	case errors.Is(err, order.ErrOrderCancelled):
		writeErr(w, http.StatusConflict, "cancelled", "the order was cancelled; your payment will be refunded")
	default:
		a.fail(w, r, "pay", err)
	}
}

func (a *App) handleInvariants(w http.ResponseWriter, r *http.Request) {
	iv, err := a.Invariants(r.Context())
	if err != nil {
		a.fail(w, r, "invariants", err)
		return
	}
	writeJSON(w, http.StatusOK, iv)
}
