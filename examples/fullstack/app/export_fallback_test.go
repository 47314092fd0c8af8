package app

import "github.com/seckillkit/seckill/stock/dbfallback"

// Fallback is the service's DB fallback pool store (nil without
// -db-fallback-quota).
func Fallback(a *App) *dbfallback.Store { return a.p.fallback }
