package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// Audit row states.
const (
	// AuditAttempt: the row written before the action. A row left in this
	// state means the process stopped (or the audit database failed)
	// between the action and its record: the action may or may not have
	// happened; check the state.
	AuditAttempt = "attempt"
	// AuditOK: the action succeeded.
	AuditOK = "ok"
	// AuditFailed: the action was refused or failed; ErrorCode says why.
	AuditFailed = "failed"
)

// jsonText is a JSON document in a TEXT column (MEDIUMTEXT on MySQL, whose
// TEXT stops at 64 KiB).
type jsonText string

// GormDBDataType implements gorm's schema.GormDataTypeInterface per dialect.
func (jsonText) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "MEDIUMTEXT"
	}
	return "TEXT"
}

// auditRow is one row of the audit table.
type auditRow struct {
	ID             uint64     `gorm:"primaryKey;autoIncrement"`
	RequestID      string     `gorm:"size:64;not null"`
	Operator       string     `gorm:"size:128;not null"`
	Action         string     `gorm:"size:32;not null"`
	Activity       string     `gorm:"size:64;not null"`
	Target         string     `gorm:"size:160;not null"`
	Params         jsonText   `gorm:"not null"`
	StateBefore    jsonText   `gorm:"not null"`
	StateAfter     jsonText   `gorm:"not null"`
	Status         string     `gorm:"size:16;not null"`
	ErrorCode      string     `gorm:"size:40;not null"`
	HTTPStatus     int        `gorm:"column:http_status;not null"`
	Response       jsonText   `gorm:"not null"`
	IdempotencyKey *string    `gorm:"size:128"`
	Fingerprint    string     `gorm:"size:64;not null"`
	StartedAt      time.Time  `gorm:"not null"`
	FinishedAt     *time.Time ``
}

// auditIndexes are the audit table's secondary indexes, named after the
// table (index names are per schema on PostgreSQL and SQLite).
var auditIndexes = []struct {
	suffix  string
	unique  bool
	columns []string
}{
	// One idempotency key per operator; NULL keys (no header) never clash.
	{"idem", true, []string{"operator", "idempotency_key"}},
	{"activity", false, []string{"activity", "id"}},
}

type auditLog struct {
	db    *gorm.DB
	table string
}

// migrate creates or updates the audit table and its indexes.
func (a auditLog) migrate(ctx context.Context) error {
	d := a.db.WithContext(ctx)
	if d.Dialector.Name() == "mysql" {
		d = d.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	}
	if err := d.Table(a.table).AutoMigrate(&auditRow{}); err != nil {
		return fmt.Errorf("admin: migrate %s: %w", a.table, err)
	}
	m := d.Migrator()
	for _, ix := range auditIndexes {
		name := "idx_" + a.table + "_" + ix.suffix
		if m.HasIndex(a.table, name) {
			continue
		}
		var b strings.Builder
		b.WriteString("CREATE ")
		if ix.unique {
			b.WriteString("UNIQUE ")
		}
		b.WriteString("INDEX ")
		d.Dialector.QuoteTo(&b, name)
		b.WriteString(" ON ")
		d.Dialector.QuoteTo(&b, a.table)
		b.WriteString(" (")
		for i, c := range ix.columns {
			if i > 0 {
				b.WriteString(", ")
			}
			d.Dialector.QuoteTo(&b, c)
		}
		b.WriteString(")")
		if err := d.Exec(b.String()).Error; err != nil {
			return fmt.Errorf("admin: migrate %s: index %s: %w", a.table, name, err)
		}
	}
	return nil
}

func (a auditLog) insert(ctx context.Context, r *auditRow) error {
	return a.db.WithContext(ctx).Table(a.table).Create(r).Error
}

// finish records the outcome of the row's action.
func (a auditLog) finish(ctx context.Context, r *auditRow) error {
	res := a.db.WithContext(ctx).Table(a.table).Where("id = ?", r.ID).Updates(map[string]any{
		"state_before": r.StateBefore,
		"state_after":  r.StateAfter,
		"status":       r.Status,
		"error_code":   r.ErrorCode,
		"http_status":  r.HTTPStatus,
		"response":     r.Response,
		"finished_at":  r.FinishedAt,
	})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("admin: audit row %d: %d rows updated", r.ID, res.RowsAffected)
	}
	return nil
}

// byKey returns the operator's row with the idempotency key, or nil.
func (a auditLog) byKey(ctx context.Context, operator, key string) (*auditRow, error) {
	var rows []auditRow
	err := a.db.WithContext(ctx).Table(a.table).
		Where("operator = ? AND idempotency_key = ?", operator, key).Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return &rows[0], nil
}

// AuditEntry is one audit row as the API returns it.
type AuditEntry struct {
	ID             uint64          `json:"id"`
	RequestID      string          `json:"request_id"`
	Operator       string          `json:"operator"`
	Action         string          `json:"action"`
	Activity       string          `json:"activity,omitempty"`
	Target         string          `json:"target,omitempty"`
	Params         json.RawMessage `json:"params"`
	Before         json.RawMessage `json:"before"`
	After          json.RawMessage `json:"after"`
	Status         string          `json:"status"`
	ErrorCode      string          `json:"error_code,omitempty"`
	HTTPStatus     int             `json:"http_status,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	StartedAt      time.Time       `json:"started_at"`
	FinishedAt     time.Time       `json:"finished_at,omitzero"`
}

// AuditPage is a page of the audit log, newest first; pass Next as before
// to read the next page (0: no more).
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    uint64       `json:"next,omitempty"`
}

// list returns up to limit rows with id < before (all when before is 0),
// of the activity when it is not "", newest first.
func (a auditLog) list(ctx context.Context, activity string, before uint64, limit int) (AuditPage, error) {
	q := a.db.WithContext(ctx).Table(a.table)
	if activity != "" {
		q = q.Where("activity = ?", activity)
	}
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var rows []auditRow
	if err := q.Order("id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Entries: make([]AuditEntry, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			page.Next = rows[i-1].ID
			break
		}
		e := AuditEntry{
			ID: r.ID, RequestID: r.RequestID, Operator: r.Operator, Action: r.Action,
			Activity: r.Activity, Target: r.Target,
			Params: raw(r.Params), Before: raw(r.StateBefore), After: raw(r.StateAfter),
			Status: r.Status, ErrorCode: r.ErrorCode, HTTPStatus: r.HTTPStatus,
			StartedAt: r.StartedAt.UTC(),
		}
		if r.IdempotencyKey != nil {
			e.IdempotencyKey = *r.IdempotencyKey
		}
		if r.FinishedAt != nil {
			e.FinishedAt = r.FinishedAt.UTC()
		}
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}

func raw(s jsonText) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}
