package operate

import (
	"context"
	"fmt"
	"time"

	"github.com/seckillkit/seckill/order"
	"gorm.io/gorm"
)

// PruneDedup deletes at most limit dedup rows (message_dedup, or the table
// [order.WithTables] names) created before before, and returns how many it
// deleted. Keep rows far longer than any
// redelivery can take (Kafka retention, outbox retry horizon): a message
// redelivered after its row is gone is deduplicated only by the order's
// unique reservation_id, and a redelivered FAILED message would be written
// again (and its reservation released again, which is idempotent). The rows
// are also the [Fence]: once a released reservation's row is pruned, a
// message of that reservation still in flight could become an order, so the
// horizon must exceed the age of the oldest message that can still arrive.
func PruneDedup(ctx context.Context, db *gorm.DB, before time.Time, limit int, opts ...order.TableOption) (int64, error) {
	if db == nil {
		return 0, fmt.Errorf("%w: PruneDedup needs a db", order.ErrInvalidConfig)
	}
	if limit < 1 {
		return 0, fmt.Errorf("%w: prune limit must be positive", order.ErrInvalidConfig)
	}
	t, err := order.TablesOf(opts...)
	if err != nil {
		return 0, err
	}
	// Any rows older than the horizon, not the oldest first: message_dedup
	// has no index on created_at (it would slow every order's insert), and
	// without ORDER BY the scan stops at limit matches instead of sorting
	// the table.
	var ids []string
	if err := db.WithContext(ctx).Table(t.Dedup).Where("created_at < ?", before).
		Limit(limit).Pluck("msg_id", &ids).Error; err != nil {
		return 0, fmt.Errorf("order: prune dedup: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	res := db.WithContext(ctx).Table(t.Dedup).Where("msg_id IN ? AND created_at < ?", ids, before).Delete(&order.Dedup{})
	if res.Error != nil {
		return 0, fmt.Errorf("order: prune dedup: %w", res.Error)
	}
	return res.RowsAffected, nil
}
