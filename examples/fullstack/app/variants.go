package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// A sale with variants (-variants "36=50,37=120,38=200"): each size is a
// keyed sub-stock of the sale (stock.Activity.Variants), with its own
// counter in Redis and its own activity row in the database, id
// "<sale>/<variant>" (stock.VariantOf; a variant's orders are filed under
// that ID and its DB stock is that row's). The sale's own row holds the
// name, the price, the window and the per-user limit over all variants;
// its stock is the variants' sum as seeded.

// maxSaleVariants is the most variants -variants takes (stock's limit).
const maxSaleVariants = 256

// parseVariants reads -variants: ID=STOCK[:LIMIT], comma separated, in
// the order the page shows them. LIMIT is the units of that variant one
// buyer may hold (default: the sale's -per-user-limit).
func parseVariants(s string) ([]stock.Variant, error) {
	var out []stock.Variant
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, rest, ok := strings.Cut(part, "=")
		id = strings.TrimSpace(id)
		if !ok {
			return nil, fmt.Errorf("variant %q: want ID=STOCK or ID=STOCK:LIMIT", part)
		}
		if !stock.ValidID(id) {
			return nil, fmt.Errorf("variant %q: the ID must be 1..%d bytes of [A-Za-z0-9._@+-]", part, stock.MaxIDLen)
		}
		if seen[id] {
			return nil, fmt.Errorf("variant %s given twice", id)
		}
		seen[id] = true
		units, lim, hasLim := strings.Cut(rest, ":")
		n, err := strconv.ParseInt(strings.TrimSpace(units), 10, 64)
		if err != nil || n < 0 || n > maxPerUserLimit {
			return nil, fmt.Errorf("variant %s: stock %q must be an integer in [0, 2^53-1]", id, units)
		}
		v := stock.Variant{ID: id, Stock: n}
		if hasLim {
			l, err := strconv.ParseInt(strings.TrimSpace(lim), 10, 64)
			if err != nil || l < 1 || l > maxPerUserLimit {
				return nil, fmt.Errorf("variant %s: per-user limit %q must be an integer >= 1", id, lim)
			}
			v.PerUserLimit = l
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no variant given (want ID=STOCK[:LIMIT],...)")
	}
	if len(out) > maxSaleVariants {
		return nil, fmt.Errorf("%d variants, at most %d", len(out), maxSaleVariants)
	}
	return out, nil
}

// FormatVariants is the -variants form of vs (parseVariants' inverse).
func FormatVariants(vs []stock.Variant) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.ID + "=" + strconv.FormatInt(v.Stock, 10)
		if v.PerUserLimit > 0 {
			parts[i] += ":" + strconv.FormatInt(v.PerUserLimit, 10)
		}
	}
	return strings.Join(parts, ",")
}

// variantsSum is the units of all of vs.
func variantsSum(vs []stock.Variant) int64 {
	var n int64
	for _, v := range vs {
		n += v.Stock
	}
	return n
}

// registerVariantFlags binds -variants (SECKILL_VARIANTS); a bad value is
// reported by the flag parser, or by Validate when it came from the
// environment.
func (c *Config) registerVariantFlags(fs *flag.FlagSet) {
	if v := os.Getenv("SECKILL_VARIANTS"); v != "" {
		c.Variants, c.variantsErr = parseVariants(v)
	}
	fs.Func("variants", "sell the sale in variants (sizes, colours): ID=STOCK[:LIMIT], comma separated, e.g. 36=50,37=120,38=200 (the stock is their sum; LIMIT: units of that variant per buyer, default -per-user-limit) (env SECKILL_VARIANTS)",
		func(s string) error {
			vs, err := parseVariants(s)
			c.Variants, c.variantsErr = vs, nil
			return err
		})
}

// resolveVariants makes the stock the variants' sum unless -stock (or
// SECKILL_STOCK) was given, in which case Validate holds it to the sum.
func (c *Config) resolveVariants(set map[string]bool) {
	if len(c.Variants) > 0 && !set["stock"] && os.Getenv("SECKILL_STOCK") == "" {
		c.Stock = variantsSum(c.Variants)
	}
}

// variantsErrOf validates the variant settings against the rest.
func (c *Config) variantsErrOf() error {
	if c.variantsErr != nil {
		return fmt.Errorf("SECKILL_VARIANTS: %w", c.variantsErr)
	}
	if len(c.Variants) == 0 {
		return nil
	}
	key := strconv.FormatInt(c.ActivityID, 10)
	seen := map[string]bool{}
	for _, v := range c.Variants {
		switch {
		case !stock.ValidID(v.ID):
			return fmt.Errorf("variants: ID %q must be 1..%d bytes of [A-Za-z0-9._@+-]", v.ID, stock.MaxIDLen)
		case seen[v.ID]:
			return fmt.Errorf("variants: %s given twice", v.ID)
		case len(stock.VariantOf(key, v.ID)) > order.MaxIDLen:
			return fmt.Errorf("variants: %s: the variant's activity ID %q is longer than %d bytes", v.ID, stock.VariantOf(key, v.ID), order.MaxIDLen)
		case v.Stock < 0 || v.Stock > maxPerUserLimit:
			return fmt.Errorf("variants: %s: stock %d must be in [0, 2^53-1]", v.ID, v.Stock)
		case v.PerUserLimit < 0 || v.PerUserLimit > c.PerUserLimit:
			return fmt.Errorf("variants: %s: per-user limit %d must be between 1 and the sale's -per-user-limit %d", v.ID, v.PerUserLimit, c.PerUserLimit)
		}
		seen[v.ID] = true
	}
	switch sum := variantsSum(c.Variants); {
	case len(c.Variants) > maxSaleVariants:
		return fmt.Errorf("variants: %d given, at most %d", len(c.Variants), maxSaleVariants)
	case sum > maxPerUserLimit:
		return fmt.Errorf("variants: their stock %d exceeds 2^53-1", sum)
	case c.Stock != sum:
		return fmt.Errorf("stock %d is not the variants' sum %d: leave -stock out or give the sum", c.Stock, sum)
	case c.Shards != 1:
		return fmt.Errorf("a sale with variants is not sharded: -shards must be 1, got %d", c.Shards)
	case c.SaleMode != "" && c.SaleMode != SaleFCFS:
		return fmt.Errorf("a sale with variants runs first come, first served: -sale-mode must be %s, got %s", SaleFCFS, c.SaleMode)
	}
	return nil
}

// variantRow is the activity row of variant v of the sale row act.
func variantRow(act order.Activity, v stock.Variant) order.Activity {
	lim := v.PerUserLimit
	if lim == 0 {
		lim = act.PerUserLimit
	}
	return order.Activity{ID: stock.VariantOf(act.ID, v.ID), Name: act.Name + " / " + v.ID, ProductID: act.ProductID,
		ProductName: act.ProductName, OriginalPrice: act.OriginalPrice, ActivityPrice: act.ActivityPrice,
		Stock: v.Stock, Remaining: v.Stock, PerUserLimit: lim, Status: act.Status, Start: act.Start, End: act.End}
}

// seedVariants writes the variant rows of the sale that are not there yet
// (a restart or a second instance keeps the rows as they are).
func seedVariants(ctx context.Context, db *gorm.DB, act order.Activity, vs []stock.Variant) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, v := range vs {
			row := variantRow(act, v)
			if err := tx.Where("id = ?", row.ID).FirstOrCreate(&row).Error; err != nil {
				return fmt.Errorf("seed variant %s: %w", v.ID, err)
			}
		}
		return nil
	})
}

// variantRows groups the variant rows among rows ("<activity>/<variant>")
// by their activity, each activity's variants in the order of want (the
// sale's configured order; others follow by ID).
func variantRows(rows []order.Activity, want []stock.Variant) (plain []order.Activity, byParent map[string][]stock.Variant) {
	byParent = map[string][]stock.Variant{}
	for _, r := range rows {
		parent, v, ok := strings.Cut(r.ID, "/")
		if !ok {
			plain = append(plain, r)
			continue
		}
		byParent[parent] = append(byParent[parent], stock.Variant{ID: v, Stock: r.Stock, PerUserLimit: r.PerUserLimit})
	}
	rank := map[string]int{}
	for i, v := range want {
		rank[v.ID] = i
	}
	for _, vs := range byParent {
		slices.SortStableFunc(vs, func(x, y stock.Variant) int {
			rx, okx := rank[x.ID]
			ry, oky := rank[y.ID]
			switch {
			case okx && oky:
				return rx - ry
			case okx:
				return -1
			case oky:
				return 1
			}
			return strings.Compare(x.ID, y.ID)
		})
	}
	return plain, byParent
}

// variantView is one variant as the page shows it.
type variantView struct {
	ID        string `json:"id"`
	Total     int64  `json:"total_stock"` // its units on sale (the DB row's total)
	Remaining int64  `json:"remaining"`   // units left in Redis (-1: not loaded)
	SoldOut   bool   `json:"sold_out"`
	Limit     int64  `json:"per_user_limit"`
}

// variantCache is the page's read of the variants, refreshed at most every
// 200 ms like the remaining stock (one caller refreshes, the others use
// the last read).
type variantCache struct {
	mu   sync.Mutex
	at   time.Time
	view []variantView
}

// saleVariants returns the sale's variants with their units left, for the
// page (nil for a sale without variants).
func (a *App) saleVariants(ctx context.Context) []variantView {
	s := a.sale
	if len(s.variants) == 0 {
		return nil
	}
	s.vcache.mu.Lock()
	defer s.vcache.mu.Unlock()
	if s.vcache.view != nil && time.Since(s.vcache.at) < 200*time.Millisecond {
		return s.vcache.view
	}
	s.vcache.at = time.Now()
	left := map[string]int64{}
	if vs, err := a.p.stock.Variants(ctx, s.key); err == nil {
		for _, v := range vs {
			left[v.ID] = v.Stock
		}
	} else if !errors.Is(err, stock.ErrNotLoaded) && s.vcache.view != nil {
		return s.vcache.view // Redis unreachable: the last read
	}
	out := make([]variantView, len(s.variants))
	for i, v := range s.variants {
		n, ok := left[v.ID]
		if !ok {
			n = v.Stock // not loaded yet: as seeded
		} else if n >= 0 {
			n += a.poolRemaining(ctx, stock.VariantOf(s.key, v.ID)) // its DB pool's units are on sale too
		}
		lim := v.PerUserLimit
		if lim == 0 {
			lim = s.act.PerUserLimit
		}
		out[i] = variantView{ID: v.ID, Total: v.Stock, Remaining: n, SoldOut: ok && n == 0, Limit: lim}
	}
	s.vcache.view = out
	return out
}

// variantOfSale reports whether activity is a variant of the sale
// ("<sale>/<variant>") and returns the variant's ID.
func (s *sale) variantOfSale(activity string) (string, bool) {
	parent, v, ok := strings.Cut(activity, "/")
	if !ok || parent != s.key {
		return "", false
	}
	return v, s.hasVariant(v)
}

// hasVariant reports whether v is one of the sale's variants.
func (s *sale) hasVariant(v string) bool {
	return slices.ContainsFunc(s.variants, func(x stock.Variant) bool { return x.ID == v })
}

// variantRule is the refusal of a buy's variant ("" when it is fine): a
// sale with variants needs one of its own, a sale without takes none.
func (s *sale) variantRule(v string) string {
	switch {
	case len(s.variants) == 0 && v != "":
		return "variant: this sale has no variants"
	case len(s.variants) == 0 || s.hasVariant(v):
		return ""
	case v == "":
		return "variant: pick one of " + s.variantList()
	}
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return "variant: " + strconv.Quote(v) + " is not one of " + s.variantList()
}

// variantList is the sale's variant IDs, comma separated.
func (s *sale) variantList() string {
	ids := make([]string, len(s.variants))
	for i, v := range s.variants {
		ids[i] = v.ID
	}
	return strings.Join(ids, ", ")
}

// ledgers are the stock ledgers of the sale: its activity, or each of its
// variants' ("<sale>/<variant>").
func (s *sale) ledgers() []string {
	if len(s.variants) == 0 {
		return []string{s.act.ID}
	}
	out := make([]string, len(s.variants))
	for i, v := range s.variants {
		out[i] = stock.VariantOf(s.key, v.ID)
	}
	return out
}

// loadVariants is the admin load's part for an activity with variants: a
// row per variant ("<activity>/<variant>", written when absent, as the
// activity's), and the variants as the stock loads them, each with the
// units its row has left.
func (b *adminBackend) loadVariants(ctx context.Context, row order.Activity, in []admin.Variant) ([]stock.Variant, error) {
	vs := make([]stock.Variant, len(in))
	for i, v := range in {
		if id := stock.VariantOf(row.ID, v.ID); len(id) > order.MaxIDLen {
			return nil, fmt.Errorf("%w: variant %s: the variant's activity ID %q is longer than %d bytes", admin.ErrInvalidArgument, v.ID, id, order.MaxIDLen)
		}
		vs[i] = stock.Variant{ID: v.ID, Stock: v.Stock, PerUserLimit: v.PerUserLimit}
	}
	db := b.a.in.DB
	if err := seedVariants(ctx, db, row, vs); err != nil {
		return nil, err
	}
	var rows []order.Activity
	if err := db.WithContext(ctx).Where("id LIKE ?", row.ID+"/%").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read variants: %w", err)
	}
	left := map[string]order.Activity{}
	for _, r := range rows {
		left[strings.TrimPrefix(r.ID, row.ID+"/")] = r
	}
	for i := range vs {
		r := left[vs[i].ID]
		vs[i].Stock, vs[i].PerUserLimit = r.Remaining, r.PerUserLimit
	}
	return vs, nil
}

// saleSoldOut reports whether the sale is sold out by this process's
// in-process flags (no I/O): its activity's, or, in sizes, every size's
// (stock.Deductor.SoldOut of the sale's ID reads them all).
func (a *App) saleSoldOut() bool { return a.p.units.SoldOut(a.sale.key) }
