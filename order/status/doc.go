// Package status answers what happens to a purchase after its hand-off:
// what the buyer sees, what an operator reads and does, and what becomes
// of an order nobody pays.
//
//	results, _ := status.NewResults(rdb, db)
//	canceller, _ := status.NewCanceller(db, rdb, deductor)
//	orders, _ := status.NewOrders(db)
//	cons, _ := order.NewConsumer(proc, deductor, order.WithResults(results), order.WithScheduler(canceller))
//	go canceller.Run(ctx)
//	r, _ := results.Get(ctx, "sale-42", "7") // QUEUED, SUCCESS + order no, or FAILED + reason
//
// [Results] keeps the status of each (activity, buyer) in a Redis hash
// with a TTL and answers from the database when Redis has none (expired,
// evicted, never written); a QUEUED written late never hides a final
// status of the same reservation, and a stale entry is repaired from the
// database. It is an order.ResultWriter: the consumer and the hand-off
// write into it.
//
// [Canceller] cancels the orders whose payment window passed: a Redis
// delay queue (it is an order.Scheduler, fed by the consumer after each
// commit) with a database scan as the backstop; the database expire_time,
// not the queue's score, decides. Pay and Cancel are compare-and-set
// updates, so they settle every race; a cancellation restores the DB
// stock and releases the reservation ([OrderReleaser] when the releaser
// has it), and a payment for a cancelled order calls the refund hook
// ([WithOnPayCancelled], [ErrOrderCancelled]). Background work runs only
// inside [Canceller.Run] and stops with its context or [Canceller.Close].
//
// Payments and refunds: [Canceller.PayRef] pays an order by its provider's
// reference ([Payment]), recorded by (provider, reference) in the same
// transaction as the order's state, so the same payment reported again is
// answered as the first time and a second payment of a paid order is a
// conflict handed to [WithOnPayConflict]. [Canceller.Refund] moves a PAID
// order to REFUNDED (a CAS) and puts its units where the [Restock] choice
// says: back on sale (DB stock in the transaction, the Redis reservation
// released after, like a cancellation), into the shop's own inventory
// ([WithRefundHook], in the transaction) or nowhere; only the transition's
// own transaction restocks, so retries and races restock once.
//
// Orders with lines (order.Message.Lines): [Canceller.CancelLine] cancels
// one line of a CREATED order and [Canceller.RefundLine] refunds one line
// of a PAID order with the same [Restock] choices, each under the order's
// row lock with a CAS on the line, so a line moves once however many
// callers race; the line's reservation ("<id>#<i>") goes back through the
// releaser as the order of that line. Cancel, the expiry and Refund of the
// whole order settle every line still following it.
//
// [Orders] reads orders (by number, reservation, buyer), so no caller
// reads the tables; an order with lines comes with its Lines, and
// [Results] read from the database show them too.
//
// Options: each constructor has its own option type ([ResultsOption],
// [CancellerOption]; [NewOrders] takes only [WithTables], a
// [TableOption]); [WithClock], [WithLogger] and [WithKeyPrefix] are
// options of the first two, [WithTables] of all three. Bad configuration fails with an error wrapping
// order.ErrInvalidConfig. Refusals of Pay and Cancel are sentinels
// ([ErrOrderNotFound], [ErrAlreadyPaid], …); a Redis reply of an
// unexpected shape is [ErrBadReply].
//
// Every type is safe for concurrent use. Redis 6+, standalone or Cluster:
// every key is used alone (the results hash of one buyer, the delay
// queue), so no command spans hash slots.
package status
