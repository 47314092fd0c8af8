package app

import (
	"errors"
	"net/http"

	"github.com/seckillkit/seckill/breaker"
	"github.com/seckillkit/seckill/risk"
)

// The routes of the public API, and how every handler answers a refusal
// or a failure.

// Handler returns the service's HTTP handler.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	// guard runs the mux once per request and keeps answers of the mux's
	// own (404, 405, redirects) apart from the routes' answers by this mark.
	handle := func(pattern string, h http.Handler) { mux.Handle(pattern, routed(h)) }
	authed := func(name string, h http.HandlerFunc) http.Handler {
		return a.route(name, a.authenticated(h))
	}
	handle("GET /{$}", staticHandler())
	handle("GET /static/", staticHandler())
	handle("GET /healthz", a.route("healthz", a.handleHealth))
	handle("GET /metrics", a.handleMetrics())
	handle("POST /api/login", a.route("login", a.handleLogin))
	handle("POST /api/logout", authed("logout", a.handleLogout))
	handle("GET /api/activity", a.route("activity", a.handleActivity))
	handle("GET /api/captcha", authed("captcha", a.handleCaptcha))
	handle("GET /api/pow", authed("pow", a.handlePoW)) // -bot-defence=pow
	handle("POST /api/activity/token", authed("token", a.handleToken))
	handle("GET /api/activity/path", authed("path", a.handlePath))
	handle("POST /api/buy/{activity}/{sig}", authed("buy", a.handleBuy))
	handle("POST /api/buy/{rest...}", authed("buy", func(w http.ResponseWriter, r *http.Request) {
		a.refuse(w, r, "token", http.StatusForbidden, "token", "no valid buy path")
	}))
	handle("GET /api/result/{reservation}", authed("result", a.handleResult))
	handle("POST /api/events/{reservation}/ticket", authed("ticket", a.handleTicket))
	handle("GET /api/events/{reservation}", a.route("events", a.handleEvents))
	handle("GET /api/ws/{reservation}", a.route("ws", a.handleWS))
	handle("POST /api/pay", authed("pay", a.handlePay))
	handle("POST /api/pay/fake", authed("pay", a.handleFakePay))
	handle("POST /api/payments/callback", a.route("payment_callback", a.p.pay.h.ServeHTTP))
	a.fairRoutes(handle, authed)
	if a.cfg.Demo {
		// DEMO ONLY (-demo): lets scripts, the load generator and the
		// browser test pass the captcha. Never enable in production.
		handle("GET /api/demo/captcha/{id}", authed("demo_captcha", a.handleDemoCaptcha))
		handle("GET /api/demo/invariants", a.route("demo_invariants", a.handleInvariants))
	}
	return a.withRequestID(guard(mux))
}

// authenticated runs h for a signed-in caller (the session's user in the
// request's state, which userOf reads) and refuses anyone else in the API's
// one JSON error shape: 401 for a missing, malformed or unknown token, 503
// when the session store cannot answer (never its error text).
func (a *App) authenticated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, err := bearerToken(r)
		var user string
		if err == nil {
			user, err = a.p.authn.Authenticate(r.Context(), tok)
		}
		switch {
		case err == nil && user != "":
			if st := stateOf(r.Context()); st != nil {
				st.user = user // in place: no copy of the request
			} else {
				r = r.WithContext(risk.WithUser(r.Context(), user))
			}
			h(w, r)
		case err == nil, errors.Is(err, risk.ErrRefused):
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeErr(w, http.StatusUnauthorized, "unauthorized", "sign in first")
		default:
			a.fail(w, r, "auth", err)
		}
	}
}

// bearerToken is the request's session token: the Authorization header's
// "Bearer <token>" (risk.ParseBearer; its errors wrap risk.ErrRefused).
func bearerToken(r *http.Request) (string, error) {
	return risk.ParseBearer(r.Header.Get("Authorization"))
}

// userOf returns the authenticated user's ID (authenticated put it in the
// request's state, or, outside withRequestID, in ctx by risk.WithUser).
// It is the string every library package takes (a demo user's decimal ID).
func userOf(r *http.Request) (string, bool) {
	if st := stateOf(r.Context()); st != nil && st.user != "" {
		return st.user, true
	}
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
