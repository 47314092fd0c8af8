package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Claiming. A claim takes a lease on up to batchSize due rows: it sets
// lease_owner to a token unique to this relay batch, moves next_attempt_at
// to the end of the lease (so every other relay's poll skips the row until
// the lease ends) and counts the attempt. The lease is only columns, so it
// survives crashes: a relay that dies mid-batch leaves rows that become due
// again when their lease ends. The claim transaction itself lasts
// milliseconds; no database lock is held while publishing.

// resolveClaimMode maps ClaimAuto to a concrete mode for the dialect:
// SKIP LOCKED where the database has it (gorm's dialector names "mysql",
// also for MariaDB, and "postgres"), the one-statement claim on SQLite.
func resolveClaimMode(m ClaimMode, dialect string) (ClaimMode, error) {
	if m != ClaimAuto {
		return m, nil
	}
	switch dialect {
	case "mysql", "postgres":
		return ClaimSkipLocked, nil
	case "sqlite", "sqlite3":
		return ClaimAtomicUpdate, nil
	}
	return 0, fmt.Errorf("%w: no claim strategy for database dialect %q (choose one with WithClaimMode)", ErrInvalidConfig, dialect)
}

// claim leases due rows to token and returns them (Attempts already
// counting this attempt).
func (r *Relay) claim(ctx context.Context, now time.Time, token string) ([]Message, error) {
	until := dbTime(now.Add(r.o.lease))
	if r.mode == ClaimAtomicUpdate {
		return r.claimAtomic(ctx, now, until, token)
	}
	return r.claimLocked(ctx, now, until, token)
}

func (r *Relay) claimLocked(ctx context.Context, now, until time.Time, token string) ([]Message, error) {
	lock := clause.Locking{Strength: clause.LockingStrengthUpdate}
	if r.mode == ClaimSkipLocked {
		lock.Options = clause.LockingOptionsSkipLocked
	}
	var rows []Message
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// SELECT * … WHERE status = ? AND next_attempt_at <= ?
		// ORDER BY next_attempt_at, id LIMIT n FOR UPDATE [SKIP LOCKED]
		err := tx.Table(r.table).Clauses(lock).Where("status = ? AND next_attempt_at <= ?", StatusPending, now).
			Order("next_attempt_at, id").Limit(r.o.batchSize).Find(&rows).Error
		if err != nil {
			return fmt.Errorf("select due: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]int64, len(rows))
		for i := range rows {
			ids[i] = rows[i].ID
		}
		if err := tx.Exec(r.sql.leaseByID, token, until, now, ids).Error; err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		for i := range rows { // what the UPDATE wrote
			rows[i].LeaseOwner, rows[i].NextAttemptAt, rows[i].UpdatedAt = token, until, now
			rows[i].Attempts++
		}
		return nil
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("outbox: claim (%s): %w", r.mode.name(), err)
	}
	return rows, nil
}

func (r *Relay) claimAtomic(ctx context.Context, now, until time.Time, token string) ([]Message, error) {
	d := r.db.WithContext(ctx)
	res := d.Exec(r.sql.leaseAtomic, token, until, now, StatusPending, now, r.o.batchSize)
	if res.Error != nil {
		return nil, fmt.Errorf("outbox: claim (%s): %w", r.mode.name(), res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, nil
	}
	// (status, next_attempt_at) = (PENDING, until) hits the poll index;
	// lease_owner picks our rows among any sharing that instant.
	var rows []Message
	err := d.Table(r.table).Where("status = ? AND next_attempt_at = ? AND lease_owner = ?", StatusPending, until, token).
		Order("id").Find(&rows).Error
	if err != nil {
		// The rows stay leased and become due again when the lease ends.
		return nil, fmt.Errorf("outbox: read leased rows: %w", err)
	}
	return rows, nil
}
