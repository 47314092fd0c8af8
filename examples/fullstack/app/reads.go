package app

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"
)

// Reads: the activity, health, and (demo) the invariants.

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
	SaleMode      string    `json:"sale_mode,omitempty"` // queue or draw (fairsale.go); absent in fcfs mode
	// Variants of a sale sold in sizes (variants.go), each with its units
	// left and whether it is sold out; absent for a sale without.
	Variants     []variantView `json:"variants,omitempty"`
	PerUserLimit int64         `json:"per_user_limit"`
}

func (a *App) handleActivity(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, activityView{
		ID: a.sale.act.ID, Name: a.sale.act.Name, ProductName: a.sale.act.ProductName,
		Price: a.sale.act.ActivityPrice.String(), OriginalPrice: a.sale.act.OriginalPrice.String(),
		TotalStock: a.sale.act.Stock, Remaining: a.cachedRemaining(r.Context()),
		StartTime: a.sale.act.Start, EndTime: a.sale.act.End, PathOpenTime: a.sale.pathOpen, SaleMode: a.fairMode(),
		ServerTime: time.Now().UTC(), Demo: a.cfg.Demo, Variants: a.saleVariants(r.Context()), PerUserLimit: a.sale.act.PerUserLimit,
	})
}

// handleHealth answers 200 {"status":"ok"} or 503 {"status":"degraded"}
// for load balancers. The details — which servers, the breakers, which
// ping failed — go only to an operator (operator: the metrics token, or
// demo mode); the reasons go to the log, never to the caller.
func (a *App) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	out := map[string]any{}
	code := http.StatusOK
	if err := a.in.Redis.Ping(ctx).Err(); err != nil {
		a.logger(r.Context()).Warn("health: redis ping failed", "err", err)
		out["redis_error"], code = "ping failed", http.StatusServiceUnavailable
	}
	if sqlDB, err := a.in.DB.DB(); err != nil || sqlDB.PingContext(ctx) != nil {
		a.logger(r.Context()).Warn("health: database ping failed")
		out["db_error"], code = "ping failed", http.StatusServiceUnavailable
	}
	status := map[bool]string{true: "ok", false: "degraded"}[code == http.StatusOK]
	if !a.operator(r) {
		writeJSON(w, code, map[string]string{"status": status})
		return
	}
	out["status"], out["redis"], out["db"], out["kafka"] = status, a.in.RedisKind, a.in.DBKind, a.in.KafkaKind
	out["breaker_redis"], out["breaker_kafka"] = a.p.brRedis.State().String(), a.p.brKafka.State().String()
	writeJSON(w, code, out)
}

// operator reports whether r may read the node's internals (/metrics,
// /healthz's details): it carries the metrics token, or the node runs the
// demo (the embedded quick start, where everything is on show).
func (a *App) operator(r *http.Request) bool {
	if a.cfg.MetricsToken == "" {
		return a.cfg.Demo
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	// Fixed-length digests compared in constant time: neither the bytes
	// nor the length of the token leak through the time taken.
	got, want := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(a.cfg.MetricsToken))
	return subtle.ConstantTimeCompare(got[:], want[:])&boolInt(ok) == 1
}

// handleMetrics serves the Prometheus registry to an operator. Without a
// metrics token outside demo mode it does not exist (404); with one, a
// request without it is 401.
func (a *App) handleMetrics() http.Handler {
	prom := a.m.handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case a.operator(r):
			prom.ServeHTTP(w, r)
		case a.cfg.MetricsToken == "":
			writeErr(w, http.StatusNotFound, "not_found", "not found")
		default:
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeErr(w, http.StatusUnauthorized, "unauthorized", "metrics need the metrics token")
		}
	})
}

func (a *App) handleInvariants(w http.ResponseWriter, r *http.Request) {
	iv, err := a.Invariants(r.Context())
	if err != nil {
		a.fail(w, r, "invariants", err)
		return
	}
	writeJSON(w, http.StatusOK, iv)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
