package app

import (
	"context"
	"net/http"
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
}

func (a *App) handleActivity(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, activityView{
		ID: a.sale.act.ID, Name: a.sale.act.Name, ProductName: a.sale.act.ProductName,
		Price: a.sale.act.ActivityPrice.String(), OriginalPrice: a.sale.act.OriginalPrice.String(),
		TotalStock: a.sale.act.TotalStock, Remaining: a.cachedRemaining(r.Context()),
		StartTime: a.sale.act.StartTime, EndTime: a.sale.act.EndTime, PathOpenTime: a.sale.pathOpen,
		ServerTime: time.Now().UTC(), Demo: a.cfg.Demo,
	})
}

func (a *App) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	out := map[string]any{"redis": a.in.RedisKind, "db": a.in.DBKind, "kafka": a.in.KafkaKind,
		"breaker_redis": a.p.brRedis.State().String(), "breaker_kafka": a.p.brKafka.State().String()}
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

func (a *App) handleInvariants(w http.ResponseWriter, r *http.Request) {
	iv, err := a.Invariants(r.Context())
	if err != nil {
		a.fail(w, r, "invariants", err)
		return
	}
	writeJSON(w, http.StatusOK, iv)
}
