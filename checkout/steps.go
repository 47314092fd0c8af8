package checkout

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// Step is one link of an attempt. Run returns the zero Outcome to go on,
// or how the attempt ends. Undo, when set, gives back what Run took; the
// loop calls it when a later step ends the attempt Busy or Refused and not
// Final. Guarded steps run inside [Config.Breaker]: the failure they
// return (Outcome.Err) counts against it, and an open breaker answers
// Busy without running them.
type Step struct {
	Name    string
	Guarded bool
	Run     func(ctx context.Context, a *Attempt) Outcome
	Undo    func(ctx context.Context, a *Attempt)

	fuse fuseRole // the default step's part in the fused admission
}

// The default steps' names, in the order they run. A step whose part is
// not configured is left out.
const (
	StepShape     = "shape"        // no I/O: the attempt's fields; the reservation ID
	StepWindow    = "window"       // no I/O: Start/End by this process's clock
	StepSoldOut   = "soldout"      // no I/O: the in-process sold-out flag; a retry that won passes
	StepGlobal    = "global"       // no I/O: Config.Global
	StepRisk      = "risk"         // guarded: Config.Risk
	StepUserLimit = "user_limit"   // Config.PerUser (its own failure policy: not guarded)
	StepReplay    = "replay"       // guarded: a retried attempt's reservation, from the ledger
	StepResubmit  = "resubmit"     // … answered from the DB, or its message handed on again
	StepLink      = "link"         // Config.Link: the signed buy path (HMAC, no I/O by default)
	StepPoW       = "pow"          // guarded: Config.PoW, verified once
	StepCaptcha   = "captcha"      // guarded: Config.Captcha, verified once (with Config.PoW: only when risk challenges)
	StepToken     = "access_token" // guarded: Config.Tokens, consumed once; undone by a retryable refusal
	StepReserve   = "reserve"      // guarded: Stock.Reserve; undone by a retryable refusal
	StepSubmit    = "submit"       // Submitter: Kafka, else the outbox, else a release through the fence
)

func (c *Checkout) defaultSteps() []Step {
	cfg := &c.cfg
	steps := []Step{{Name: StepShape, Run: c.stepShape}}
	if !cfg.Start.IsZero() || !cfg.End.IsZero() {
		steps = append(steps, Step{Name: StepWindow, Run: c.stepWindow})
	}
	steps = append(steps, Step{Name: StepSoldOut, Run: c.stepSoldOut})
	if cfg.Global != nil {
		steps = append(steps, Step{Name: StepGlobal, Run: c.stepGlobal})
	}
	if cfg.Risk != nil {
		steps = append(steps, Step{Name: StepRisk, Guarded: true, Run: c.stepRisk, fuse: role(cfg.RiskCheck != nil)})
	}
	if cfg.PerUser != nil {
		_, ok := cfg.PerUser.(windowChecker)
		steps = append(steps, Step{Name: StepUserLimit, Run: c.stepUserLimit, fuse: role(ok)})
	}
	_, ok := cfg.Stock.(lookupChecker)
	steps = append(steps,
		Step{Name: StepReplay, Guarded: true, Run: c.stepReplay, fuse: role(ok)},
		Step{Name: StepResubmit, Run: c.stepResubmit, fuse: fuseSkip})
	if cfg.Link != nil {
		steps = append(steps, Step{Name: StepLink, Run: c.stepLink, fuse: fusePure})
	}
	if cfg.PoW != nil {
		steps = append(steps, Step{Name: StepPoW, Guarded: true, Run: c.stepPoW})
	}
	if cfg.Captcha != nil {
		// With a proof of work the captcha is asked only when risk
		// challenges: a decision the fused script cannot wait for.
		steps = append(steps, Step{Name: StepCaptcha, Guarded: true, Run: c.stepCaptcha, fuse: role(cfg.CaptchaCheck != nil && cfg.PoW == nil)})
	}
	if cfg.Tokens != nil {
		_, ok := cfg.Tokens.(tokenChecker)
		steps = append(steps, Step{Name: StepToken, Guarded: true, Run: c.stepToken, Undo: c.undoToken, fuse: role(ok)})
	}
	return append(steps,
		Step{Name: StepReserve, Guarded: true, Run: c.stepReserve, Undo: c.undoReserve},
		Step{Name: StepSubmit, Run: c.stepSubmit})
}

// stepShape checks what can be checked with no I/O — the sale, the buyer,
// the quantity, the credentials' shapes — and sets the reservation ID of a
// client attempt. A malformed credential can never pass, so it costs no
// Redis round trip.
func (c *Checkout) stepShape(_ context.Context, a *Attempt) Outcome {
	switch {
	case a.Activity != c.cfg.Activity:
		return refuse(BadRequest, true, "unknown sale")
	case !stock.ValidID(a.User):
		return refuse(BadRequest, true, "invalid buyer")
	case a.Qty < 1 || a.Qty > stock.MaxQuantity:
		return refuse(BadRequest, true, "invalid quantity")
	case a.Variant != "" && (!stock.ValidID(a.Variant) || len(c.ledger(a)) > stock.MaxIDLen):
		return refuse(BadRequest, true, "invalid variant")
	case c.cfg.Tokens != nil && !token.ValidPoolToken(a.Token):
		return refuse(BadToken, true, "no valid access token")
	case c.cfg.PoW != nil && a.PoW == "":
		return refuse(BadCaptcha, false, "proof of work missing")
	case c.cfg.Captcha != nil && c.cfg.PoW == nil && (!captcha.ValidID(a.CaptchaID) || a.Captcha == ""):
		return refuse(BadCaptcha, false, "captcha missing")
	case a.RequestID == "":
		return Outcome{}
	}
	id, err := ReservationID(a.User, a.RequestID)
	if err != nil {
		return refuse(BadRequest, true, "request_id: 1-40 of [A-Za-z0-9_-]")
	}
	id = withVariant(id, a.Variant)
	if len(entryOf(id, a.Variant)) > maxEntryLen {
		return refuse(BadRequest, true, "request_id too long for this variant: use a shorter one")
	}
	a.reservation = id
	return Outcome{}
}

// ledger is the stock activity every stock call of a addresses: the
// sale's activity, or its variant's (stock.VariantOf).
func (c *Checkout) ledger(a *Attempt) string {
	if a.Variant == "" {
		return c.cfg.Activity
	}
	return stock.VariantOf(c.cfg.Activity, a.Variant)
}

// entry is the stock reservation ID of a's reservation (see [entryOf]).
func entry(a *Attempt) string { return entryOf(a.reservation, a.Variant) }

func (c *Checkout) stepWindow(_ context.Context, a *Attempt) Outcome {
	switch {
	case !c.cfg.Start.IsZero() && a.At.Before(c.cfg.Start):
		return refuse(NotStarted, false, "the sale has not started")
	case !c.cfg.End.IsZero() && !a.At.Before(c.cfg.End):
		return refuse(Ended, true, "the sale has ended")
	}
	return Outcome{}
}

// stepSoldOut refuses in-process once the stock is gone, unless the attempt
// is the retry of one whose reservation won a unit: that one goes on and
// gets its reservation back. It does not rely on the shape step having run
// (Config.Steps may move it later): an attempt whose request ID makes no
// reservation ID cannot be a winner's retry.
func (c *Checkout) stepSoldOut(_ context.Context, a *Attempt) Outcome {
	act := c.ledger(a)
	if !c.cfg.Stock.SoldOut(act) {
		return Outcome{}
	}
	id := a.reservation
	if id == "" && a.RequestID != "" {
		if id, _ = ReservationID(a.User, a.RequestID); id != "" {
			id = withVariant(id, a.Variant)
		}
	}
	if id == "" || c.cfg.Stock.SoldOutFor(act, entryOf(id, a.Variant)) {
		return refuse(SoldOut, true, "sold out")
	}
	return Outcome{}
}

func (c *Checkout) stepGlobal(_ context.Context, _ *Attempt) Outcome {
	if !c.cfg.Global() {
		return refuse(Limited, false, "too many requests, retry shortly")
	}
	return Outcome{}
}

// stepRisk: blacklist, behaviour, device. A Challenge decision is left to
// the captcha step.
func (c *Checkout) stepRisk(ctx context.Context, a *Attempt) Outcome {
	dec, err := prefetched(ctx, a, StepRisk, func() (risk.Decision, error) { return c.cfg.Risk(ctx, riskSubject(a)) })
	a.risk = dec
	switch {
	case err != nil:
		return busy(err)
	case dec.Action != risk.Deny:
		return Outcome{}
	case dec.Throttled:
		return refuse(Limited, false, "too many attempts"+riskCode(dec))
	}
	return refuse(Denied, true, "refused by risk control"+riskCode(dec))
}

// riskCode is the decision's reason code for the message, " (code)", as
// risk's own middleware tells the client: a code, never internal text.
func riskCode(dec risk.Decision) string {
	if dec.Reason == "" {
		return ""
	}
	return " (" + dec.Reason + ")"
}

func (c *Checkout) stepUserLimit(ctx context.Context, a *Attempt) Outcome {
	lr, err := prefetched(ctx, a, StepUserLimit, func() (limiter.Result, error) { return c.cfg.PerUser.AllowN(ctx, a.User, 1) })
	if err != nil {
		return busy(err)
	}
	if !lr.Allowed {
		o := refuse(Limited, false, "too many attempts, slow down")
		o.RetryAfter = lr.RetryAfter
		return o
	}
	return Outcome{}
}

// stepReplay: a retry of an attempt that reserved gets its reservation, not
// a second one (before the one-time link, captcha and token, which the
// attempt spent). A reservation that was released answers Released, and
// the access token is given back: the buyer holds nothing and may start a
// new attempt. An unknown reservation goes on — unless the ledger is
// frozen for a rebuild, when absence proves nothing (retryable).
func (c *Checkout) stepReplay(ctx context.Context, a *Attempt) Outcome {
	if a.reservation == "" {
		return Outcome{}
	}
	rec, found, err := c.lookup(ctx, a)
	switch {
	case errors.Is(err, stock.ErrFrozen):
		return refuse(TryAgain, false, "the sale is paused for a moment, retry shortly")
	case err != nil:
		return busy(err)
	case !found:
		return Outcome{}
	case rec.User != "" && rec.User != a.User:
		// Another buyer's reservation under this attempt's ID: IDs are one
		// to one, so only a hand-made entry gets here. Never this buyer's.
		return refuse(BadRequest, true, "request_id already used")
	case rec.State != stock.Held:
		c.restoreToken(ctx, a)
		if res, ok := c.cancelledOrder(ctx, a); ok {
			return Outcome{Kind: Replayed, Result: res}
		}
		return refuse(Released, true, "this attempt's reservation was released; start a new attempt")
	}
	a.found, a.heldQty = true, rec.Qty
	return Outcome{}
}

// cancelledOrder returns the outcome of a's released reservation when the
// attempt became an order that was then cancelled (at its pay timeout,
// which releases the units): a retry of the attempt — its first answer
// lost, say, when the instance died — is told that order, FAILED
// cancelled with its number, not "released, start a new attempt", which
// would say there never was one. A cancellation writes the order's state
// before it releases, so the read after the ledger's has it.
func (c *Checkout) cancelledOrder(ctx context.Context, a *Attempt) (order.Result, bool) {
	res, err := c.cfg.Results(ctx, status.ResultQuery{Activity: c.cfg.Activity, User: a.User, ReservationID: a.reservation})
	if err != nil || res.Status != order.StatusFailed || res.Reason != status.ReasonCancelled || res.OrderNo == "" ||
		res.User != "" && res.User != a.User || res.ReservationID != "" && res.ReservationID != a.reservation {
		return order.Result{}, false
	}
	return res, true
}

// stepResubmit answers a found reservation with its result when the
// database has settled it, else hands its message on again (the consumer
// settles duplicates by reservation ID) and answers queued.
func (c *Checkout) stepResubmit(ctx context.Context, a *Attempt) Outcome {
	if !a.found {
		return Outcome{}
	}
	res, err := c.Result(ctx, a.User, a.reservation)
	if err != nil {
		return busy(err)
	}
	if res.Status == order.StatusSuccess || res.Status == order.StatusFailed {
		return Outcome{Kind: Replayed, Result: res}
	}
	if _, err := c.cfg.Submitter.Submit(ctx, c.message(a, a.heldQty)); err != nil {
		return refuse(HandoffFailed, false, "could not place the order, please retry")
	}
	return Outcome{Kind: Replayed, Result: c.queued(a.User, a.reservation, a.Variant, a.heldQty, time.Time{})}
}

func (c *Checkout) stepLink(ctx context.Context, a *Attempt) Outcome {
	if _, err := c.cfg.Link(ctx, token.VerifyParams{Token: a.Link, Activity: c.cfg.Activity, User: a.User}); err != nil {
		return refuse(BadToken, true, "invalid buy link")
	}
	return Outcome{}
}

// stepPoW verifies the proof of work (once: a replayed payload is refused).
func (c *Checkout) stepPoW(ctx context.Context, a *Attempt) Outcome {
	err := c.cfg.PoW(ctx, captcha.VerifyParams{Answer: a.PoW, User: a.User})
	switch {
	case err == nil:
		return Outcome{}
	case errors.Is(err, captcha.ErrRefused), errors.Is(err, captcha.ErrInvalidArgument):
		return refuse(BadCaptcha, false, "wrong or expired proof of work")
	}
	return busy(err)
}

// stepCaptcha verifies the captcha; with Config.PoW, only for an attempt
// risk challenged, and one without a captcha is then told to solve one.
func (c *Checkout) stepCaptcha(ctx context.Context, a *Attempt) Outcome {
	if c.cfg.PoW != nil {
		if a.risk.Action != risk.Challenge {
			return Outcome{}
		}
		if !captcha.ValidID(a.CaptchaID) || a.Captcha == "" {
			return refuse(BadCaptcha, false, CaptchaRequired)
		}
	}
	_, err := prefetched(ctx, a, StepCaptcha, func() (struct{}, error) { return struct{}{}, c.cfg.Captcha(ctx, captchaParams(a)) })
	switch {
	case err == nil:
		return Outcome{}
	case errors.Is(err, captcha.ErrRefused):
		return refuse(BadCaptcha, false, "wrong or expired captcha")
	}
	return busy(err)
}

// stepToken consumes the access token. One spent by an earlier attempt
// passes when the buyer holds nothing (that attempt crashed or lost its
// answer before Reserve, or its reservation was released): the per-user
// cap in stock, not the token, stops a second unit.
func (c *Checkout) stepToken(ctx context.Context, a *Attempt) Outcome {
	_, err := prefetched(ctx, a, StepToken, func() (struct{}, error) { return struct{}{}, c.cfg.Tokens.Consume(ctx, c.tokenParams(a)) })
	switch {
	case err == nil:
		return Outcome{}
	case errors.Is(err, token.ErrUsed):
		held, err := c.heldInSale(ctx, a)
		switch {
		case errors.Is(err, stock.ErrNotLoaded):
			return c.notLoaded(ctx, a)
		case err != nil:
			return busy(err)
		case held > 0 && a.reservation != "":
			// A resend of this very attempt may have reserved while this
			// one ran (the same request ID, sent concurrently): then Reserve
			// replays that reservation; anything else the buyer holds is
			// another attempt's.
			rec, found, err := c.cfg.Stock.Lookup(ctx, c.ledger(a), entry(a))
			switch {
			case errors.Is(err, stock.ErrNotLoaded):
				return c.notLoaded(ctx, a)
			case err != nil:
				return busy(err)
			case !found || rec.State != stock.Held || rec.User != a.User:
				return refuse(AlreadyBought, true, "access token already used")
			}
		case held > 0:
			return refuse(AlreadyBought, true, "access token already used")
		}
		return Outcome{}
	case errors.Is(err, token.ErrRefused):
		return refuse(BadToken, true, "invalid access token")
	}
	return busy(err)
}

// heldInSale is what the buyer holds in the whole sale, for the
// spent-token rule: the token is the sale's, so a buyer holding a unit of
// one variant cannot pass with it at another. It is one Held of the sale
// (Stock's contract: Held of a sale in sizes is the sum over its sizes),
// whatever the attempt's variant: a bot resending a spent token costs one
// call however many sizes the sale has.
func (c *Checkout) heldInSale(ctx context.Context, a *Attempt) (int64, error) {
	return c.cfg.Stock.Held(ctx, c.cfg.Activity, a.User)
}

func (c *Checkout) undoToken(ctx context.Context, a *Attempt) { c.restoreToken(ctx, a) }

func (c *Checkout) restoreToken(ctx context.Context, a *Attempt) {
	if c.cfg.Tokens == nil || a.Token == "" {
		return
	}
	err := c.cfg.Tokens.Restore(context.WithoutCancel(ctx), token.ConsumeParams{Activity: c.cfg.Activity, User: a.User, Token: a.Token})
	if err != nil && c.cfg.OnUndoError != nil {
		c.cfg.OnUndoError(ctx, StepToken, a, err)
	}
}

// stepReserve is the one Lua call. A refusal that is not the buyer's final
// answer (Redis's clock not yet open, a frozen or paused sale, an outage
// with the DB pool empty) is retryable, so the loop gives the access token
// back.
func (c *Checkout) stepReserve(ctx context.Context, a *Attempt) Outcome {
	if a.reservation == "" {
		a.reservation = withVariant(c.serverReservationID(), a.Variant)
	}
	res, err := c.cfg.Stock.Reserve(ctx, stock.Request{Activity: c.ledger(a), User: a.User, Qty: a.Qty, ReservationID: entry(a)})
	if err != nil {
		return busy(err)
	}
	switch res.Status {
	case stock.Released: // released since stepReplay looked: as stepReplay answers it
		c.restoreToken(ctx, a)
	case stock.NotLoaded:
		return c.notLoaded(ctx, a)
	}
	return reserveOutcome(res)
}

// reserveOutcome is the table from every stock.Status to a truthful
// outcome.
func reserveOutcome(res stock.Result) Outcome {
	switch res.Status {
	case stock.Reserved:
		return Outcome{}
	case stock.SoldOut:
		if res.Fallback { // Redis is out and the DB pool is empty: Redis may have units left
			return refuse(TryAgain, false, "the sale is paused for a moment, retry shortly")
		}
		return refuse(SoldOut, true, "sold out")
	case stock.LimitReached:
		return refuse(AlreadyBought, true, "the per-buyer limit is reached")
	case stock.Released: // this attempt's reservation was released (or tombstoned) after the replay step looked
		return refuse(Released, true, "this attempt's reservation was released; start a new attempt")
	case stock.NotStarted, stock.NotLoaded: // Redis's clock says "not yet" where ours said "open"
		return refuse(NotStarted, false, "the sale has not started")
	case stock.Ended:
		return refuse(Ended, true, "the sale has ended")
	case stock.Frozen: // Redis lost the sale's state; it is being rebuilt from the DB
		return refuse(TryAgain, false, "the sale is paused for a moment, retry shortly")
	case stock.Paused:
		o := refuse(Paused, false, "the sale is paused, retry shortly")
		o.RetryAfter = 5 * time.Second
		return o
	}
	return busy(errors.New("checkout: unknown stock status " + res.Status.String()))
}

// undoReserve releases a reservation whose hand-off, or a later step,
// refused: it must not outlive the refusal. After handoff.ErrRetry the
// submitter released it through the fence already.
//
// With Config.Fence the release is fenced (see there): an order a resend
// of the attempt made meanwhile keeps its units (handoff.ErrConsumed: the
// undo has nothing to give back), and a message it handed off is answered
// FAILED when consumed. When the fence cannot be written nothing is
// released and OnUndoError hears it; the reconciler settles it.
func (c *Checkout) undoReserve(ctx context.Context, a *Attempt) {
	if a.released {
		return
	}
	var err error
	if c.cfg.Fence != nil {
		r := handoff.ReleaseRequest{Activity: c.cfg.Activity, User: a.User, ReservationID: a.reservation}
		if a.Variant != "" { // released as the message's one line ("<reservation>#0" in the variant's ledger)
			r.Lines = []order.Line{{ActivityID: c.ledger(a), Qty: a.Qty}}
		}
		if err = c.cfg.Fence(ctx, r); errors.Is(err, handoff.ErrConsumed) {
			err = nil
		}
	} else {
		_, err = c.cfg.Stock.Release(ctx, c.ledger(a), entry(a))
	}
	if err != nil && c.cfg.OnUndoError != nil {
		c.cfg.OnUndoError(ctx, StepReserve, a, err)
	}
}

// stepSubmit hands the reservation to the order pipeline: Kafka, else the
// outbox, else (handoff.ErrRetry) a release through the fence.
func (c *Checkout) stepSubmit(ctx context.Context, a *Attempt) Outcome {
	_, err := c.cfg.Submitter.Submit(ctx, c.message(a, a.Qty))
	switch {
	case err == nil:
		return Outcome{}
	case errors.Is(err, handoff.ErrRetry):
		a.released = true
		return refuse(HandoffFailed, false, "could not place the order, please retry")
	}
	// Refused before Kafka or the outbox saw it: the loop releases it.
	return busy(err)
}

// message is the order message of a's reservation. A variant's is an
// order with one line (see the package doc), filed under the sale.
func (c *Checkout) message(a *Attempt, qty int64) order.Message {
	m := order.Message{MsgID: outbox.NewMsgID(), ReservationID: a.reservation, ActivityID: c.cfg.Activity, UserID: a.User,
		Qty: qty, Price: c.cfg.Price, CreatedAt: c.cfg.Now().UTC()}
	if a.Variant != "" {
		m.Version = order.MessageVersion
		m.Lines = []order.Line{{ActivityID: c.ledger(a), Qty: qty, Price: order.Cents(c.cfg.Price)}}
		m.Qty, m.Price = 0, 0
	}
	return m
}

// queued is the result of reservation of user's, held in stock: qty units
// of variant ("" the sale's own), shown as the order's line for a variant.
func (c *Checkout) queued(user, reservation, variant string, qty int64, at time.Time) order.Result {
	res := order.Result{Activity: c.cfg.Activity, User: user, Status: order.StatusQueued, ReservationID: reservation, At: at}
	if variant != "" && qty > 0 {
		res.Lines = []order.Line{{ActivityID: stock.VariantOf(c.cfg.Activity, variant), Qty: qty}}
	}
	return res
}

// notLoaded answers an attempt whose ledger the stock does not have
// (stock.NotLoaded, or Held's ErrNotLoaded). For the sale's own activity
// it is the sale not loaded yet (retryable), unless the sale has variants:
// then the buyer must name one (final). For a variant, the stock's list of
// the sale's variants decides: a variant it does not list is unknown
// (final); a listed one, or a sale not loaded yet, is retryable; a plain
// sale (its own ledger loaded, no variant list) has no variants (final).
func (c *Checkout) notLoaded(ctx context.Context, a *Attempt) Outcome {
	wait := refuse(NotStarted, false, "the sale has not started")
	vs, err := c.cfg.Stock.Variants(ctx, c.cfg.Activity)
	switch {
	case errors.Is(err, stock.ErrNotLoaded):
		if a.Variant == "" {
			return wait
		}
		if _, herr := c.cfg.Stock.Held(ctx, c.cfg.Activity, a.User); herr == nil {
			return refuse(BadRequest, true, "this sale has no variants")
		}
		return wait
	case err != nil:
		return busy(err)
	case a.Variant == "":
		return refuse(BadRequest, true, "choose a variant")
	}
	for _, v := range vs {
		if v.ID == a.Variant {
			return wait
		}
	}
	return refuse(BadRequest, true, "unknown variant")
}

// role is fuseCheck when the step's part offers a fused form.
func role(ok bool) fuseRole {
	if ok {
		return fuseCheck
	}
	return fuseNone
}

// lookup is the replay step's ledger lookup: from the fused script when it
// ran, else Stock.Lookup.
func (c *Checkout) lookup(ctx context.Context, a *Attempt) (stock.Reservation, bool, error) {
	if a.replies[StepReplay] == nil {
		return c.cfg.Stock.Lookup(ctx, c.ledger(a), entry(a))
	}
	rec, err := prefetched(ctx, a, StepReplay, func() (stock.Reservation, error) { return stock.Reservation{}, nil })
	return rec, err == nil && rec.ID != "", err
}

func riskSubject(a *Attempt) risk.Subject {
	return risk.Subject{UserID: a.User, IP: a.IP, DeviceID: a.Device}
}

func captchaParams(a *Attempt) captcha.VerifyParams {
	return captcha.VerifyParams{ID: a.CaptchaID, Answer: a.Captcha, User: a.User}
}

func (c *Checkout) tokenParams(a *Attempt) token.ConsumeParams {
	return token.ConsumeParams{Activity: c.cfg.Activity, User: a.User, Token: a.Token}
}
