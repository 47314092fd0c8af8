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
	authed := func(name string, h http.HandlerFunc) http.Handler {
		return a.route(name, a.authenticated(h))
	}
	mux.Handle("GET /{$}", staticHandler())
	mux.Handle("GET /static/", staticHandler())
	mux.Handle("GET /healthz", a.route("healthz", a.handleHealth))
	mux.Handle("GET /metrics", a.handleMetrics())
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
		tok, err := a.p.auth.Token(r)
		var user string
		if err == nil {
			user, err = a.p.authn.Authenticate(r.Context(), tok)
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
