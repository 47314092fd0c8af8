package outbox

import (
	"strings"

	"gorm.io/gorm"
)

// The outbox table's name is TableName unless [WithTable] says otherwise.
// Everything that depends on it is derived here: the secondary indexes,
// named prefix_<table>_suffix (index names are per schema on PostgreSQL and
// SQLite, so two outbox tables in one database need their own), and the
// relay's raw SQL, with the name quoted for the dialect.

// index is one secondary index of the outbox table.
type index struct {
	prefix, suffix string
	unique         bool
	columns        []string
}

// indexes of the outbox table; for the default table their names are
// uk_outbox_message_msg_id, idx_outbox_message_poll, and so on, as in
// schema.sql and schema_postgres.sql.
var indexes = []index{
	{"uk", "msg_id", true, []string{"msg_id"}},                    // dedup ID, unique
	{"idx", "poll", false, []string{"status", "next_attempt_at"}}, // relay poll + SKIP LOCKED, Stats
	{"idx", "sent", false, []string{"sent_at"}},                   // retention clean-up
	{"idx", "topic_key", false, []string{"topic", "msg_key"}},     // HasPending
	{"idx", "ref", false, []string{"ref"}},                        // HasPendingReservation
}

func (ix index) name(table string) string { return ix.prefix + "_" + table + "_" + ix.suffix }

// createSQL is the CREATE INDEX statement for table on db's dialect.
func (ix index) createSQL(db *gorm.DB, table string) string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.unique {
		b.WriteString("UNIQUE ")
	}
	b.WriteString("INDEX ")
	db.Dialector.QuoteTo(&b, ix.name(table))
	b.WriteString(" ON ")
	db.Dialector.QuoteTo(&b, table)
	b.WriteString(" (")
	for i, c := range ix.columns {
		if i > 0 {
			b.WriteString(", ")
		}
		db.Dialector.QuoteTo(&b, c)
	}
	b.WriteString(")")
	return b.String()
}

// quoteTable quotes a (validated) table name for db's dialect: `t` on
// MySQL and SQLite, "t" on PostgreSQL.
func quoteTable(db *gorm.DB, table string) string {
	var b strings.Builder
	db.Dialector.QuoteTo(&b, table)
	return b.String()
}

// relaySQL is the relay's raw SQL for one table.
type relaySQL struct {
	leaseByID, leaseAtomic                 string // claim.go
	markSent, marked, release, retry, fail string // settle
	selectOldSent, deleteByID, requeue     string // Cleanup, Requeue
}

func newRelaySQL(t string) relaySQL {
	return relaySQL{
		leaseByID: "UPDATE " + t +
			" SET lease_owner = ?, next_attempt_at = ?, attempts = attempts + 1, updated_at = ? WHERE id IN ?",
		leaseAtomic: "UPDATE " + t +
			" SET lease_owner = ?, next_attempt_at = ?, attempts = attempts + 1, updated_at = ?" +
			" WHERE id IN (SELECT id FROM " + t +
			" WHERE status = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?)",
		// markSent keeps the batch's token in lease_owner, so that after a
		// partial update (some rows were taken over) marked finds exactly
		// the rows this batch marked.
		markSent: "UPDATE " + t +
			" SET status = ?, sent_at = ?, updated_at = ? WHERE id IN ? AND lease_owner = ? AND status = ?",
		marked: "SELECT id FROM " + t + " WHERE id IN ? AND lease_owner = ? AND status = ?",
		release: "UPDATE " + t +
			" SET next_attempt_at = ?, attempts = attempts - 1, updated_at = ?, lease_owner = ''" +
			" WHERE id IN ? AND lease_owner = ? AND status = ?",
		retry: "UPDATE " + t +
			" SET next_attempt_at = ?, last_error = ?, updated_at = ?, lease_owner = ''" +
			" WHERE id = ? AND lease_owner = ? AND status = ?",
		fail: "UPDATE " + t +
			" SET status = ?, last_error = ?, updated_at = ?, lease_owner = ''" +
			" WHERE id = ? AND lease_owner = ? AND status = ?",
		selectOldSent: "SELECT id FROM " + t + " WHERE status = ? AND sent_at < ? ORDER BY sent_at LIMIT ?",
		deleteByID:    "DELETE FROM " + t + " WHERE id IN ? AND status = ?",
		requeue: "UPDATE " + t +
			" SET status = ?, attempts = 0, next_attempt_at = ?, updated_at = ?, lease_owner = '' WHERE id IN ? AND status = ?",
	}
}
