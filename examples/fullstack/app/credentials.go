package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// Credentials: sign-in, captcha, the access token and the signed buy path.

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
		writeBadBody(w, "body must be {\"username\":…,\"password\":…}", err)
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
	tok, err := a.p.sessions.Create(r.Context(), user, 24*time.Hour)
	if err != nil {
		a.fail(w, r, "login", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": tok, "user_id": user, "username": req.Username})
}

// handleLogout ends the caller's session: its stream tickets stop opening
// streams and its open streams close (revokeStreams, first: a failure
// there leaves the session live, so the client can retry the logout), then
// the session store deletes it and announces the revocation, so every
// instance's session cache drops it at once, and this instance's cache
// forgets it before answering. 204.
func (a *App) handleLogout(w http.ResponseWriter, r *http.Request) {
	tok, err := bearerToken(r)
	if err != nil { // authenticated checked it: cannot happen
		a.fail(w, r, "logout", err)
		return
	}
	if err := a.revokeStreams(r.Context(), a.sessionTag(tok)); err != nil {
		a.fail(w, r, "logout", err)
		return
	}
	if err := a.p.sessions.Revoke(r.Context(), tok); err != nil {
		a.fail(w, r, "logout", err)
		return
	}
	a.p.authn.Forget(tok)
	w.WriteHeader(http.StatusNoContent)
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

func (a *App) handleCaptcha(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	// Each image costs milliseconds of CPU: a per-user window bounds it.
	if !a.allowUser(w, r, a.p.captchaLimit, "captcha_limit", user) {
		return
	}
	// Demo mode only: ?image=none skips rendering for the load generator,
	// which reads the answer through the demo hook anyway.
	image := !(a.cfg.Demo && r.URL.Query().Get("image") == "none")
	ch, err := a.p.captcha.New(r.Context(), user, image)
	if err != nil {
		a.fail(w, r, "captcha", err)
		return
	}
	if !image { // demo mode only (see above): hand the answer over too
		ans, _ := a.p.captcha.Answer(r.Context(), ch.ID, user)
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
	ans, ok := a.p.captcha.Answer(r.Context(), r.PathValue("id"), user)
	if !ok {
		writeErr(w, http.StatusNotFound, "captcha", "unknown captcha")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"answer": ans})
}

// The access-token request, POST /api/activity/token, is a chain of its
// own: one loop, each refusal counted by the stage of the step that
// refused (seckill_refusals_total{stage}), cheapest first. It stays in the
// app rather than in checkout: it issues a credential (the right to try),
// it is not a buy attempt — nothing is reserved, nothing is undone.
//
// It has the buy chain's shape and its breaker rule (checkout.Step): a
// list of named steps, each marked guarded or not, run by one loop
// (runTokenStep, checkout's run); a guarded step runs whole inside the
// Redis breaker (one admission per step, however many Redis calls it
// makes), the failure it returns counts against the breaker and a refusal
// does not, and an open breaker answers 503 busy without running it. The
// steps that do Redis I/O are guarded, except the per-user window, which
// has its own failure policy (allowUser). TestTokenChainGuardsAsTheBuyChain
// holds the two chains to this.

// verdict is a token-chain step's answer; the zero verdict means "go on".
type verdict struct {
	outcome string // the request's outcome; "" = go on
	code    int    // the HTTP status
	status  string // a refusal: its machine status and message,
	msg     string
	body    any   // or a whole answer, written as JSON,
	err     error // or an infrastructure failure: 503 busy, logged
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

// answerStep writes a chain's answer and counts a refusal by its stage.
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

// tokenReq is one access-token request travelling down tokenChain.
type tokenReq struct {
	r    *http.Request
	user string
	sig  string // the buy path's signature, made by the window step
}

// tokenStep is one link of the token request: its stage (the refusal's
// label), whether it runs inside the Redis breaker (checkout.Step.Guarded),
// and its run.
type tokenStep struct {
	stage   string
	guarded bool
	run     func(a *App, ctx context.Context, t *tokenReq) verdict
}

// tokenChain lists the token request's steps in the order they run.
var tokenChain = []tokenStep{
	{stage: "token_window", run: (*App).tokenWindow},            // no I/O, as checkout.StepWindow
	{stage: "soldout", run: (*App).tokenSoldOut},                // no I/O, as checkout.StepSoldOut
	{stage: "token_risk", guarded: true, run: (*App).tokenRisk}, // Redis, as checkout.StepRisk
	{stage: "token_limit", run: (*App).tokenLimit},              // the window's own policy, as checkout.StepUserLimit
	{stage: "token", guarded: true, run: (*App).tokenTake},      // Redis, as checkout.StepToken
}

// handleToken hands the caller an access token of the sale. Tokens are
// scarce (stock × k), so they are guarded like the buy itself: only inside
// the sale's token window (from the release of the signed path, PathLead
// before the start, until the end; 425 before, 410 after), behind the risk
// checker and a per-user window of their own. Before, any session could take
// one at any time, and scripted sessions emptied the pool an hour before the
// sale (TestTokenHoarding). Inside the window a pool that Redis lost
// answers 503 busy with Retry-After until it is issued again
// (TestTokenPoolLostMidSaleIsBusy): "not started" is the window's answer
// alone.
func (a *App) handleToken(w http.ResponseWriter, r *http.Request) {
	t := &tokenReq{r: r}
	t.user, _ = userOf(r)
	for _, s := range a.tokenSteps() {
		if v := runTokenStep(r.Context(), a.p.brRedis.Execute, a, s, t); v.done() {
			a.answerStep(w, r, s.stage, v)
			return
		}
	}
}

// runTokenStep runs s, inside guard (the Redis breaker's Execute, the one
// checkout.Config.Breaker gets) when s is guarded: checkout's rule for its
// guarded steps. The step's failure (verdict.err) is what the breaker
// counts; a refusal or an answer is a success to it; when the breaker
// refuses, the step never ran and the answer is busy.
func runTokenStep(ctx context.Context, guard func(context.Context, func(context.Context) error) error, a *App, s tokenStep, t *tokenReq) verdict {
	if !s.guarded {
		return s.run(a, ctx, t)
	}
	var v verdict
	err := guard(ctx, func(ctx context.Context) error {
		v = s.run(a, ctx, t)
		return v.err
	})
	if err != nil && v.err == nil { // the breaker refused: the step never ran
		v = failure(err)
	}
	return v
}

// tokenWindow signs the buy path: the window check is the signed path's
// own, on the same clock.
func (a *App) tokenWindow(_ context.Context, t *tokenReq) verdict {
	sig, err := a.p.signer.Sign(token.SignParams{Activity: a.sale.key, User: t.user, Start: a.sale.act.Start, Expiry: a.sale.act.End})
	switch {
	case errors.Is(err, token.ErrTooEarly):
		a.m.refused.WithLabelValues("token_window").Inc()
		return answer("not_started", http.StatusTooEarly, map[string]any{"status": "not_started",
			"message": "access tokens are handed out shortly before the start", "opens_at": a.sale.pathOpen})
	case errors.Is(err, token.ErrExpired):
		return refusal(http.StatusGone, "ended", "the sale has ended")
	case err != nil:
		return failure(err)
	}
	t.sig = sig
	return verdict{}
}

func (a *App) tokenSoldOut(_ context.Context, _ *tokenReq) verdict {
	if a.saleSoldOut() {
		return refusal(http.StatusConflict, "sold_out", "sold out")
	}
	return verdict{}
}

func (a *App) tokenRisk(ctx context.Context, t *tokenReq) verdict {
	subj := risk.Subject{UserID: t.user, IP: a.p.ips.ClientIP(t.r), DeviceID: t.r.Header.Get("X-Device-ID")}
	dec, err := a.p.checker.Check(ctx, subj)
	switch {
	case err != nil:
		return failure(err)
	case dec.Action == risk.Deny:
		return refusal(http.StatusForbidden, "denied", "refused by risk control")
	}
	return verdict{}
}

func (a *App) tokenLimit(ctx context.Context, t *tokenReq) verdict {
	return a.userLimit(ctx, a.p.tokenLimit, "token_limit", t.user)
}

// tokenTake takes the user's token from the pool (again, for a user whose
// spent token bought nothing: tokenBack) and answers.
func (a *App) tokenTake(ctx context.Context, t *tokenReq) verdict {
	g, err := a.p.pool.Take(ctx, a.sale.key, t.user)
	if err == nil && g.Status == token.Used {
		g, err = a.tokenBack(ctx, t.user, g)
	}
	if err != nil {
		return failure(err)
	}
	switch g.Status {
	case token.Granted, token.Held:
		// The signed path too (saves a round trip).
		return answer("granted", http.StatusOK, map[string]any{"token": g.Token, "expires_at": g.ExpiresAt,
			"path": "/api/buy/" + a.sale.key + "/" + t.sig})
	case token.Empty:
		return refusal(http.StatusConflict, "sold_out", "no access tokens left")
	case token.Used:
		return refusal(http.StatusConflict, "already_bought", "you already used your access token")
	case token.NotIssued:
		// The pool is issued when the service starts, long before the
		// token window opens (tokenWindow has checked it is open): a pool
		// missing now was lost with Redis's data, and afterRebuild issues
		// it again once the stock is rebuilt. Not "not started": busy.
		a.m.refused.WithLabelValues("token_pool_missing").Inc()
		v := refusal(http.StatusServiceUnavailable, "busy", "the sale is paused for a moment, retry shortly")
		v.retryAfter = "5"
		return v
	}
	return failure(fmt.Errorf("access-token pool: unexpected status %v", g.Status))
}

// allowUser applies a per-user window l and answers 429 with Retry-After
// when it refuses; it reports whether to go on. One failure policy per
// call: the window's own (FallbackLocal: a Redis failure falls back to a
// local per-user bucket, Result.Degraded, counted) decides what a Redis
// outage does — it is not also wrapped in the Redis breaker, which would
// count the fallback's answers as successes and, once open, never let the
// fallback run.
func (a *App) allowUser(w http.ResponseWriter, r *http.Request, l limiter.Limiter, stage, userKey string) bool {
	v := a.userLimit(r.Context(), l, stage, userKey)
	if v.done() {
		a.answerStep(w, r, stage, v)
		return false
	}
	return true
}

// userLimit is allowUser as a chain step's verdict.
func (a *App) userLimit(ctx context.Context, l limiter.Limiter, stage, userKey string) verdict {
	res, err := l.AllowN(ctx, userKey, 1)
	if err != nil {
		return failure(err)
	}
	if res.Degraded {
		a.m.limited.WithLabelValues(stage + "_fallback").Inc()
	}
	if !res.Allowed {
		a.m.limited.WithLabelValues(stage).Inc()
		v := refusal(http.StatusTooManyRequests, "limited", "too many requests, slow down")
		v.retryAfter = strconv.Itoa(int(res.RetryAfter.Seconds()) + 1)
		return v
	}
	return verdict{}
}

func (a *App) handlePath(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	sig, err := a.p.signer.Sign(token.SignParams{Activity: a.sale.key, User: user, Start: a.sale.act.Start, Expiry: a.sale.act.End})
	switch {
	case errors.Is(err, token.ErrTooEarly):
		writeJSON(w, http.StatusTooEarly, map[string]any{"status": "not_started", "message": "the buy link is released shortly before the start", "opens_at": a.sale.pathOpen})
		return
	case errors.Is(err, token.ErrExpired):
		a.refuse(w, r, "path", http.StatusGone, "ended", "the sale has ended")
		return
	case err != nil:
		a.fail(w, r, "path", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"path": "/api/buy/" + a.sale.key + "/" + sig})
}

// tokenBack gives a buyer whose token was spent by an attempt that left
// them holding nothing (no reservation in flight, no live order: the attempt
// crashed, lost its answer, or its reservation was released or its order
// cancelled) the same token again, and returns the new grant. A buyer who
// holds a unit keeps g (Used): the per-user limit in stock is what stops a
// second unit, the token only rations attempts. When Redis cannot tell, the
// error is returned, and the request is busy (retry), as the buy's
// spent-token rule answers (checkout.StepToken); it runs inside tokenTake's
// one admission of the breaker.
func (a *App) tokenBack(ctx context.Context, user string, g token.Grant) (token.Grant, error) {
	// One call: Held of a sale in sizes is the sum over its sizes (in
	// Redis and in their DB pools).
	held, err := a.p.units.Held(ctx, a.sale.act.ID, user)
	if err != nil {
		return g, err
	}
	if held > 0 {
		return g, nil
	}
	a.restoreToken(ctx, user, g.Token)
	return a.p.pool.Take(ctx, a.sale.key, user)
}

// restoreToken gives back an access token consumed by a buy that then
// failed before anything was reserved (or whose reservation was released),
// so the user's retry is not refused as "already used". The per-user cap in
// stock, not the token, is what stops a second order. A failure is logged:
// the user then needs a new token, nothing is lost.
func (a *App) restoreToken(ctx context.Context, user, tok string) {
	ctx = context.WithoutCancel(ctx)
	if err := a.p.pool.Restore(ctx, token.ConsumeParams{Activity: a.sale.key, User: user, Token: tok}); err != nil {
		a.m.refused.WithLabelValues("token_restore_error").Inc()
		a.logger(ctx).Warn("access token not restored", "user", user, "err", err)
	}
}
