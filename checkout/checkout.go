// Package checkout runs one buy attempt of a flash sale across the seckill
// building blocks, and owns the protocol that makes the README's promises
// true for any handler that uses it: a retry of an attempt gets its
// reservation or its result back and never a second unit; a spent access
// token passes again only while the buyer holds nothing; a refusal gives
// back what earlier steps took exactly when the buyer may retry; every
// [stock.Status] becomes a truthful [Outcome] (final or retryable); attempt
// IDs are collision-free, prefix-free and within the limits of every store
// that keeps them; a failed hand-off releases through the fence; results
// are read only by their owner.
//
// It sits above the building blocks the way the reference deployment does:
// it imports them, none of them imports it.
//
// An attempt runs an ordered list of [Step]s with one signature. The
// default list comes from [Config] (a part left nil leaves its step out);
// [Config.Steps] edits it: remove, replace or insert a step without
// forking. The loop runs each step, inside [Config.Breaker] when the step is
// guarded, and stops at the first that ends the attempt. When the attempt
// ends Busy or Refused and not Final, every earlier step that took
// something is undone, last first.
//
// # Variants
//
// A sale loaded with variants (stock.Activity.Variants: sizes, colours,
// each its own counter) is bought one variant per attempt
// ([Attempt.Variant]). Every stock call of such an attempt addresses the
// variant's ledger, stock.VariantOf(sale, variant) ("sale/M"): the
// in-process sold-out flag (one size sells out, the others still sell),
// the replay lookup, the spent-token rule's lookup, Reserve (the
// variant's cap and the sale's cap over all its variants, in one script),
// the undo, the resubmit and [Checkout.Result]. The access token stays the
// sale's: a spent one passes only while the buyer holds nothing in any
// variant, which the spent-token rule reads as one Stock.Held of the sale
// (see [Stock]). [Checkout.SoldOutFor] asks the sale's plain ID, which
// for a sale in sizes is sold out once every size is. The order message
// of a variant buy is an
// order with one line (order.Message.Lines): ActivityID the sale (the
// order's product snapshot, filed under the sale), Lines[0] the variant's
// "sale/M" with the units and the unit price, its stock reservation
// "<reservation ID>#0". That is the representation order and
// order/reconcile already count per variant — a message's ActivityID
// must be a plain ID, a line's may be "a/v"; the consumer checks the
// variant's cap against its activity row "sale/M" (and takes the DB
// stock from it), the fence releases and the reconciler matches the line
// under "<id>#0" in the variant's ledger — so a variant's order needs
// nothing new downstream. The reservation ID folds the variant in (see
// [Attempt.Variant]): the same request ID for another variant is another
// attempt, never the first one's reservation. The fused admission
// (Config.Redis) covers variant attempts: its replay lookup reads the
// variant's ledger, under the line's entry, as the sequential chain does.
//
// The outcomes carry no HTTP: see package checkouthttp for the JSON shape
// the reference deployment serves, and package checkouttest for the
// conformance kit that checks a composition against the invariants.
package checkout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/fused"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// ErrInvalidConfig reports a Config [New] refuses.
var ErrInvalidConfig = errors.New("checkout: invalid config")

// Stock is what checkout needs of the stock: *stock.Deductor has it. A
// composition with a DB pool for Redis outages wraps both (Reserve tries
// Redis, then the pool; Lookup and Held read both; Release releases both).
//
// For a sale in sizes (stock.Activity.Variants) the calls that take the
// sale's plain ID answer for the whole sale, as *stock.Deductor does:
// Held(sale, user) is the sum of what user holds over all its sizes (the
// spent-token rule asks it once, whatever the attempt's size; answering
// one size's, or 0, lets a spent token buy a second size); SoldOut(sale)
// and SoldOutForPrefix(sale, p) are true only when every size is sold out
// and, for the prefix, no size's ledger holds an ID starting with p
// ([Checkout.SoldOutFor] refuses before the body on them). The conformance
// kit (package checkouttest) checks both.
type Stock interface {
	Reserve(ctx context.Context, req stock.Request) (stock.Result, error)
	Release(ctx context.Context, activity, reservationID string) (stock.ReleaseResult, error)
	Lookup(ctx context.Context, activity, reservationID string) (stock.Reservation, bool, error)
	Held(ctx context.Context, activity, user string) (int64, error)
	SoldOut(activity string) bool
	SoldOutFor(activity, reservationID string) bool
	SoldOutForPrefix(activity, prefix string) bool
	// Variants lists the sale's variants (stock.Deductor.Variants;
	// stock.ErrNotLoaded for a sale without variants or not loaded). A
	// variant attempt's spent-token rule adds the buyer's units over them,
	// and an unknown variant is told apart from a sale not yet loaded by
	// them: a wrapper must pass it through.
	Variants(ctx context.Context, activity string) ([]stock.Variant, error)
}

// Tokens is the access-token pool: *token.Pool has it.
type Tokens interface {
	Consume(ctx context.Context, c token.ConsumeParams) error
	Restore(ctx context.Context, c token.ConsumeParams) error
}

// Submitter hands an order message on (Kafka, else the outbox) and, when it
// can do neither, releases the reservation through the fence and answers
// [handoff.ErrRetry]: *handoff.Submitter has it.
type Submitter interface {
	Submit(ctx context.Context, m order.Message) (handoff.Route, error)
}

// Config is one sale's checkout. Activity, Stock, Submitter and Results are
// required; each other part is optional and its step is left out without
// it.
type Config struct {
	Activity string // the sale: the stock activity, the token and link activity
	Price    int64  // unit price in cents for the order message; 0: the DB's price
	// Start and End, when set, refuse attempts outside the window by this
	// process's clock before any I/O (Redis's clock decides at Reserve).
	Start, End time.Time
	// Node makes server-made reservation IDs unique across processes
	// (attempts without a request ID): 1-8 of [A-Za-z0-9]; random if "".
	Node string

	Stock     Stock                                                                 // required
	Submitter Submitter                                                             // required
	Results   func(ctx context.Context, q status.ResultQuery) (order.Result, error) // required: (*status.Results).Reservation
	// Fence is how the undo gives a reservation back:
	// (*handoff.Fence).ReleaseFor, the fence the Submitter releases
	// through. A resend of the same attempt that finds the reservation held
	// hands it off again; when the first send then ends retryably after
	// reserve (a step of yours between reserve and submit, a Submitter
	// error other than handoff.ErrRetry) its undo must not give back the
	// units of the resend's order. Through the fence it cannot: the
	// reservation is fenced in the database first, so the resend's message
	// is answered FAILED and deducts nothing, or its order, made first,
	// wins and nothing is released. nil: Stock.Release, safe only while no
	// step after reserve refuses and the Submitter keeps its contract
	// (checkouttest's resend_during_undo scenario fails without it).
	Fence func(ctx context.Context, r handoff.ReleaseRequest) error

	Tokens  Tokens                                                                // the access token, consumed once
	Link    func(ctx context.Context, p token.VerifyParams) (token.Claims, error) // the signed buy path: (*token.Signer).Verify
	Captcha func(ctx context.Context, p captcha.VerifyParams) error               // (*captcha.Store).Verify
	// PoW verifies every attempt's proof of work ([Attempt.PoW]; Answer
	// is the payload, ID empty): (*captcha.PoW).Verify. With it, the
	// Captcha is asked only of an attempt Risk answered Challenge, and
	// refused as [CaptchaRequired] without one. Optional.
	PoW     func(ctx context.Context, p captcha.VerifyParams) error
	Risk    func(ctx context.Context, s risk.Subject) (risk.Decision, error) // (*risk.Checker).Check
	PerUser limiter.Limiter                                                  // a per-user window (key: the user)
	Global  func() bool                                                      // this process's bucket: (*limiter.TokenBucket).Allow
	Breaker func(ctx context.Context, fn func(context.Context) error) error  // guarded steps run inside it: (*breaker.Breaker).Execute

	// Redis is the Redis the checks run on, for the fused admission: with
	// it the Redis checks before Reserve that offer a fused form (package
	// fused: RiskCheck, Tokens as *token.Pool, PerUser as
	// *redislimit.SlidingWindow, Stock as *stock.Deductor for the replay
	// lookup, CaptchaCheck) run as
	// one script, one round trip, with the same decisions and side effects
	// as one call each. A Cluster or Ring client (keys in several slots)
	// leaves every check its own call. nil: no fusion.
	Redis redis.Scripter
	// CaptchaCheck is Captcha's fused form: (*captcha.Store).VerifyCheck.
	// Optional; without it the captcha is its own call.
	CaptchaCheck func(p captcha.VerifyParams) (fused.Check[struct{}], error)
	// RiskCheck is Risk's fused form: (*risk.Checker).CheckCheck.
	// Optional; without it, or when it answers an error (a checker with a
	// rule of its own), risk is its own call.
	RiskCheck func(s risk.Subject) (fused.Check[risk.Decision], error)
	// Sequential turns the fused admission off: every check its own call,
	// as without Redis. Default false.
	Sequential bool

	// Steps edits the default steps (nil keeps them): remove, replace or
	// insert; the result must keep "reserve" and "submit".
	Steps func(defaults []Step) []Step
	// Now is the clock of the window check and the message's CreatedAt;
	// time.Now if nil.
	Now func() time.Time
	// OnUndoError hears an undo that failed (the reconciler releases a
	// reservation left held; a token not restored stays spent). Optional.
	OnUndoError func(ctx context.Context, step string, a *Attempt, err error)
}

// Checkout runs the buy attempts of one sale. It is safe for concurrent use.
type Checkout struct {
	cfg   Config
	steps []Step
	node  string
	seq   atomic.Uint64
	fuse  bool // the fused admission (Config.Redis)

	mu      sync.Mutex
	scripts map[string]*redis.Script // the fused scripts by their text
}

// New checks cfg and lays out its steps.
func New(cfg Config) (*Checkout, error) {
	switch {
	case !stock.ValidID(cfg.Activity):
		return nil, fmt.Errorf("%w: Activity %q", ErrInvalidConfig, cfg.Activity)
	case cfg.Stock == nil || cfg.Submitter == nil || cfg.Results == nil:
		return nil, fmt.Errorf("%w: Stock, Submitter and Results are required", ErrInvalidConfig)
	case cfg.Price < 0:
		return nil, fmt.Errorf("%w: Price < 0", ErrInvalidConfig)
	case !cfg.Start.IsZero() && !cfg.End.IsZero() && !cfg.End.After(cfg.Start):
		return nil, fmt.Errorf("%w: End not after Start", ErrInvalidConfig)
	}
	if err := checkIDRule(); err != nil {
		return nil, err
	}
	c := &Checkout{cfg: cfg, node: cfg.Node}
	if c.node == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.node = hex.EncodeToString(b[:])
	} else if !validNode(c.node) {
		return nil, fmt.Errorf("%w: Node %q: 1-8 of [A-Za-z0-9]", ErrInvalidConfig, c.node)
	}
	if c.cfg.Now == nil {
		c.cfg.Now = time.Now
	}
	c.fuse = fusing(&c.cfg)
	c.steps = c.defaultSteps()
	if cfg.Steps != nil {
		c.steps = cfg.Steps(append([]Step(nil), c.steps...))
	}
	seen := map[string]bool{}
	for _, s := range c.steps {
		if s.Name == "" || s.Run == nil || seen[s.Name] {
			return nil, fmt.Errorf("%w: step %q: a unique name and a Run", ErrInvalidConfig, s.Name)
		}
		seen[s.Name] = true
	}
	if !seen[StepReserve] || !seen[StepSubmit] {
		return nil, fmt.Errorf("%w: the steps must keep %q and %q", ErrInvalidConfig, StepReserve, StepSubmit)
	}
	return c, nil
}

// Steps returns a copy of the steps in the order they run.
func (c *Checkout) Steps() []Step { return append([]Step(nil), c.steps...) }

// Buy runs one attempt down the steps. a is the buyer's attempt: Activity
// "" means the checkout's; Qty 0 means 1. What the steps learn (the
// reservation) is set on a.
func (c *Checkout) Buy(ctx context.Context, a *Attempt) Outcome {
	if a.Activity == "" {
		a.Activity = c.cfg.Activity
	}
	if a.Qty == 0 {
		a.Qty = 1
	}
	if a.At.IsZero() {
		a.At = c.cfg.Now()
	}
	var took []int
	var out Outcome
	for i := range c.steps {
		s := &c.steps[i]
		if c.fuse && s.fuse == fuseCheck && i >= a.fusedTo {
			c.prefetch(ctx, i, a)
		}
		out = c.run(ctx, s, a)
		if out.Kind != 0 {
			out.Step = s.Name
			break
		}
		if s.Undo != nil {
			took = append(took, i)
		}
	}
	if out.Kind == 0 {
		out = Outcome{Kind: Accepted, Reservation: a.reservation}
	}
	if out.Reservation == "" {
		out.Reservation = a.reservation
	}
	if out.Kind == Busy || out.Kind == Refused && !out.Final {
		uctx := context.WithoutCancel(ctx)
		for i := len(took) - 1; i >= 0; i-- {
			c.steps[took[i]].Undo(uctx, a)
		}
	}
	return out
}

// run runs s, inside the breaker when s is guarded.
func (c *Checkout) run(ctx context.Context, s *Step, a *Attempt) Outcome {
	if !s.Guarded || c.cfg.Breaker == nil {
		return s.Run(ctx, a)
	}
	var out Outcome
	err := c.cfg.Breaker(ctx, func(ctx context.Context) error {
		out = s.Run(ctx, a)
		return out.Err
	})
	if err != nil && out.Err == nil { // the breaker refused: the step never ran
		out = busy(err)
	}
	return out
}

// Result is the result of reservation for user: what Results says
// whenever it knows an outcome (the database decides: an order, or a
// FAILED outcome such as a fenced release), else the stock ledger: a
// reservation user holds reads [order.StatusQueued], one released without
// an order reads [order.StatusFailed] with [handoff.ReasonReleased]. So an
// in-flight reservation reads queued without a QUEUED result written at the
// hand-off (a [handoff.Submitter] without [handoff.WithResults] saves that
// Redis round trip per accepted buy). It never answers another buyer's: a
// reservation that is not user's reads as unknown (order.StatusNone). A
// variant reservation ("…/M", [Attempt.Variant]) is read from its
// variant's ledger, and reads queued with its one line (the variant's
// "sale/M" and the units held).
func (c *Checkout) Result(ctx context.Context, user, reservation string) (order.Result, error) {
	if !stock.ValidID(user) || !stock.ValidReservationID(reservation) {
		return order.Result{}, nil
	}
	res, err := c.cfg.Results(ctx, status.ResultQuery{Activity: c.cfg.Activity, User: user, ReservationID: reservation})
	if err != nil {
		return order.Result{}, err
	}
	if res.User != "" && res.User != user || res.ReservationID != "" && res.ReservationID != reservation {
		return order.Result{}, nil
	}
	if res.Status == order.StatusSuccess || res.Status == order.StatusFailed {
		return res, nil
	}
	variant, ok := variantOf(reservation)
	if !ok {
		return order.Result{}, nil
	}
	act := c.cfg.Activity
	if variant != "" {
		act = stock.VariantOf(act, variant)
	}
	r, ok, err := c.cfg.Stock.Lookup(ctx, act, entryOf(reservation, variant))
	switch {
	case err != nil && res.Status == order.StatusQueued:
		return res, nil // what Results knows; the ledger is out of reach
	case errors.Is(err, stock.ErrInvalidArgument):
		return order.Result{}, nil
	case err != nil:
		return order.Result{}, err
	case !ok || r.User != user:
		return order.Result{}, nil
	case r.State == stock.Held:
		return c.queued(user, reservation, variant, r.Qty, r.ReservedAt), nil
	}
	// Released. Every release writes its outcome to the database first:
	// the fence's FAILED row before it gives the units back, a
	// cancellation its order's state before the release. So the database
	// read again now has the final answer, even when the order was
	// written (and then cancelled, releasing the units) between the read
	// above and the ledger's: answering "released" from the ledger alone
	// would then tell a buyer who had an order that it had none.
	res, err = c.cfg.Results(ctx, status.ResultQuery{Activity: c.cfg.Activity, User: user, ReservationID: reservation})
	if err == nil && (res.Status == order.StatusSuccess || res.Status == order.StatusFailed) &&
		(res.User == "" || res.User == user) && (res.ReservationID == "" || res.ReservationID == reservation) {
		return res, nil
	}
	return order.Result{Activity: c.cfg.Activity, User: user, Status: order.StatusFailed, Reason: handoff.ReasonReleased,
		ReservationID: reservation, At: r.ReleasedAt}, nil
}

// SoldOutFor reports, with no I/O, that the sale is sold out and none of
// user's attempts holds a unit in it: an attempt of user's would be refused
// sold_out whatever it carries, so a handler may answer before reading the
// request body. For a sale in sizes: every size sold out, and no size's
// ledger holds an attempt of user's (a variant attempt's entry
// "u<len>.<user>-<request>/<size>#0" starts with the same prefix).
func (c *Checkout) SoldOutFor(user string) bool {
	return c.cfg.Stock.SoldOut(c.cfg.Activity) && c.cfg.Stock.SoldOutForPrefix(c.cfg.Activity, reservationPrefix(user))
}

// serverReservationID is a reservation ID for an attempt without a request
// ID: "r" + node + time + counter, unique across processes with distinct
// nodes, never equal to or a prefix of a client attempt's ("u…").
func (c *Checkout) serverReservationID() string {
	return "r" + c.node + "." + strconv.FormatInt(c.cfg.Now().UnixMilli(), 36) + "." + strconv.FormatUint(c.seq.Add(1), 36)
}

func validNode(s string) bool {
	if len(s) == 0 || len(s) > 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
