package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/stock"
)

// sale is the activity this node sells, as the database has it.
type sale struct {
	act      order.Activity // the DB row as seeded (or joined)
	key      string         // its ID, as every package takes it
	pathOpen time.Time      // when the signed buy path is released

	// Read-path cache of the remaining stock (the page polls it).
	remaining atomic.Int64
	remainAt  atomic.Int64 // unix nanos of the last refresh

	// variants of the sale (variants.go), as their rows were seeded or
	// joined, in the page's order; nil for a sale without variants.
	variants []stock.Variant
	vcache   variantCache
}

// prepareSale creates the tables and the demo activity row (kept if it
// exists: a second instance or a restart joins the running sale).
func prepareSale(ctx context.Context, gdb *gorm.DB, cfg Config, log *slog.Logger) (*sale, error) {
	if err := order.AutoMigrate(ctx, gdb); err != nil {
		return nil, fmt.Errorf("migrate order tables: %w", err)
	}
	if err := outbox.AutoMigrate(ctx, gdb); err != nil {
		return nil, fmt.Errorf("migrate outbox: %w", err)
	}
	price, err := parseCents(cfg.Price)
	if err != nil {
		return nil, fmt.Errorf("price: %w", err)
	}
	orig, err := parseCents(cfg.Original)
	if err != nil {
		return nil, fmt.Errorf("original price: %w", err)
	}
	key := strconv.FormatInt(cfg.ActivityID, 10)
	now := time.Now().UTC().Truncate(time.Second)
	act := order.Activity{
		ID: key, Name: "Flash sale #" + key, ProductID: 1000 + cfg.ActivityID,
		ProductName: cfg.ProductName, OriginalPrice: orig, ActivityPrice: price,
		Stock: cfg.Stock, Remaining: cfg.Stock, PerUserLimit: cfg.PerUserLimit, Status: 1,
		Start: now.Add(cfg.StartIn), End: now.Add(cfg.StartIn + cfg.Duration),
	}
	s := &sale{key: key}
	db := gdb.WithContext(ctx)
	var existing order.Activity
	err = db.Where("id = ?", act.ID).Take(&existing).Error
	switch {
	case err == nil:
		s.act = existing
		log.Info("joining the existing activity", "activity", existing.ID, "start", existing.Start, "stock", existing.Remaining)
	case errors.Is(err, gorm.ErrRecordNotFound):
		if err := db.Create(&act).Error; err != nil {
			return nil, fmt.Errorf("seed activity: %w", err)
		}
		s.act = act
	default:
		return nil, fmt.Errorf("read activity: %w", err)
	}
	s.act.Start, s.act.End = s.act.Start.UTC(), s.act.End.UTC()
	s.pathOpen = s.act.Start.Add(-cfg.PathLead)
	if len(cfg.Variants) > 0 {
		if err := seedVariants(ctx, gdb, s.act, cfg.Variants); err != nil {
			return nil, err
		}
		var rows []order.Activity
		if err := db.Where("id LIKE ?", key+"/%").Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read variants: %w", err)
		}
		_, byParent := variantRows(rows, cfg.Variants)
		s.variants = byParent[key]
	}
	return s, nil
}

func parseCents(s string) (order.Cents, error) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 || len(frac) > 2 {
		return 0, fmt.Errorf("bad amount %q", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad amount %q", s)
	}
	return order.Cents(w*100 + f), nil
}

// cachedRemaining reads the stock for display at most every 200 ms (one
// caller refreshes, the others use the cached value): the read path never
// adds load to the write path's Redis.
func (a *App) cachedRemaining(ctx context.Context) int64 {
	s := a.sale
	now := time.Now().UnixNano()
	last := s.remainAt.Load()
	if now-last > int64(200*time.Millisecond) && s.remainAt.CompareAndSwap(last, now) {
		if len(s.variants) > 0 {
			var n int64
			for _, v := range a.saleVariants(ctx) {
				n += max(v.Remaining, 0)
			}
			s.remaining.Store(n)
			return n
		}
		if n, err := a.p.stock.Remaining(ctx, s.act.ID); err == nil {
			s.remaining.Store(n + a.poolRemaining(ctx, s.act.ID))
		} else if errors.Is(err, stock.ErrNotLoaded) {
			s.remaining.Store(s.act.Remaining)
		}
	}
	return s.remaining.Load()
}
