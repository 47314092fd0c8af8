package app

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/operate"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/stock"
)

// Invariants is what the node reads from its database and Redis to check
// the invariants of docs/ARCHITECTURE.md by counting (served at
// /api/demo/invariants in demo mode).
type Invariants struct {
	Activity      string           `json:"activity"`
	Initial       int64            `json:"initial"`  // the stock the sale was seeded with
	Adjusted      int64            `json:"adjusted"` // Σ top-ups − withdrawals (the DB's adjustment ledger)
	Total         int64            `json:"total"`    // the DB's total_stock: Initial + Adjusted when nothing drifted
	RedisTotal    int64            `json:"redis_total"`
	RedisRemain   int64            `json:"redis_remaining"`
	RedisLive     int64            `json:"redis_live"`
	RedisReleased int64            `json:"redis_released"`
	PoolRemain    int64            `json:"pool_remaining"` // DB fallback pool: units left (0 without one)
	PoolLive      int64            `json:"pool_live"`      // DB fallback pool: reservations held
	DBStock       int64            `json:"db_stock"`
	Orders        map[string]int64 `json:"orders"`
	LiveOrders    int64            `json:"live_orders"`   // CREATED, PAID, and REFUNDED not to the sale: units
	RefundedSale  int64            `json:"refunded_sale"` // REFUNDED orders whose units went back on sale
	DistinctUsers int64            `json:"distinct_users"`
	MaxPerUser    int64            `json:"max_per_user"`
	OutboxPending int64            `json:"outbox_pending"`
	InFlight      int64            `json:"in_flight"`
	Settled       bool             `json:"settled"`
	Fair          *FairCounts      `json:"fair,omitempty"` // the fair sale mode's counts (fairsale.go); absent in fcfs mode
	// A sale with variants (variant_invariants.go): each variant's counts,
	// the activity-wide per-user limit and the most units one buyer holds
	// over all variants in the Redis ledgers (MaxPerUser is the DB's), and
	// the orders beyond one per reservation. The figures above are then
	// the variants' sums.
	Variants        []VariantCounts `json:"variants,omitempty"`
	PerUserLimit    int64           `json:"per_user_limit"`
	RedisMaxPerUser int64           `json:"redis_max_per_user,omitempty"`
	PoolMaxPerUser  int64           `json:"pool_max_per_user,omitempty"` // the same in the DB fallback pools of the variants
	DuplicateOrders int64           `json:"duplicate_orders,omitempty"`
}

// Invariants counts, in Redis and the DB, everything the invariants need.
func (a *App) Invariants(ctx context.Context) (Invariants, error) {
	if len(a.sale.variants) > 0 {
		return a.variantInvariants(ctx)
	}
	iv := Invariants{Activity: a.sale.act.ID, Initial: a.sale.act.Stock, Orders: map[string]int64{}, PerUserLimit: a.sale.act.PerUserLimit}
	held, err := a.heldReservations(ctx, &iv)
	if err != nil {
		return iv, err
	}
	live, err := a.dbSnapshot(ctx, &iv)
	if err != nil {
		return iv, err
	}
	perUser := map[string]int64{}
	liveResv := map[string]bool{}
	for _, o := range live {
		iv.LiveOrders += o.Qty
		perUser[o.UserID] += o.Qty
		liveResv[o.ReservationID] = true
	}
	iv.DistinctUsers = int64(len(perUser))
	for _, n := range perUser {
		iv.MaxPerUser = max(iv.MaxPerUser, n)
	}
	for id := range held {
		if !liveResv[id] {
			iv.InFlight++
		}
	}
	bl, err := outbox.Stats(ctx, a.in.DB)
	if err != nil {
		return iv, fmt.Errorf("outbox: %w", err)
	}
	iv.OutboxPending = bl.Pending
	iv.Settled = iv.InFlight == 0 && iv.OutboxPending == 0
	if iv.Fair, err = a.fairCounts(ctx, live); err != nil {
		return iv, fmt.Errorf("fair sale: %w", err)
	}
	return iv, nil
}

// heldReservations reads the stock side into iv (Redis, and the DB pool
// when there is one) and returns the IDs of the reservations held there.
func (a *App) heldReservations(ctx context.Context, iv *Invariants) (map[string]bool, error) {
	st, err := a.p.stock.Stats(ctx, a.sale.act.ID)
	if err != nil {
		return nil, fmt.Errorf("stock stats: %w", err)
	}
	iv.RedisRemain, iv.RedisTotal = st.Remaining, st.Total
	// HSCAN may return an entry more than once: keep the last state per ID.
	states := map[string]stock.State{}
	var cursor uint64
	for {
		page, next, err := a.p.stock.Reservations(ctx, a.sale.act.ID, cursor, 1000)
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		for _, r := range page {
			states[r.ID] = r.State
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	held := map[string]bool{}
	for id, s := range states {
		switch s {
		case stock.Held:
			held[id] = true
		case stock.Freed:
			iv.RedisReleased++
		}
	}
	iv.RedisLive = int64(len(held))
	if a.p.fallback == nil {
		return held, nil
	}
	ps, err := a.p.fallback.Stats(ctx, a.sale.act.ID)
	if err != nil {
		return nil, fmt.Errorf("db fallback pool: %w", err)
	}
	iv.PoolRemain = ps.Remaining
	pool, err := a.poolHeld(ctx)
	if err != nil {
		return nil, err
	}
	iv.PoolLive = int64(len(pool))
	for id := range pool {
		held[id] = true
	}
	return held, nil
}

// dbSnapshot reads the DB side into iv in one read transaction (the stock,
// the adjustments and the orders from one snapshot) and returns the live
// orders.
func (a *App) dbSnapshot(ctx context.Context, iv *Invariants) ([]order.Order, error) {
	var live []order.Order
	id := a.sale.act.ID
	err := a.in.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var act order.Activity
		if err := tx.Select("stock, total_stock").Where("id = ?", id).Take(&act).Error; err != nil {
			return fmt.Errorf("activity: %w", err)
		}
		iv.DBStock, iv.Total = act.Remaining, act.Stock
		adj, err := operate.Adjustments(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("adjustments: %w", err)
		}
		for _, x := range adj {
			iv.Adjusted += x.Delta
		}
		var byStatus []struct {
			Status string
			N      int64
		}
		if err := tx.Model(&order.Order{}).Select("status, COUNT(*) AS n").Where("activity_id = ?", id).Group("status").Scan(&byStatus).Error; err != nil {
			return fmt.Errorf("orders: %w", err)
		}
		for _, r := range byStatus {
			iv.Orders[r.Status] = r.N
		}
		if err := tx.Model(&order.Order{}).Where("activity_id = ? AND status = ? AND restock = ?", id, order.OrderRefunded, "sale").Count(&iv.RefundedSale).Error; err != nil {
			return fmt.Errorf("refunded orders: %w", err)
		}
		if err := tx.Select("user_id, qty, reservation_id").Where("activity_id = ? AND (status IN ? OR status = ? AND restock <> ?)", id, []string{order.OrderCreated, order.OrderPaid}, order.OrderRefunded, "sale").Find(&live).Error; err != nil {
			return fmt.Errorf("live orders: %w", err)
		}
		return nil
	}, &sql.TxOptions{ReadOnly: a.in.DBKind != "" && !strings.HasPrefix(a.in.DBKind, "sqlite"), Isolation: isolation(a.in.DBKind)})
	return live, err
}

// isolation is a snapshot for MySQL and PostgreSQL (REPEATABLE READ:
// consistent read, snapshot isolation) and the default for SQLite (one
// connection: transactions are serial anyway).
func isolation(kind string) sql.IsolationLevel {
	if kind == "mysql" || kind == "postgres" {
		return sql.LevelRepeatableRead
	}
	return sql.LevelDefault
}
