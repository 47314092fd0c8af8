// Package reconcile compares the Redis stock ledger of an activity with
// its orders in the database and repairs what a crash left: every
// reservation ends as exactly one order or one release.
//
//	rec, _ := reconcile.NewReconciler(db, checkout.Ledger(deductor), checkout.Releaser(deductor),
//		reconcile.WithPending(outboxPending), reconcile.WithPendingPass(inKafka), reconcile.WithResults(results))
//	rep, err := rec.Reconcile(ctx, "sale-42") // rep.Released, rep.Orphans, rep.Drift
//
// A reservation without a live order, older than the grace period
// ([WithGrace]) and with no message still on its way ([Pending], asked per
// reservation, and [PendingPass], read once per pass), is released
// through a handoff.Fence: fenced in the database first, so a message
// still in Kafka deducts nothing when it arrives, and never released when
// its order committed meanwhile. The [Report] also counts the
// conservation stock + sold units = total stock ([Report.Drift]), the sold
// units counting the live lines of orders with lines in the activity (a
// variant's "a/v" is reconciled like an activity: each line is its own
// ledger entry "<id>#<i>", matched, released when cancelled, or fenced and
// released when its cart never became an order); a dry
// run ([WithDryRun]) reports without releasing. An activity without a
// database row fails with order.ErrActivityNotFound and releases nothing.
// [LiveReservations] lists the reservations of the live orders: what the
// Redis ledger must hold for them (a Redis rebuild after data loss loads
// exactly these).
//
// Release only what can no longer be delivered: with
// orderkafka.Positions as the [PendingPass] (the broker's acknowledgement
// of each message, recorded through the producer's orderkafka.WithOnAck),
// a reservation whose message is at or after the consumer group's
// committed offset, not trimmed by retention and not lost with the log, is
// never released, however long the consumer lags; its buyer reads
// "queued" meanwhile. Once the group has passed the message without an
// order (a dead letter, say) it is released as before. What still bounds
// the wait: the topic's retention (a trimmed message is no longer
// deliverable, and its reservation is released); a poison message,
// dead-lettered, then releasable; and a message whose position is unknown
// — published before the positions were recorded, or its record failed —
// which has the grace alone, as without a PendingPass. The reconciler has
// no maximum age of its own.
//
// The [Ledger], [Pending] and [PendingPass] are function types the
// application wires (checkout.Ledger over stock.Deductor.Reservations; a
// closure over outbox.HasPendingReservation; a closure over
// orderkafka.Positions.Pending). Bad configuration fails with an error
// wrapping order.ErrInvalidConfig.
//
// A Reconciler is safe for concurrent use; releases are idempotent, so two
// reconcilers at once are safe, if wasteful. It starts no goroutine: call
// Reconcile on a schedule.
package reconcile
