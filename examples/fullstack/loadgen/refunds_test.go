package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// TestLoadWithPaymentsAndRefunds: every order paid (half through the fake
// provider's callback), every paid one refunded — to the sale, without
// restock and to the shop in turn — and the run's invariants hold,
// counted after the refunds: the units refunded to the sale are back in
// the remaining stock and neither live nor cancelled, the others stay
// sold; every buyer's last word ("refunded") agrees with SQL.
func TestLoadWithPaymentsAndRefunds(t *testing.T) {
	embeddedOnly(t)
	ctx := context.Background()
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.StartIn, cfg.LogLevel, cfg.Stock, cfg.DemoUsers = "127.0.0.1:0", 0, "warn", 12, 40
	cfg.Demo, cfg.DemoWithRealServers = true, true
	require.NoError(t, cfg.Validate())
	lc := load.Config{Users: 40, Concurrency: 8, Drain: 2 * time.Minute, PayShare: 1, RefundShare: 1}
	shutdown, err := startEmbedded(ctx, cfg, &lc)
	require.NoError(t, err)
	defer shutdown()
	rep, err := load.Run(ctx, lc)
	require.NoError(t, err)
	assert.Empty(t, rep.Violations, "%s", rep)
	assert.Equal(t, 12, rep.Paid["200 paid"], "payments %v", rep.Paid)
	assert.Equal(t, map[string]int{"sale ok": 4, "none ok": 4, "shop ok": 4}, rep.Refunded)
	iv := rep.Server
	assert.Equal(t, int64(4), iv.RefundedSale)
	assert.Equal(t, 12, iv.Orders["REFUNDED"])
	assert.Equal(t, int64(8), iv.LiveOrders, "refunded without restock or to the shop: still sold")
	assert.Equal(t, int64(4), iv.RedisRemain, "refunded to the sale: back on sale")
	assert.True(t, rep.History.Truth)
	assert.Empty(t, rep.History.Violations)
}
