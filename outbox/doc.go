// Package outbox is a transactional outbox for flash-sale order messages:
// a message is written to the database in the same transaction as the
// business rows that announce it, and a separate [Relay] publishes it to
// the broker (Kafka) afterwards, so "order row committed" and "message
// will be sent" can never disagree.
//
// # Writing
//
// [Writer.Write] inserts rows inside the caller's transaction, passed
// explicitly (never hidden in a context):
//
//	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
//		if err := tx.Create(&order).Error; err != nil {
//			return err
//		}
//		return w.Write(ctx, tx, outbox.Message{Topic: "orders", Key: uid, Payload: body})
//	})
//
// [Writer.SendOrStore] is the seckill submit path: publish directly (no
// database write on the fast path) and, only if that fails, store the row
// in its own short transaction for the relay. If both fail it returns an
// error wrapping [ErrUndelivered]: the caller releases the reservation and
// answers "retry".
//
// # Relaying
//
// [Relay.Run] polls due rows in batches, publishes them through a one-method
// [Publisher] ([SaramaPublisher] for a sarama SyncProducer, or any
// [PublisherFunc]), and marks each SENT; a failed publish is retried with
// exponential backoff and jitter through the row's next_attempt_at, and the
// row becomes FAILED after [WithMaxAttempts] attempts, calling the
// [WithOnFailed] alert hook. SENT rows older than [WithRetention] are
// deleted. [Relay.Close] stops Run.
//
// Claiming takes a lease stored in the row (lease_owner, next_attempt_at =
// lease end, attempts+1). Settling a batch (SENT, retry, FAILED) updates
// only rows still leased to that batch, and only rows it updated count in
// [Batch] and reach the hooks: a relay that outlived its lease leaves the
// rows another relay claimed to that relay ([Batch.LeaseLost]). On
// MySQL 8.0+ / MariaDB 10.6+ and PostgreSQL 9.5+ the claim is a short READ
// COMMITTED transaction with SELECT … FOR UPDATE SKIP LOCKED, so relays
// never wait for one another. On SQLite, which has no row locks, the claim
// is one atomic statement, UPDATE … WHERE id IN (SELECT … LIMIT n),
// serialised by SQLite's write lock. See [ClaimMode]. No lock is held while publishing, and the lease
// survives crashes: a relay that dies mid-batch leaves rows that are
// claimed again when their lease ([WithLease], default 30 s) ends.
//
// # Delivery guarantees
//
// Delivery is at least once. Nothing committed is lost: a row leaves
// PENDING only when a publisher acknowledged it (SENT) or its attempt budget
// is spent (FAILED, alerted, kept for [Relay.Requeue]). A message is
// delivered more than once when a publish failed after the broker stored it
// (lost acknowledgement), when a relay outlived its lease or crashed between
// publishing and marking, or when marking failed. Two relays never claim the
// same row under a live lease, so concurrent relays add no duplicates of
// their own (tested by counting on SQLite, MariaDB and PostgreSQL). Consumers must
// therefore be idempotent, deduplicating on [Message.MsgID], which is stable
// across redeliveries and carried in the [HeaderMsgID] Kafka header.
// Ordering is best effort: table order within a batch and per key, but
// retries reorder.
//
// # Metrics and reconciliation
//
// [Stats] reports pending and failed counts and the oldest pending row,
// for a backlog gauge and alerts; [Failed] lists FAILED rows and
// [Relay.Requeue] puts them back.
//
// [WithObserver] reports to the observer shape shared by every seckill
// package ([observe.Event], [observe.Observer]), synchronously, with the caller's ctx:
// "outbox.write" per [Writer.Write] (ok, invalid, duplicate, error; Value
// the messages), "outbox.send" per [Writer.SendOrStore] (published,
// stored, undelivered, invalid, error), "outbox.publish" per relay batch
// (one event per outcome the batch had: sent, retry, failed, released,
// lease_lost, Value the rows; or error) and the gauges "outbox.pending",
// "outbox.oldest_pending_seconds" and "outbox.failed", which [Relay.Run]
// reads every [WithBacklogInterval] (default 10 s). See [StageWrite].
//
// [HasPendingReservation] (by [Message.ReservationID]), [HasPending] (by
// topic and key) and [Lookup] (by MsgID) let a reconciler ask whether a
// reservation still has a message on its way before releasing it.
//
// # Schema and table name
//
// One table, outbox_message by default: [AutoMigrate], or the DDL of
// [Schema] (schema.sql, schema_postgres.sql); timestamps are stored in UTC
// with microseconds. [Message.ReservationID] is stored in the column ref.
// [WithTable] names another table, so that several outboxes share a
// database: give the same [TableOption] to [NewWriter], [NewRelay],
// [AutoMigrate] and the queries ([Stats], [Failed], [HasPending],
// [HasPendingReservation], [Lookup]). The name must be a plain lower-case
// identifier; the indexes are named after it (uk_<table>_msg_id,
// idx_<table>_poll, …), since PostgreSQL and SQLite name indexes per
// schema, not per table. A MsgID written twice into one table fails with
// [ErrDuplicateMsgID], the package's only refusal.
//
// Options belong to one constructor: [NewWriter] takes [WriterOption]s and
// [NewRelay] [RelayOption]s, so an option that means nothing to one of them
// does not compile there; a nil option is ignored. Bad configuration (a
// nil collaborator given to a constructor, an option out of range, a nil
// logger) wraps [ErrInvalidConfig]; a bad argument to a call (a nil tx,
// an invalid message) wraps [ErrInvalidArgument]. Hooks take the context
// first: the batch's for the row hooks, Run's for [WithOnError].
// [ErrRunning] and [ErrClosed] are the sentinels every seckill package
// shares.
//
// # Databases
//
// MySQL 8.0+ / MariaDB 10.6+ (gorm.io/driver/mysql): InnoDB, utf8mb4_bin so
// topics and keys compare byte for byte; claims with SKIP LOCKED (older
// servers: [WithClaimMode]([ClaimForUpdate])). Open the DSN with
// parseTime=true. Duplicate keys are error 1062.
//
// SQLite (github.com/glebarez/sqlite or any gorm SQLite dialector): claims
// with one UPDATE under the database lock; use one connection per process
// or WAL with a busy timeout so writers queue instead of failing with
// SQLITE_BUSY. No DDL file: [AutoMigrate].
//
// PostgreSQL 9.5+ (gorm.io/driver/postgres, pgx): TIMESTAMPTZ(6) columns,
// BIGSERIAL id; claims with SKIP LOCKED; duplicate keys are SQLSTATE 23505
// (*pgconn.PgError). A failed statement aborts the caller's transaction,
// as always on PostgreSQL: roll it back on any error from [Writer.Write].
//
// # Concurrency and time
//
// [Writer] and [Relay] are safe for concurrent use. The relay's only
// goroutines live inside [Relay.Run] and end before it returns. Hooks run
// after the database recorded the outcome, outside any lock. Every stored
// or compared timestamp comes from the injected [Clock] ([WithClock]); only
// the relay's idle wait between polls uses real timers.
//
// # When not to use it
//
// If losing a message on a broker outage is acceptable, publish directly.
// If you need exactly-once effects, you still need an idempotent consumer:
// the outbox gives at-least-once, not exactly-once.
package outbox
