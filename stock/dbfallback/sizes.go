package dbfallback

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/stock"
)

// maxSizes is the most sizes of one sale: stock's limit on an activity's
// variants.
const maxSizes = 256

// sizeSep separates a sale from its size in a size's pool ID
// ([stock.VariantOf]); it is not in [stock.ValidID]'s alphabet.
const sizeSep = '/'

// saleOf returns the sale of a size's pool ID "<sale>/<size>", and false
// for a plain activity ID.
func saleOf(activity string) (string, bool) {
	if i := strings.IndexByte(activity, sizeSep); i >= 0 {
		return activity[:i], true
	}
	return activity, false
}

// checkActivity returns nil for the ID of a pool: a plain activity ID
// ([stock.ValidID]) or a size's, "<sale>/<size>" with both parts ValidID;
// otherwise an error wrapping [stock.ErrInvalidArgument].
func checkActivity(id string) error {
	sale, size, ok := strings.Cut(id, string(sizeSep))
	if !ok {
		return checkID(stock.ErrInvalidArgument, "activity ID", id)
	}
	if err := checkID(stock.ErrInvalidArgument, "activity ID", sale); err != nil {
		return err
	}
	return checkID(stock.ErrInvalidArgument, "size ID of activity "+sale, size)
}

// sizeRange returns the bounds of the pool IDs of sale's sizes: every
// "<sale>/<size>" is > lo and < hi, and no other ID is (a string between
// starts with sale, then '/', the byte before '0'; IDs compare byte for
// byte, and no ID holds a byte below '+', so PAD SPACE changes nothing).
func sizeRange(sale string) (lo, hi string) {
	return sale + string(sizeSep), sale + string(sizeSep+1)
}

// size is the pool Open gives one size of a sale.
type size struct {
	id string // "<sale>/<size>"
	pool
}

// sizesOf validates a sale in sizes and the quota, and returns the sale's
// own row (no units; its per-user limit over all sizes, its window, the
// number of sizes) and each size's pool.
func sizesOf(a stock.Activity, quota int64) (pool, []size, error) {
	if err := checkID(stock.ErrInvalidArgument, "activity ID", a.ID); err != nil {
		return pool{}, nil, err
	}
	sale, err := termsOf(a)
	if err != nil {
		return pool{}, nil, err
	}
	bad := func(format string, args ...any) (pool, []size, error) {
		_, err := badOpen("activity %s in sizes: "+format, append([]any{a.ID}, args...)...)
		return pool{}, nil, err
	}
	switch {
	case len(a.Variants) > maxSizes:
		return bad("%d sizes, at most %d", len(a.Variants), maxSizes)
	case quota < 0 || quota > maxQty:
		return bad("quota %d must be in 0..2^53-1 (per size, capped at the size's stock)", quota)
	case a.Shards > 1:
		return bad("a sale in sizes is not sharded (shards %d)", a.Shards)
	}
	sale.sizes = int64(len(a.Variants))
	out := make([]size, 0, len(a.Variants))
	seen := make(map[string]bool, len(a.Variants))
	var sum int64
	for _, v := range a.Variants {
		if err := checkID(stock.ErrInvalidArgument, "size ID of activity "+a.ID, v.ID); err != nil {
			return pool{}, nil, err
		}
		switch {
		case seen[v.ID]:
			return bad("size %s given twice", v.ID)
		case v.Stock < 0 || v.Stock > maxQty:
			return bad("size %s: stock %d must be in 0..2^53-1", v.ID, v.Stock)
		case v.PerUserLimit < 0 || v.PerUserLimit > maxQty:
			return bad("size %s: per-user limit %d must be in 0..2^53-1", v.ID, v.PerUserLimit)
		}
		seen[v.ID] = true
		if sum += v.Stock; sum > maxQty {
			return bad("the sizes' stock exceeds 2^53-1")
		}
		p := pool{quota: min(quota, v.Stock), limit: v.PerUserLimit, startMs: sale.startMs, endMs: sale.endMs}
		p.remaining = p.quota
		if p.limit == 0 {
			p.limit = sale.limit
		}
		out = append(out, size{id: stock.VariantOf(a.ID, v.ID), pool: p})
	}
	if a.Stock != 0 && a.Stock != sum {
		return bad("stock %d is neither 0 nor the sizes' sum %d", a.Stock, sum)
	}
	return sale, out, nil
}

// openSizes is Open of a sale in sizes: the sale's row and one pool per
// size, in one transaction; or, when the sale's row exists, the comparison
// of its terms with a's.
func (s *Store) openSizes(ctx context.Context, a stock.Activity, quota int64) error {
	sale, sizes, err := sizesOf(a, quota)
	if err != nil {
		return err
	}
	db := s.db.WithContext(ctx)
	const insert = " (activity_id, quota, remaining, drained, per_user_limit, start_ms, end_ms, updated_ms, sizes) VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?)"
	for i := 1; ; i++ {
		nowMs := s.clock.Now().UnixMilli()
		// The sale's row first, as every writer of its sizes locks it: a
		// concurrent first Open queues on it.
		err = db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("INSERT INTO "+s.pool+insert, a.ID, 0, 0, sale.limit, sale.startMs, sale.endMs, nowMs, sale.sizes).Error; err != nil {
				return err
			}
			for _, z := range sizes {
				if err := tx.Exec("INSERT INTO "+s.pool+insert, z.id, z.quota, z.quota, z.limit, z.startMs, z.endMs, nowMs, 0).Error; err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil || !isDeadlock(err) || i == attempts {
			break
		}
	}
	if err == nil {
		return nil
	}
	if !isDuplicate(err) {
		return fmt.Errorf("dbfallback: open activity %s in sizes: %w", a.ID, err)
	}
	return s.sameSizes(db, a.ID, sale, sizes)
}

// sameSizes compares the rows of a sale in sizes with the terms asked: nil
// when they are the same, else [ErrPoolConflict].
func (s *Store) sameSizes(db *gorm.DB, activity string, sale pool, sizes []size) error {
	got, ok, err := s.readTerms(db, activity)
	if err != nil {
		return fmt.Errorf("dbfallback: open activity %s in sizes: %w", activity, err)
	}
	switch {
	case !ok:
		// Only a size's row was there: not written by an Open of this
		// sale (it writes the sale's row with them).
		return fmt.Errorf("%w: activity %s has pools of sizes but no sale row", ErrPoolConflict, activity)
	case got.sizes == 0:
		return fmt.Errorf("%w: activity %s has a plain pool; asked a sale in %d sizes", ErrPoolConflict, activity, sale.sizes)
	case got.sizes != sale.sizes || got.limit != sale.limit || got.startMs != sale.startMs || got.endMs != sale.endMs:
		return fmt.Errorf("%w: activity %s has %d sizes, limit %d, window [%d, %d) ms; asked %d sizes, limit %d, window [%d, %d) ms",
			ErrPoolConflict, activity, got.sizes, got.limit, got.startMs, got.endMs, sale.sizes, sale.limit, sale.startMs, sale.endMs)
	}
	for _, z := range sizes {
		p, ok, err := s.readTerms(db, z.id)
		if err != nil {
			return fmt.Errorf("dbfallback: open activity %s in sizes: %w", activity, err)
		}
		if !ok {
			return fmt.Errorf("%w: activity %s has no size %s", ErrPoolConflict, activity, z.id)
		}
		if err := conflictErr(z.id, p, z.pool); err != nil {
			return err
		}
	}
	return nil
}

// saleHeld sums the units user holds over every size of sale. Like held,
// it is a plain read made under the sale row's lock, which every writer
// of the sale's sizes' reservation rows takes first and keeps to its
// commit.
func (s *Store) saleHeld(tx *gorm.DB, sale, user string) (int64, error) {
	lo, hi := sizeRange(sale)
	var n int64
	// A join from the sale's sizes (a range of the pool's key) into the
	// (activity_id, user_id) index: one lookup per size.
	err := tx.Raw("SELECT COALESCE(SUM(r.qty), 0) FROM "+s.pool+" p JOIN "+s.resv+" r ON r.activity_id = p.activity_id AND r.user_id = ?"+
		" WHERE p.activity_id > ? AND p.activity_id < ? AND r.state = ?", user, lo, hi, stateHeld).Row().Scan(&n)
	return n, err
}

// lockSale locks the sale's row of a size's pool ID, the first lock of
// every writer of the size's reservations; ok is false when activity is
// not a size of a sale opened in sizes (its pool is then not for sale).
// For a plain activity ID it does nothing and returns ok.
func (s *Store) lockSale(tx *gorm.DB, activity string) (sale pool, ok bool, err error) {
	name, isSize := saleOf(activity)
	if !isSize {
		return pool{}, true, nil
	}
	sale, ok, err = s.lockPool(tx, name)
	return sale, ok && sale.sizes > 0, err
}
