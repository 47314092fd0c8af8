// Package order turns a Redis stock reservation into exactly one durable
// order — or exactly one release — whatever fails on the way: Kafka, the
// database, the consumer process, or the payment.
//
// # The path of a reservation
//
//	stock.Reserve ok ─► handoff.Submitter.Submit ─► orderkafka.Producer.Publish (Kafka, key = user ID)
//	                      └─ Kafka fails ─► handoff.Fallback (outbox row) ─ fails too ─► Releaser.Release + ErrRetry
//	Kafka ─► orderkafka.Handler ─► Consumer.Consume ─► Processor: ONE DB transaction per batch =
//	         dedup rows + orders + one "UPDATE … SET stock = stock - n WHERE id = ? AND stock >= n" per activity
//	      ─► after commit: Release FAILED reservations, status.Results (Redis), Scheduler, Notifier ─► mark offset
//	status.Canceller: Pay (CAS CREATED→PAID) / Cancel (CAS CREATED→CANCELLED + DB stock restore, then Release)
//	           driven by a Redis delay queue with a DB scan backstop; the DB expire_time, not the queue score, decides
//	reconcile.Reconciler: Redis ledger vs DB orders; releases reservations without order after a grace period
//
// # Delivery and idempotence
//
// Delivery is at least once end to end: the Submitter may publish a message
// and also store it in the outbox, a relay may publish a row twice, a
// consumer may die after its DB commit and before its offset commit. Effects
// are exactly once because every write is keyed: message_dedup has the
// message ID as primary key (a redelivered message is answered from its
// row), seckill_order has unique order_no and reservation_id, and
// UNIQUE(user_id, activity_id, live_slot) gives one live order per user
// when the activity's cap is 1. A duplicate is a success, never an error.
//
// The Kafka handler (orderkafka.Handler) marks an offset only after the
// [Consumer] reported its record done — its transaction committed — and
// never calls the synchronous session.Commit in its loop; sarama's
// auto-commit (see orderkafka.SaramaConfig) commits what was marked.
//
// # Sub-packages
//
// The package itself depends on no Kafka client and issues no IDs:
//
//   - github.com/seckillkit/seckill/order/orderid: the snowflake ID
//     generator (an [IDSource]) and the machine-ID lease in Redis;
//   - github.com/seckillkit/seckill/order/orderkafka: the sarama edge —
//     SaramaConfig, the Producer (Publish is a handoff.Publisher), the consumer-group
//     Handler that drives a [Consumer] with [Record]s, the dead-letter
//     topic (a [DeadLetter]), consumer lag.
//
// # Options
//
// Each constructor takes its own option type ([ProcessorOption],
// [ConsumerOption]), so an option that does not apply to it does not
// compile; each sub-package has its own. A nil option is ignored; bad
// configuration — a nil collaborator (a nil db, releaser, processor,
// logger, …), a value out of range — fails the constructor with an error
// wrapping [ErrInvalidConfig], the one such sentinel of the family (the
// sub-packages wrap it too).
//
// # Failure semantics
//
//   - Kafka down: handoff.Submitter stores the message with the handoff.Fallback; both
//     down: the reservation is released and handoff.ErrRetry returned.
//   - DB down in the consumer: retry with backoff, forever, marking nothing;
//     attempts are not counted while the health check fails.
//   - Poison (undecodable, invalid, or failing [WithMaxAttempts] times while
//     the DB is healthy): [PermanentError], sent to the [DeadLetter] sink.
//   - Business refusal (DB stock exhausted = Redis/DB drift, duplicate user,
//     unknown activity): a FAILED [Outcome], the reservation is released.
//   - Release failing after a commit: retried, then left to the
//     reconcile.Reconciler; results and notifications are best effort (the DB
//     answers status.Results.Get when Redis does not).
//
// # Concurrency
//
// Every exported type is safe for concurrent use. Background work (the
// Canceller's loops; orderid's lease renewal) runs only inside Run and
// stops with its context or Close. Hooks are called without internal locks
// ([TxHook] inside the consumer's transaction, which holds row locks).
//
// # User and activity IDs
//
// User and activity IDs are strings in every API of the package (a
// decimal number, a UUID, "ann@shop"): 1 to [MaxIDLen] (64) bytes of
// [A-Za-z0-9._@+-], [ValidID] — the rule of the stock package. Anything
// else is refused before Redis or the database is touched, with
// [ErrInvalidID] (wrapping [ErrInvalidMessage]; a [PermanentError] when it
// arrives in a message), never echoing an over-long ID. The columns are
// VARCHAR(64) on every database — on MySQL/MariaDB ascii_bin, so IDs
// compare byte for byte as in Redis — and the activity's primary key is
// its ID. Order numbers (snowflake) stay int64.
//
// # Message versions, extension and order snapshot
//
// [Message.Encode] writes version 3 for a message without lines (string
// IDs and the optional [Message.Ext]) and version 4 ([MessageVersion]) for
// one with [Message.Lines]. A consumer that predates a version refuses the
// message by its version instead of misreading it: upgrade consumers first.
// Versions 1 (numeric IDs) and 2 (numeric IDs and Ext) still decode; their
// numbers become decimal strings. [Message.Ext] carries an opaque JSON
// payload of at most 4 KiB (4096 bytes) from the API to the order's ext
// column. The consumer's transaction also copies the activity's product_id and
// product_name onto the order; price is the unit price at the time of sale
// (the message's, else the activity price read in that transaction).
//
// # Orders with lines
//
// A message with [Message.Lines] (a cart reserved with
// stock.Deductor.ReserveLines, line i under "<id>#<i>") becomes one order
// row (Qty and Price 0, LiveSlot NULL, filed under [Message.ActivityID])
// and one row of seckill_order_line per line ([Line]: its activity — a
// variant's "a/v", whose DB stock is the activity row of that ID — units,
// unit price and own state), in one transaction with the message's dedup
// row, a SUCCESS dedup row per line's reservation (so handoff.Fence finds
// a consumed line consumed, and a line it fenced first refuses the cart),
// the per-user cap of every line's activity (counting the buyer's orders
// and lines, cap 1 included), the sale's cap over its variants (a line of
// "a/v" counts against the row of "a" with the buyer's live lines of every
// "a/…", when "a" has a row: the cap Redis holds over an activity's
// variants) and one stock update per line's activity.
// All or nothing. A cart is written on its own, never in a batch. The
// [TxHook] sees [Order.Lines]. A message without lines writes exactly what
// it wrote before: no line row. status.Canceller cancels and refunds a
// line (CancelLine, RefundLine) or the whole order; reconcile counts lines
// per activity; status.Results and status.Orders show them. The cap-1
// live_slot key covers plain orders only: a plain order of a cap-1
// activity does not read the buyer's cart lines (Redis's held counter,
// shared by Reserve and ReserveLines, holds that cap).
//
// # The shop's rows in the same transaction
//
// [WithTxHook] gives the [Processor] (and so the [Consumer]) a [TxHook]
// called inside the transaction that writes a batch, with the batch's new
// orders — never the duplicates of a redelivery — after their rows were
// inserted: the shop writes its own rows through the same *gorm.DB and they
// commit or roll back with the orders. A hook error fails the transaction
// like a database error: the Consumer falls back to one message at a time,
// and a message whose hook keeps failing is dead-lettered after
// [WithMaxAttempts] attempts (at once if the hook returns a
// [PermanentError]) while its neighbours commit. See [TxHook].
//
// # Tables
//
// Six tables, seckill_activity, seckill_order, message_dedup,
// seckill_activity_adjust (the stock ledger of operate.AdjustStock),
// seckill_payment (the payments providers reported, one row per (provider,
// reference): status.Canceller.PayRef) and seckill_order_line (the lines
// of the orders with lines, by (order_no, line_no)) by default:
// [AutoMigrate], or the DDL of [Schema] (schema.sql and
// schema_postgres.sql). [WithTables] names others, so that several
// services (or a shop's naming scheme) share a database: give the same
// [Tables] to every part that touches them ([WithTables] here, for
// [NewProcessor], [AutoMigrate], [Schema] and the functions of
// order/operate and order/reconcile; the WithTables of handoff, status
// and reconcile for their constructors). Names are validated plain lower-case identifiers,
// quoted in every statement; index and CHECK names are schema.sql's under
// the default names and derived from the table's name otherwise
// (uk_<table>_order_no, …), so two configurations coexist in one schema.
//
// # Operating a sale
//
// operate.AdjustStock tops up or withdraws units as an idempotent entry of the
// activity's stock ledger, moving stock and total_stock together in one
// transaction (a withdrawal never takes stock below 0:
// operate.ErrInsufficientStock), so stock + live orders = total_stock = initial
// + Σ deltas keeps holding and the reconcile.Reconciler sees no drift
// (reconcile.Report.Drift). operate.SetActivityStatus records a pause in the activity's
// status column. status.Orders reads orders (by number, reservation, buyer) and
// pays or cancels them, so no caller reads the tables.
//
// # Observing and tracing
//
// [WithObserver] reports the [Consumer] to the observer shape every
// seckill package shares ([observe.Event]; stage order.consume); the
// WithObserver of handoff, status and reconcile report order.submit,
// order.cancel, order.reconcile and order.reconcile_drift, and
// orderkafka.ObserveLag order.consumer_lag. orderkafka.WithHeaders (producer) and [WithContextFrom]
// (consumer) carry a trace context through Kafka record headers into the
// consumer's transaction: a batch's [TxHook] gets its first message's
// context, and each order its own message's headers ([Order.Headers]).
//
// # Databases
//
// The same code runs on the three, through gorm; the suite runs on each.
//
// MySQL 8 / MariaDB 10.6+ (gorm.io/driver/mysql, parseTime=true): InnoDB;
// duplicate keys are error 1062. A cap above 1 is checked with SELECT … FOR
// UPDATE, whose next-key locks make a second transaction for the same buyer
// wait or deadlock with the first (InnoDB rolls one back, error 1213, and
// the consumer retries it); either way it counts the first's order. The batch's
// rows go through server-side prepared multi-row INSERTs. CHECK (stock >= 0)
// is enforced from MariaDB 10.2 / MySQL 8.0.16.
//
// PostgreSQL 12+ (gorm.io/driver/postgres with pgx; tested with 15):
// duplicate keys are SQLSTATE 23505 (pgx's *pgconn.PgError, lib/pq). The
// processor's transactions run at READ COMMITTED whatever the server's
// default, and a batch's transaction plans its statements per execution
// (plan_cache_mode = force_custom_plan, SET LOCAL): pgx prepares every
// statement, and a generic plan made while the tables were small kept the
// batch's IN-list reads on sequential scans as they grew, until the next
// ANALYZE. PostgreSQL has no range locks, so FOR UPDATE alone cannot stop
// two transactions from passing the same buyer's cap check; the buyers are
// first serialised with pg_advisory_xact_lock(space, key) — two int4 keys,
// space from the order table's name, key a hash of (activity, user); an
// application using two-key advisory locks may at worst wait on a
// collision. UNIQUE treats NULLs as distinct (the default; never declare
// live_slot's index NULLS NOT DISTINCT). The prepared INSERTs work on pgx
// and measure the same as pgx's own statement cache. A failed statement
// aborts the transaction: a [TxHook] must return its errors.
//
// SQLite (github.com/glebarez/sqlite): writers are serialised, one
// connection per process (WAL and a busy timeout); [AutoMigrate] cannot add
// the CHECK constraint to it; no DDL file.
//
// The status.Canceller claims delay-queue entries in Redis (ZREM), never rows:
// its DB scan reads due orders and cancels each with a compare-and-set
// UPDATE, which settles concurrent cancellers on every database, so it
// needs no SKIP LOCKED.
//
// # Requirements
//
// gorm with one of the databases above. Redis 6+,
// standalone or Cluster: every key is used alone (results hash, delay-queue
// sorted set, lease keys), so no script spans hash slots. Kafka ≥ 0.11 for
// the idempotent producer.
//
// # When not to use it
//
// If orders can be written synchronously within the request's budget (low
// traffic, no flash sale), skip Kafka and call [Processor.Handle] directly.
// The package does not import stock or outbox: wire them through
// [Releaser] here and the function types handoff.Fallback,
// reconcile.Ledger and reconcile.Pending; a Releaser that also implements
// status.OrderReleaser gets the whole cancelled order from the
// status.Canceller.
package order
