package checkouthttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/order"
)

// Handler serves one sale's buys, result reads and result streams. Safe for
// concurrent use.
type Handler struct {
	c    *checkout.Checkout
	user func(*http.Request) (string, bool)
	o    options

	streams streamCount
}

type options struct {
	link        func(*http.Request) string
	ip          func(*http.Request) netip.Addr
	device      func(*http.Request) string
	reservation func(*http.Request) string
	orderStatus func(ctx context.Context, orderNo string) (string, error)
	log         *slog.Logger
	onOutcome   func(r *http.Request, code int, o checkout.Outcome)
	poll        time.Duration
	ticker      func(d time.Duration) (<-chan time.Time, func())
	maxStreams  int
	err         error
}

// Option is a setting of [New], built by the With… functions of this
// package.
type Option interface{ apply(*options) }

// optionFunc is the one implementation of [Option].
type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: checkouthttp: "+format, append([]any{checkout.ErrInvalidConfig}, args...)...)
	}
}

// WithLink sets where a buy finds the signed link token
// ([checkout.Attempt.Link]), e.g. r.PathValue("sig"). Required when the
// checkout verifies links ([checkout.Config.Link]); default: none.
func WithLink(f func(*http.Request) string) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			o.fail("nil link func")
		}
		o.link = f
	})
}

// WithIP sets where a buy finds the client IP for the risk rules, e.g.
// (*risk.IPResolver).ClientIP. Default: none (the zero address).
func WithIP(f func(*http.Request) netip.Addr) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			o.fail("nil IP func")
		}
		o.ip = f
	})
}

// WithDevice sets where a buy finds the device ID for the risk rules, e.g.
// r.Header.Get("X-Device-ID"). Default: none.
func WithDevice(f func(*http.Request) string) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			o.fail("nil device func")
		}
		o.device = f
	})
}

// WithReservation sets where a result read or stream finds the reservation
// ID. Default: r.PathValue("reservation").
func WithReservation(f func(*http.Request) string) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			o.fail("nil reservation func")
		}
		o.reservation = f
	})
}

// WithOrderStatus sets how a settled result's order is read, so a view
// says "paid" or "cancelled" rather than "created": f returns the order's
// status ((*status.Orders).Get's Status, any case). An error keeps
// "created". Default: none (a new order reads "created").
func WithOrderStatus(f func(ctx context.Context, orderNo string) (string, error)) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			o.fail("nil order status func")
		}
		o.orderStatus = f
	})
}

// WithLogger sets the logger of failures: a Busy outcome's error, a result
// read that failed. Default: [slog.Default]. A nil l is an
// [checkout.ErrInvalidConfig] error; to silence it, pass
// slog.New(slog.DiscardHandler).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l == nil {
			o.fail("nil logger")
		}
		o.log = l
	})
}

// WithOnOutcome sets a hook called after every buy answered past
// authentication, with the status code sent and the outcome: the attempt's,
// or one the handler made for a sold-out buyer refused before the body
// (Step [checkout.StepSoldOut]) or a malformed body (Step "body", Reason
// bad_request). Default: none.
func WithOnOutcome(f func(r *http.Request, code int, o checkout.Outcome)) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			o.fail("nil outcome hook")
		}
		o.onOutcome = f
	})
}

// WithPollInterval sets how often a stream reads the result. Default:
// 500 ms.
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.fail("poll interval %v: want > 0", d)
		}
		o.poll = d
	})
}

// WithTicker sets how a stream waits between its reads: f returns a
// channel that ticks every d and a func that stops it. Tests pass a channel
// they tick by hand. Default: a [time.Ticker].
func WithTicker(f func(d time.Duration) (ticks <-chan time.Time, stop func())) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			o.fail("nil ticker")
		}
		o.ticker = f
	})
}

// WithMaxStreams sets how many streams one buyer may hold open at once on
// this Handler. Default: 4.
func WithMaxStreams(n int) Option {
	return optionFunc(func(o *options) {
		if n < 1 {
			o.fail("max streams %d: want >= 1", n)
		}
		o.maxStreams = n
	})
}

// New returns a Handler of c. user names the authenticated buyer of a
// request (false: not signed in, 401), e.g. the user a session middleware
// put into the request's context.
func New(c *checkout.Checkout, user func(*http.Request) (string, bool), opts ...Option) (*Handler, error) {
	if c == nil || user == nil {
		return nil, fmt.Errorf("%w: checkouthttp: a checkout and a user func are required", checkout.ErrInvalidConfig)
	}
	o := options{
		reservation: func(r *http.Request) string { return r.PathValue("reservation") },
		log:         slog.Default(),
		poll:        500 * time.Millisecond,
		ticker: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
		maxStreams: 4,
	}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	if o.link == nil && slices.ContainsFunc(c.Steps(), func(s checkout.Step) bool { return s.Name == checkout.StepLink }) {
		return nil, fmt.Errorf("%w: checkouthttp: the checkout verifies buy links: pass WithLink", checkout.ErrInvalidConfig)
	}
	return &Handler{c: c, user: user, o: o}, nil
}

// buyRequest is a buy's body. The buyer is never part of it.
type buyRequest struct {
	Token     string `json:"token"`
	CaptchaID string `json:"captcha_id"`
	Captcha   string `json:"captcha"`
	PoW       string `json:"pow"` // the proof of work's payload (checkout.Config.PoW)
	RequestID string `json:"request_id"`
	Variant   string `json:"variant"` // the variant bought (checkout.Attempt.Variant); "" the sale itself
}

// Buy serves POST: one buy attempt of the signed-in buyer (see the package
// documentation for the answers).
func (h *Handler) Buy(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeErr(w, http.StatusMethodNotAllowed, "bad_request", "method not allowed")
		return
	}
	if r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
		writeErr(w, http.StatusUnsupportedMediaType, "bad_request", "the body must be application/json")
		return
	}
	user, ok := h.user(r)
	if !ok || user == "" {
		writeErr(w, http.StatusUnauthorized, "unauthorized", "sign in first")
		return
	}
	if h.c.SoldOutFor(user) { // no attempt of user's can win: the body is not read
		h.answer(w, r, checkout.Outcome{Kind: checkout.Refused, Step: checkout.StepSoldOut, Reason: checkout.SoldOut,
			Final: true, Message: "sold out"})
		return
	}
	var req buyRequest
	if err := readBody(w, r, &req); err != nil {
		code := http.StatusBadRequest
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			code = http.StatusRequestEntityTooLarge
		}
		o := checkout.Outcome{Kind: checkout.Refused, Step: "body", Reason: checkout.BadRequest, Final: true,
			Message: "bad body: " + BodyProblem(err)}
		writeErr(w, code, string(o.Reason), o.Message)
		h.heard(r, code, o)
		return
	}
	a := &checkout.Attempt{User: user, RequestID: req.RequestID, Variant: req.Variant, Token: req.Token, CaptchaID: req.CaptchaID,
		Captcha: req.Captcha, PoW: req.PoW}
	if h.o.link != nil {
		a.Link = h.o.link(r)
	}
	if h.o.ip != nil {
		a.IP = h.o.ip(r)
	}
	if h.o.device != nil {
		a.Device = h.o.device(r)
	}
	h.answerVariant(w, r, h.c.Buy(r.Context(), a), a.Variant)
}

// readBody decodes a buy's body: one JSON object of buyRequest's fields, at
// most maxBody bytes, unknown fields refused; what follows the object is
// not read (as the reference deployment's readBuyRequest).
func readBody(w http.ResponseWriter, r *http.Request, req *buyRequest) error {
	if r.ContentLength > maxBody {
		return &http.MaxBytesError{Limit: maxBody}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	return dec.Decode(req)
}

// answer writes o and tells the hook.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, o checkout.Outcome) {
	h.answerVariant(w, r, o, "")
}

// answerVariant writes o, an outcome of an attempt at variant ("" the
// sale's own activity), and tells the hook.
func (h *Handler) answerVariant(w http.ResponseWriter, r *http.Request, o checkout.Outcome, variant string) {
	code := Status(o)
	if o.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfter(o.RetryAfter))
	}
	switch o.Kind {
	case checkout.Accepted:
		writeJSON(w, code, view{Status: "queued", Reservation: o.Reservation, Variant: variant})
	case checkout.Replayed:
		if code == http.StatusAccepted {
			writeJSON(w, code, view{Status: "queued", Reservation: o.Reservation, Variant: variant})
			break
		}
		v := h.view(r.Context(), o.Result)
		if v.Reservation == "" {
			v.Reservation = o.Reservation
		}
		if v.Variant == "" {
			v.Variant = variant
		}
		writeJSON(w, code, v)
	case checkout.Refused:
		if o.Reason == checkout.Released {
			writeJSON(w, code, view{Status: "failed", Reservation: o.Reservation, Reason: "released", Variant: variant})
			break
		}
		msg := o.Message
		if msg == "" {
			msg = "refused"
		}
		writeErr(w, code, string(o.Reason), msg)
	default: // Busy, or a kind this package does not know
		h.o.log.WarnContext(r.Context(), "checkouthttp: buy failed", "step", o.Step, "kind", o.Kind.String(), "err", o.Err)
		writeErr(w, code, "busy", msgBusy)
	}
	h.heard(r, code, o)
}

func (h *Handler) heard(r *http.Request, code int, o checkout.Outcome) {
	if h.o.onOutcome != nil {
		h.o.onOutcome(r, code, o)
	}
}

// msgBusy is the one message of every failure.
const msgBusy = "busy, retry shortly"

// Status is the HTTP status code of o, as [Handler.Buy] answers it.
func Status(o checkout.Outcome) int {
	switch o.Kind {
	case checkout.Accepted:
		return http.StatusAccepted
	case checkout.Replayed:
		if o.Result.Status == order.StatusQueued || o.Result.Status == order.StatusNone { // handed on again
			return http.StatusAccepted
		}
		return http.StatusOK
	case checkout.Refused:
		switch o.Reason {
		case checkout.SoldOut, checkout.AlreadyBought, checkout.Released:
			return http.StatusConflict
		case checkout.Limited:
			return http.StatusTooManyRequests
		case checkout.BadCaptcha, checkout.BadRequest:
			return http.StatusBadRequest
		case checkout.BadToken, checkout.Denied:
			return http.StatusForbidden
		case checkout.NotStarted:
			return http.StatusTooEarly
		case checkout.Ended:
			return http.StatusGone
		case checkout.Paused, checkout.TryAgain, checkout.HandoffFailed:
			return http.StatusServiceUnavailable
		}
		// A reason of a step of the caller's: final, or try again.
		if o.Final {
			return http.StatusForbidden
		}
		return http.StatusServiceUnavailable
	}
	return http.StatusServiceUnavailable
}

// retryAfter is d in whole seconds, rounded up (Retry-After's unit).
func retryAfter(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return fmt.Sprint(int64(s))
}
