// Package checkouthttp serves a [checkout.Checkout] over net/http with the
// JSON shapes and status codes of the reference deployment
// (examples/fullstack), so an existing service mounts a sale in a few lines
// with its own router, sessions and middleware:
//
//	h, err := checkouthttp.New(co, userOf, checkouthttp.WithLink(func(r *http.Request) string { return r.PathValue("sig") }))
//	mux.HandleFunc("POST /api/buy/{sig}", h.Buy)
//	mux.HandleFunc("GET /api/result/{reservation}", h.Result)
//	mux.HandleFunc("GET /api/events/{reservation}", h.Stream)
//
// The service keeps what is its own: who the buyer is (the func passed to
// [New]; the buyer is never read from a body), where the signed link token,
// the client IP and the device come from ([WithLink], [WithIP],
// [WithDevice]), routing, TLS, CORS and request logging.
//
// # Buy
//
// [Handler.Buy] answers, in this order: 405 for a method other than POST;
// 415 for a body that is not application/json; 401 when the buyer is
// unknown; 409 sold_out, before the body is read, when
// [checkout.Checkout.SoldOutFor] says the buyer cannot win; 413 for a body
// over 4 KiB; 400 bad_request for a body that is not one JSON object of the
// fields token, captcha_id, captcha, pow, request_id and variant (an unknown field is
// named, at most 32 bytes of it, escaped to printable ASCII); then the
// attempt's [checkout.Outcome], mapped by [Status]:
//
//	Accepted                          202 {"status":"queued","reservation","variant"}
//	Replayed, still queued            202 {"status":"queued","reservation","variant"}
//	Replayed, settled                 200 {"status":"created|paid|cancelled|failed","reservation","order_no","reason","variant","lines"}
//	Refused sold_out, already_bought  409 {"status":<reason>,"message"}
//	Refused limited                   429 (Retry-After when known)
//	Refused captcha, bad_request      400
//	Refused token, denied             403
//	Refused not_started               425
//	Refused ended                     410
//	Refused paused                    503 Retry-After
//	Refused busy, retry               503
//	Refused released                  409 {"status":"failed","reservation","reason":"released"}
//	Busy                              503 {"status":"busy","message":"busy, retry shortly"}
//
// "variant" names the variant of the sale bought ([checkout.Attempt.Variant];
// absent or "" buys the sale itself); the answers name it back ("variant",
// absent for the sale itself), and a settled one carries the order's one
// line ("lines": [{"activity":"<sale>/<variant>","qty","price"}]). An
// unknown or malformed variant is 400 bad_request. A variant attempt's
// reservation ID holds a '/' ("…/M"): a client puts it in a URL path
// escaped (url.PathEscape: "…%2FM"), which net/http's patterns match as
// one segment.
//
// A refusal's message is [checkout.Outcome.Message], which checkout keeps
// free of internal error text. A Busy outcome's error, and every other
// failure, goes to the logger ([WithLogger]) and never to the client.
// [WithOnOutcome] hears every answered attempt, with its status code, for
// metrics.
//
// # Results and streams
//
// [Handler.Result] answers GET with the buyer's view of one reservation
// ({"status": queued, created, paid, cancelled, failed or unknown, …; a
// variant reservation's "variant" and its line, queued or ordered});
// [Handler.Stream] pushes the same view as Server-Sent Events ("event:
// result"), once and then at each change, polling
// [checkout.Checkout.Result] every 500 ms ([WithPollInterval],
// [WithTicker]) until a final status, until the request's context ends, or
// after two minutes' worth of polls. Both read through
// [checkout.Checkout.Result], so a reservation that is not the buyer's
// reads {"status":"unknown"}, exactly as one that does not exist, and its
// stream never says anything else. A buyer holds at most 4 streams at once
// per Handler ([WithMaxStreams]); 429 limited beyond.
//
// Every refusal has the JSON shape {"status","message"}, the type
// admin.ErrorAnswer (the one error body of the library's HTTP APIs: the
// admin API answers in it too, so one type decodes both); every JSON answer
// carries Cache-Control: no-store.
//
// # Concurrency
//
// A [Handler] is safe for concurrent use; its only state is the count of
// open streams per buyer, behind a mutex.
package checkouthttp
