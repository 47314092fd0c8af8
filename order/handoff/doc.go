// Package handoff is the write path after a successful stock reservation:
// it hands the order message on, and when it cannot, gives the
// reservation back without ever giving back a unit that became an order.
//
//	fence, _ := handoff.NewFence(db, deductor, handoff.WithResults(results))
//	sub, _ := handoff.NewSubmitter(producer.Publish, outboxFallback, fence, handoff.WithResults(results))
//	route, err := sub.Submit(ctx, order.Message{ReservationID: id, ActivityID: "sale-42", UserID: "7", Qty: 1})
//	// err wraps ErrRetry: neither Kafka nor the outbox took it, the reservation was released
//
// [Submitter.Submit] publishes the message with the [Publisher] (a
// function: orderkafka.Producer's Publish method); when that fails it
// stores it with the [Fallback] (a function too: an outbox row a relay
// publishes later); when that fails too it releases the reservation
// through its releaser and returns [ErrRetry]. An empty MsgID is filled
// with a random one, a zero CreatedAt with now.
//
// [Fence] is the one place that decides, per reservation, between
// "consumed" (an order) and "released": it writes the reservation's FAILED
// dedup row (message_dedup.reservation_id is unique) before it releases
// anything in Redis, and the consumer's transaction writes the same key
// with the order. Whichever commits first wins: a late message of a
// fenced reservation is answered FAILED ([ReasonReleased]) and deducts
// nothing; a release of a consumed reservation returns [ErrConsumed] and
// gives nothing back. Give the Submitter a Fence as its releaser (a
// publish that reported an error may still have reached Kafka); the
// reconciler (order/reconcile) releases through one too.
//
// Options: each constructor has its own option type ([SubmitterOption],
// [FenceOption]); [WithClock], [WithLogger] and [WithResults] are options
// of both. Bad configuration fails with an error wrapping
// order.ErrInvalidConfig; WithLogger(nil) is bad configuration.
//
// Both types are safe for concurrent use and start no goroutine. The
// fence needs the order tables (order.AutoMigrate) and a Redis release
// that is idempotent by reservation ID (stock.Deductor.Release).
//
// When not to use it: a deployment that writes orders synchronously
// (order.Processor.Handle inside the request) needs no hand-off.
package handoff
