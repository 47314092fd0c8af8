// Package history records what each simulated buyer asked the service and
// what it was answered, with the monotonic start and end of every request,
// and checks those histories against the model of a buy: not only the end
// state of a sale (the invariants the load generator and the fault battery
// count from Redis and SQL) but every answer a buyer was given on the way.
//
// # Recording
//
// A [Recorder] holds one clock origin; each simulated client gets a
// [Client] (NewClient, the only call that takes a lock) and appends its
// [Op]s to its own slice, so the hot path costs an append: a client is
// driven by one goroutine at a time. After the run, [Recorder.Ops] is
// every client's history.
//
// # The model of a buy
//
// A reservation, as the buyer API reports it (GET /api/result, the push
// streams, the buy's own answer and its replays, the payment), moves
// through
//
//	queued ──► created ──► paid ──► refunded   (refunded by the shop)
//	   │          └──────► cancelled   (unpaid past the payment timeout)
//	   └─────────────────► failed      (released: it can never become an order)
//
// A refund may be read right after created (paid and refunded between
// the two answers). "unknown" (the service does not know the reservation, or it is another
// buyer's) carries no state and is legal only before any outcome. The
// result API spells a cancelled order two ways ("cancelled", and "failed"
// with reason "cancelled" and the order number); both are the state
// cancelled. Once an answer named an order number, no later answer names
// another.
//
// [Check] checks each reservation's answers to its owner with porcupine
// (github.com/anishathalye/porcupine), a linearizability checker: the
// answers must fit one order that respects real time (an answer that
// ended before another started comes first) in which each is a legal step
// of the model from the one before. So "created, then queued", "paid,
// then failed", a changing order number and two overlapping answers that
// no order reconciles (created and failed at once) are violations. Then,
// per reservation: a 202 with no outcome among the answers (after the final
// drain, every accepted buy ends in an order or a failure), and, given the
// stores' [Truth] (read from SQL), the buyer's last word checked against
// it: the order is the buyer's (not someone else's), its order number and
// status are those the buyer was told, a failure has no order. Finally, a
// read by one buyer of a reservation of another that answered anything
// but "unknown" (or 404 for a payment) is a read of another buyer's data.
package history

import (
	"sync"
	"time"
)

// Kind is the request an Op records.
type Kind string

// The requests of the buyer API that say something about a reservation.
const (
	Buy    Kind = "buy"    // POST /api/buy/…: 202 queued with the reservation, a replay's 200 view, 409 failed, or a refusal
	Result Kind = "result" // GET /api/result/{reservation}
	Push   Kind = "push"   // a view pushed on /api/events or /api/ws
	Pay    Kind = "pay"    // POST /api/pay for the reservation's order
)

// Op is one request and its answer, as one client saw it.
type Op struct {
	Client int    // the recording client (Recorder.NewClient order)
	User   string // the service's user ID of the client ("17" for user17)
	Kind   Kind
	// Attempt is the buy's request_id (Buy only): the retries of one
	// attempt must all name the same reservation.
	Attempt string
	// Reservation is the reservation the op is about: the one the request
	// named (Result, Push, Pay), or the one the answer named (Buy).
	Reservation string
	// Start and End are the request's send and the answer's arrival, in
	// nanoseconds on the recorder's monotonic clock.
	Start, End int64
	Code       int    // HTTP status (200 for a push); 0 = transport error, no answer
	Status     string // the body's "status"
	OrderNo    string // the body's "order_no"
	Reason     string // the body's "reason"
	// Named is the reservation the answer's body named, when it named one
	// (Result, Push): it must be the one asked about.
	Named string
}

// Recorder is the clock and the list of clients of one run.
type Recorder struct {
	origin time.Time

	mu      sync.Mutex
	clients []*Client
}

// NewRecorder returns a recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{origin: time.Now()} }

// NewClient registers a simulated client acting as user (the service's
// user ID). Safe for concurrent use; the client it returns is not (one
// goroutine at a time).
func (r *Recorder) NewClient(user string) *Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &Client{rec: r, id: len(r.clients), user: user}
	r.clients = append(r.clients, c)
	return c
}

// Since is t on the recorder's monotonic clock (t must come from
// time.Now, which carries a monotonic reading).
func (r *Recorder) Since(t time.Time) int64 { return int64(t.Sub(r.origin)) }

// Now is the recorder's clock now.
func (r *Recorder) Now() int64 { return int64(time.Since(r.origin)) }

// Clients is the number of clients registered.
func (r *Recorder) Clients() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients)
}

// Ops returns every client's ops, client by client (call it after the
// clients stopped).
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.clients {
		n += len(c.ops)
	}
	out := make([]Op, 0, n)
	for _, c := range r.clients {
		out = append(out, c.ops...)
	}
	return out
}

// Client is one simulated client's history. Its methods do nothing on a
// nil Client (a run that records nothing).
type Client struct {
	rec  *Recorder
	id   int
	user string
	ops  []Op
}

// User is the client's user ID.
func (c *Client) User() string {
	if c == nil {
		return ""
	}
	return c.user
}

// Now is the recorder's clock now (0 on a nil Client).
func (c *Client) Now() int64 {
	if c == nil {
		return 0
	}
	return c.rec.Now()
}

// Since is t on the recorder's clock (0 on a nil Client).
func (c *Client) Since(t time.Time) int64 {
	if c == nil {
		return 0
	}
	return c.rec.Since(t)
}

// Add appends op to the client's history, stamped with the client and its
// user.
func (c *Client) Add(op Op) {
	if c == nil {
		return
	}
	op.Client, op.User = c.id, c.user
	c.ops = append(c.ops, op)
}
