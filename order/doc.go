// Package order turns a Redis stock reservation into exactly one durable
// order — or exactly one release — whatever fails on the way: Kafka, the
// database, the consumer process, or the payment.
//
// # The path of a reservation
//
//	stock.Reserve ok ─► Submitter.Submit ─► Producer.Publish (Kafka, key = user ID)
//	                      └─ Kafka fails ─► Fallback.Store (outbox row) ─ fails too ─► Releaser.Release + ErrRetry
//	Kafka ─► Consumer (sarama.ConsumerGroupHandler) ─► Processor: ONE DB transaction per batch =
//	         dedup rows + orders + one "UPDATE … SET stock = stock - n WHERE id = ? AND stock >= n" per activity
//	      ─► after commit: Release FAILED reservations, Results (Redis), Scheduler, Notifier ─► mark offset
//	Canceller: Pay (CAS CREATED→PAID) / Cancel (CAS CREATED→CANCELLED + DB stock restore, then Release)
//	           driven by a Redis delay queue with a DB scan backstop; the DB expire_time, not the queue score, decides
//	Reconciler: Redis ledger vs DB orders; releases reservations without order after a grace period
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
// The Consumer marks an offset only after the transaction that wrote its
// message committed, and never calls the synchronous session.Commit in its
// loop; sarama's auto-commit (see [SaramaConfig]) commits what was marked.
//
// # Failure semantics
//
//   - Kafka down: [Submitter] stores the message with the [Fallback]; both
//     down: the reservation is released and [ErrRetry] returned.
//   - DB down in the consumer: retry with backoff, forever, marking nothing;
//     attempts are not counted while the health check fails.
//   - Poison (undecodable, invalid, or failing [WithMaxAttempts] times while
//     the DB is healthy): [PermanentError], sent to the [DeadLetter] sink.
//   - Business refusal (DB stock exhausted = Redis/DB drift, duplicate user,
//     unknown activity): a FAILED [Outcome], the reservation is released.
//   - Release failing after a commit: retried, then left to the
//     [Reconciler]; results and notifications are best effort (the DB
//     answers [Results.Get] when Redis does not).
//
// # Concurrency
//
// Every exported type is safe for concurrent use. Background work (the
// Canceller's loops, the machine-ID lease renewal) runs only inside Run and
// stops with its context or Close. Hooks are called without internal locks.
//
// # Requirements
//
// gorm with MySQL 8 / MariaDB 10.6+ (InnoDB; schema.sql has the DDL) or
// SQLite (github.com/glebarez/sqlite), through the same code. Redis 6+,
// standalone or Cluster: every key is used alone (results hash, delay-queue
// sorted set, lease keys), so no script spans hash slots. Kafka ≥ 0.11 for
// the idempotent producer.
//
// # When not to use it
//
// If orders can be written synchronously within the request's budget (low
// traffic, no flash sale), skip Kafka and call [Processor.Handle] directly.
// The package does not import stock or outbox: wire them through the
// one-method interfaces ([Releaser], [Fallback], [Ledger], [Pending]).
package order
