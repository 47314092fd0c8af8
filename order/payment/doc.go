// Package payment connects an order's life to the shop's payment
// provider: the provider's callbacks, verified and applied once, and the
// authorize-then-capture flow of limited drops.
//
//	verify := payment.HMACSHA256(secret) // or the provider's own rule, a Verifier
//	h, _ := payment.NewHandler("stripe", canceller, rdb, verify)
//	mux.Handle("POST /payments/callback", h)
//
//	flow, _ := payment.NewFlow("stripe", provider, canceller, orders)
//	rel := flow.Releaser(deductor) // every release voids; give it to the consumer, canceller and reconciler
//	err := flow.Authorize(ctx, payment.Authorization{…})  // after stock.Reserve; release when it fails
//	err = flow.Capture(ctx, orderNo)                       // when the order stands (or wins the draw)
//
// [Handler] is the http.Handler of a provider's callbacks. A [Verifier]
// checks the signature and reads the [Event] — [HMACSHA256] is the
// package's rule (an HMAC over the signed timestamp and the body, with a
// shared secret); a shop plugs in its provider's — then the handler
// refuses a timestamp outside the tolerance (an injected order.Clock,
// [WithClock]) and a
// replayed event ID (a Redis SET NX per event), and maps the event to
// status.Canceller.PayRef, Refund or Cancel. A forged, stale or replayed
// callback changes nothing; and since every effect is idempotent in the
// database, neither does a replay the guard has forgotten.
//
// [Flow] calls the shop's [Provider] at the order's transitions with
// idempotency keys derived from the reservation ID: Authorize at
// reservation, Capture once the order is PAID in the database, Void after
// every release of an unpaid reservation ([Flow.Releaser]). The order's
// compare-and-set decides between a capture and a cancellation, so the
// provider never sees both for one reservation.
//
// When not to use it: a shop whose provider charges at checkout and
// reports nothing back needs only status.Canceller.Pay.
//
// Every type is safe for concurrent use. Bad configuration fails with an
// error wrapping order.ErrInvalidConfig; a refused callback's verifier
// error wraps [ErrRefused]. Redis 6+, standalone or Cluster: the guard's
// keys are used one at a time.
package payment
