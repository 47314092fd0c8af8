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

// VariantCounts is one variant's part of the invariants (a sale with
// variants, variants.go), counted from Redis (its ledger) and the DB (its
// activity row "<sale>/<variant>", its adjustments and its orders).
type VariantCounts struct {
	ID           string `json:"id"`
	Initial      int64  `json:"initial"`        // its stock as seeded (or joined)
	Adjusted     int64  `json:"adjusted"`       // Σ top-ups − withdrawals of the variant (the DB ledger)
	Total        int64  `json:"total"`          // the DB row's total_stock
	PerUserLimit int64  `json:"per_user_limit"` // the DB row's user_limit
	// Redis: the variant's ledger.
	RedisLoaded     bool  `json:"redis_loaded"`
	RedisTotal      int64 `json:"redis_total"`
	RedisRemain     int64 `json:"redis_remaining"`
	RedisLive       int64 `json:"redis_live"`         // reservations held
	RedisHeld       int64 `json:"redis_held"`         // their units
	RedisReleased   int64 `json:"redis_released"`     // reservations released
	RedisMaxPerUser int64 `json:"redis_max_per_user"` // most units one buyer holds in the ledger
	// The DB fallback pool of the variant ("<sale>/<variant>"; all 0
	// without -db-fallback-quota): what it can still sell, its held
	// reservations, their units, and the most units one buyer holds in it.
	PoolRemain     int64 `json:"pool_remaining"`
	PoolLive       int64 `json:"pool_live"`
	PoolHeld       int64 `json:"pool_held"`
	PoolMaxPerUser int64 `json:"pool_max_per_user"`
	// DB: the variant's row and orders.
	DBStock       int64            `json:"db_stock"`
	Orders        map[string]int64 `json:"orders"`        // by status
	LiveOrders    int64            `json:"live_orders"`   // units of CREATED, PAID, and REFUNDED not to the sale
	LiveCount     int64            `json:"live_count"`    // those orders
	RefundedSale  int64            `json:"refunded_sale"` // REFUNDED orders whose units went back on sale
	DistinctUsers int64            `json:"distinct_users"`
	MaxPerUser    int64            `json:"max_per_user"` // most live units one buyer holds
	InFlight      int64            `json:"in_flight"`    // held in Redis, no live order
}

// variantInvariants is Invariants for a sale with variants: each variant
// counted on its own (Variants), the activity-wide per-user counts over
// all of them (MaxPerUser from the DB, RedisMaxPerUser from the ledgers,
// against PerUserLimit), and the activity's figures as the variants' sums,
// so the checks of a sale without variants hold of the whole too.
func (a *App) variantInvariants(ctx context.Context) (Invariants, error) {
	s := a.sale
	iv := Invariants{Activity: s.act.ID, Orders: map[string]int64{}, PerUserLimit: s.act.PerUserLimit}
	redisPerUser, dbPerUser, poolPerUser := map[string]int64{}, map[string]int64{}, map[string]int64{}
	held := make([]map[string]bool, len(s.variants))
	for i, v := range s.variants {
		vc := VariantCounts{ID: v.ID, Initial: v.Stock, Orders: map[string]int64{}}
		h, err := a.variantLedger(ctx, stock.VariantOf(s.key, v.ID), &vc, redisPerUser)
		if err != nil {
			return iv, fmt.Errorf("variant %s: %w", v.ID, err)
		}
		if err := a.variantPool(ctx, stock.VariantOf(s.key, v.ID), &vc, h, poolPerUser); err != nil {
			return iv, fmt.Errorf("variant %s: %w", v.ID, err)
		}
		held[i] = h
		iv.Variants = append(iv.Variants, vc)
	}
	var dups int64
	err := a.in.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i := range iv.Variants {
			if err := variantDB(ctx, tx, stock.VariantOf(s.key, iv.Variants[i].ID), &iv.Variants[i], held[i], dbPerUser); err != nil {
				return fmt.Errorf("variant %s: %w", iv.Variants[i].ID, err)
			}
		}
		// No duplicate order: one order per reservation over the sale (its
		// orders, its variants' plain orders) and one line per line
		// reservation.
		t, err := order.TablesOf()
		if err != nil {
			return err
		}
		var n struct{ NAll, NDistinct int64 }
		if err := tx.Table(t.Order).Select("COUNT(*) AS n_all, COUNT(DISTINCT reservation_id) AS n_distinct").
			Where("activity_id = ? OR activity_id LIKE ?", s.key, s.key+"/%").Scan(&n).Error; err != nil {
			return fmt.Errorf("orders per reservation: %w", err)
		}
		dups = n.NAll - n.NDistinct
		if err := tx.Table(t.Line).Select("COUNT(*) AS n_all, COUNT(DISTINCT reservation_id) AS n_distinct").
			Where("activity_id LIKE ?", s.key+"/%").Scan(&n).Error; err != nil {
			return fmt.Errorf("lines per reservation: %w", err)
		}
		dups += n.NAll - n.NDistinct
		return nil
	}, &sql.TxOptions{ReadOnly: a.in.DBKind != "" && !strings.HasPrefix(a.in.DBKind, "sqlite"), Isolation: isolation(a.in.DBKind)})
	if err != nil {
		return iv, err
	}
	iv.DuplicateOrders = dups
	for _, vc := range iv.Variants {
		iv.Initial += vc.Initial
		iv.Adjusted += vc.Adjusted
		iv.Total += vc.Total
		iv.RedisTotal += vc.RedisTotal
		iv.RedisRemain += vc.RedisRemain
		iv.RedisLive += vc.RedisLive
		iv.RedisReleased += vc.RedisReleased
		iv.PoolRemain += vc.PoolRemain
		iv.PoolLive += vc.PoolLive
		iv.DBStock += vc.DBStock
		iv.LiveOrders += vc.LiveOrders
		iv.RefundedSale += vc.RefundedSale
		iv.InFlight += vc.InFlight
		for st, n := range vc.Orders {
			iv.Orders[st] += n
		}
	}
	iv.DistinctUsers = int64(len(dbPerUser))
	for _, n := range dbPerUser {
		iv.MaxPerUser = max(iv.MaxPerUser, n)
	}
	for _, n := range redisPerUser {
		iv.RedisMaxPerUser = max(iv.RedisMaxPerUser, n)
	}
	for _, n := range poolPerUser {
		iv.PoolMaxPerUser = max(iv.PoolMaxPerUser, n)
	}
	bl, err := outbox.Stats(ctx, a.in.DB)
	if err != nil {
		return iv, fmt.Errorf("outbox: %w", err)
	}
	iv.OutboxPending = bl.Pending
	iv.Settled = iv.InFlight == 0 && iv.OutboxPending == 0
	return iv, nil
}

// variantLedger reads a variant's ledger into vc, adds each buyer's held
// units to perUser (the activity-wide count) and returns the IDs held.
func (a *App) variantLedger(ctx context.Context, activity string, vc *VariantCounts, perUser map[string]int64) (map[string]bool, error) {
	st, err := a.p.stock.Stats(ctx, activity)
	if err != nil {
		return nil, fmt.Errorf("stock stats: %w", err)
	}
	vc.RedisLoaded, vc.RedisRemain, vc.RedisTotal = st.Loaded, st.Remaining, st.Total
	// HSCAN may return an entry more than once: keep the last per ID.
	last := map[string]stock.Reservation{}
	var cursor uint64
	for {
		page, next, err := a.p.stock.Reservations(ctx, activity, cursor, 1000)
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		for _, r := range page {
			last[r.ID] = r
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	held, mine := map[string]bool{}, map[string]int64{}
	for id, r := range last {
		switch r.State {
		case stock.Held:
			held[id] = true
			vc.RedisHeld += r.Qty
			mine[r.User] += r.Qty
			perUser[r.User] += r.Qty
		case stock.Freed:
			vc.RedisReleased++
		}
	}
	vc.RedisLive = int64(len(held))
	for _, n := range mine {
		vc.RedisMaxPerUser = max(vc.RedisMaxPerUser, n)
	}
	return held, nil
}

// variantPool reads the DB fallback pool of a variant into vc (nothing
// without one), adds its held reservations to held (their IDs: a pool
// reservation without a live order is in flight too) and each buyer's
// held units to perUser (the activity-wide count in the pool).
func (a *App) variantPool(ctx context.Context, activity string, vc *VariantCounts, held map[string]bool, perUser map[string]int64) error {
	if !a.hasPool(activity) {
		return nil
	}
	st, err := a.p.fallback.Stats(ctx, activity)
	if err != nil {
		return fmt.Errorf("db fallback pool: %w", err)
	}
	vc.PoolRemain = st.Remaining
	rs, err := a.poolReservations(ctx, activity)
	if err != nil {
		return err
	}
	mine := map[string]int64{}
	for _, r := range rs {
		held[r.ID] = true
		vc.PoolLive++
		vc.PoolHeld += r.Qty
		mine[r.User] += r.Qty
		perUser[r.User] += r.Qty
	}
	for _, n := range mine {
		vc.PoolMaxPerUser = max(vc.PoolMaxPerUser, n)
	}
	return nil
}

// variantDB reads a variant's DB side into vc (in the caller's read
// transaction), adds each buyer's live units to perUser and counts the
// reservations held in Redis without a live order (in flight).
func variantDB(ctx context.Context, tx *gorm.DB, id string, vc *VariantCounts, held map[string]bool, perUser map[string]int64) error {
	var row order.Activity
	if err := tx.Select("stock, total_stock, user_limit").Where("id = ?", id).Take(&row).Error; err != nil {
		return fmt.Errorf("activity row: %w", err)
	}
	vc.DBStock, vc.Total, vc.PerUserLimit = row.Remaining, row.Stock, row.PerUserLimit
	// operate.Adjustments takes a plain activity ID only: the ledger is
	// read as it does, for the variant's ID.
	t, err := order.TablesOf()
	if err != nil {
		return err
	}
	var adj []operate.Adjustment
	if err := tx.Table(t.Adjust).Where("activity_id = ?", id).Find(&adj).Error; err != nil {
		return fmt.Errorf("adjustments: %w", err)
	}
	for _, x := range adj {
		vc.Adjusted += x.Delta
	}
	var byStatus []struct {
		Status string
		N      int64
	}
	if err := tx.Model(&order.Order{}).Select("status, COUNT(*) AS n").Where("activity_id = ?", id).Group("status").Scan(&byStatus).Error; err != nil {
		return fmt.Errorf("orders: %w", err)
	}
	for _, r := range byStatus {
		vc.Orders[r.Status] = r.N
	}
	if err := tx.Model(&order.Order{}).Where("activity_id = ? AND status = ? AND restock = ?", id, order.OrderRefunded, "sale").Count(&vc.RefundedSale).Error; err != nil {
		return fmt.Errorf("refunded orders: %w", err)
	}
	var live []order.Order
	if err := tx.Select("user_id, qty, reservation_id").Where("activity_id = ? AND (status IN ? OR status = ? AND restock <> ?)", id,
		[]string{order.OrderCreated, order.OrderPaid}, order.OrderRefunded, "sale").Find(&live).Error; err != nil {
		return fmt.Errorf("live orders: %w", err)
	}
	// A checkout's variant buy is an order with one line (filed under the
	// sale, its line under the variant, stock entry "<id>#0"): the lines
	// of the variant count as its orders, each in its own state (its
	// order's while it follows it).
	var lines []struct {
		UserID, ReservationID, Status, Restock string
		Qty                                    int64
	}
	if err := tx.Table(t.Line+" AS l").Joins("JOIN "+t.Order+" AS o ON o.order_no = l.order_no").
		Select("l.user_id, l.reservation_id, l.qty, l.restock, CASE WHEN l.status = '' THEN o.status ELSE l.status END AS status").
		Where("l.activity_id = ?", id).Scan(&lines).Error; err != nil {
		return fmt.Errorf("order lines: %w", err)
	}
	for _, l := range lines {
		vc.Orders[l.Status]++
		switch {
		case l.Status == order.OrderRefunded && l.Restock == "sale":
			vc.RefundedSale++
		case l.Status == order.OrderCreated, l.Status == order.OrderPaid, l.Status == order.OrderRefunded:
			live = append(live, order.Order{UserID: l.UserID, Qty: l.Qty, ReservationID: l.ReservationID})
		}
	}
	mine, liveResv := map[string]int64{}, map[string]bool{}
	for _, o := range live {
		vc.LiveOrders += o.Qty
		mine[o.UserID] += o.Qty
		perUser[o.UserID] += o.Qty
		liveResv[o.ReservationID] = true
	}
	vc.LiveCount = int64(len(live))
	vc.DistinctUsers = int64(len(mine))
	for _, n := range mine {
		vc.MaxPerUser = max(vc.MaxPerUser, n)
	}
	for r := range held {
		if !liveResv[r] {
			vc.InFlight++
		}
	}
	return nil
}
