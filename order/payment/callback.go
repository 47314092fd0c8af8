package payment

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
)

// The event types a callback maps to (Event.Type).
const (
	EventPaid     = "payment.paid"     // pay the order with Event.Reference (status.Canceller.PayRef)
	EventRefunded = "payment.refunded" // refund the order, restock Event.Restock (status.Canceller.Refund)
	EventExpired  = "payment.expired"  // the provider's session expired: cancel the order (status.Canceller.Cancel)
)

// Event is a provider's callback as the [Handler] applies it.
type Event struct {
	ID        string         `json:"id"`        // the provider's event ID: the replay guard's key ([order.ValidReservationID])
	Type      string         `json:"type"`      // EventPaid, EventRefunded or EventExpired
	OrderNo   string         `json:"order_no"`  // the order it is about
	Reference string         `json:"reference"` // the payment's reference (EventPaid)
	Restock   status.Restock `json:"restock"`   // EventRefunded: where the units go (default status.RestockNone)
	At        time.Time      `json:"-"`         // when the provider signed it, checked against the tolerance
}

// Verifier checks a callback's signature and reads its event: a
// provider's rule, plugged into the [Handler]. It returns an error
// wrapping [ErrRefused] when the signature does not verify (then nothing
// else is looked at), and the event with At, the signed time, otherwise.
// [HMACSHA256] is the package's own rule.
type Verifier func(h http.Header, body []byte) (Event, error)

// ErrRefused is wrapped by every refusal of a callback: a signature that
// does not verify, a timestamp outside the tolerance.
var ErrRefused = errors.New("payment: callback refused")

const signatureHeader = "Seckill-Signature"

// Sign returns the value of the Seckill-Signature header that
// [HMACSHA256] verifies for body signed at at: "t=<unix seconds>,v1=<hex
// HMAC-SHA256 of "<t>.<body>" under secret>". A fake provider (and a test)
// signs with it.
func Sign(secret []byte, at time.Time, body []byte) string {
	t := strconv.FormatInt(at.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac(secret, t, body))
}

func mac(secret []byte, t string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// HMACSHA256 returns the package's [Verifier]: the Seckill-Signature
// header ([Sign]) must carry an HMAC-SHA256 of the timestamp and the body
// under secret, compared in constant time, and the body is an [Event] as
// JSON. The timestamp is signed with the body, so a replay cannot be
// given a fresh one. An empty secret verifies nothing.
func HMACSHA256(secret []byte) Verifier {
	secret = append([]byte(nil), secret...)
	return func(h http.Header, body []byte) (Event, error) {
		if len(secret) == 0 {
			return Event{}, fmt.Errorf("%w: no secret", ErrRefused)
		}
		var t, sig string
		for part := range strings.SplitSeq(h.Get(signatureHeader), ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "t":
				t = v
			case "v1":
				sig = v
			}
		}
		sec, err := strconv.ParseInt(t, 10, 64)
		if err != nil || t != strconv.FormatInt(sec, 10) {
			return Event{}, fmt.Errorf("%w: no timestamp", ErrRefused)
		}
		got, err := hex.DecodeString(sig)
		if err != nil || !hmac.Equal(got, mac(secret, t, body)) {
			return Event{}, fmt.Errorf("%w: bad signature", ErrRefused)
		}
		var e Event
		if err := json.Unmarshal(body, &e); err != nil {
			return Event{}, fmt.Errorf("payment: event: %w", err)
		}
		e.At = time.Unix(sec, 0)
		return e, nil
	}
}

// Client is what the [Handler]'s replay guard needs from Redis;
// *redis.Client, *redis.ClusterClient and *redis.Ring satisfy it.
type Client interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Handler is the http.Handler of a provider's callbacks: it verifies the
// signature ([Verifier]), refuses a timestamp further than the tolerance
// from now ([WithTolerance], default 5 minutes; [WithClock]) and a replay
// of an event ID, then applies the event to the order through the
// canceller: [EventPaid] → PayRef, [EventRefunded] → Refund, [EventExpired]
// → Cancel.
//
// The replay guard is a Redis key per (provider, event ID), claimed with
// SET NX before the event is applied and marked done after (kept 24 h); a
// failure deletes it so the provider's retry goes through. The claim is a
// lease of [claimLease] (at most twice the tolerance): a node that dies
// while applying an event holds up the provider's retries (409) for that
// long, not until the order's payment window has closed. The guard saves
// work; the truth is the database: every effect is idempotent (a payment
// by reference, a refund, a cancellation answer a repeat as the first
// time), so an event the guard has forgotten changes nothing twice.
//
// Answers: 200 with {"outcome": …} when the event was applied or its
// refusal recorded (paid, conflict, late, refunded, already_refunded,
// cancelled, already_cancelled, already_paid, duplicate); 401 for a
// forged or stale callback; 400 for a malformed event; 404 for an unknown
// order; 409 while the same event is being applied, or for a refund that
// arrived before its payment (not_paid); 500 for a failure — the provider
// retries the last three, the guard letting the retry through.
type Handler struct {
	provider string
	c        *status.Canceller
	rdb      Client
	verify   Verifier
	o        options
}

// NewHandler returns the callback handler of provider ([order.ValidID],
// the Provider of the payments it records), applying events through c,
// guarding replays in rdb, verifying with verify. Options: [WithClock],
// [WithTolerance], [WithKeyPrefix]. A missing argument or a bad option
// fails with order.ErrInvalidConfig.
func NewHandler(provider string, c *status.Canceller, rdb Client, verify Verifier, opts ...Option) (*Handler, error) {
	if !order.ValidID(provider) || c == nil || rdb == nil || verify == nil {
		return nil, fmt.Errorf("%w: NewHandler needs a provider name, a canceller, a redis client and a verifier", order.ErrInvalidConfig)
	}
	o := options{clock: systemClock{}, tolerance: 5 * time.Minute, prefix: "seckill:", logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	return &Handler{provider: provider, c: c, rdb: rdb, verify: verify, o: o}, nil
}

const maxBody = 64 << 10

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, "method_not_allowed")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		answer(w, http.StatusBadRequest, "bad_body")
		return
	}
	e, err := h.verify(r.Header, body)
	switch {
	case errors.Is(err, ErrRefused):
		answer(w, http.StatusUnauthorized, "refused")
		return
	case err != nil:
		answer(w, http.StatusBadRequest, "bad_event")
		return
	}
	if d := h.o.clock.Now().Sub(e.At); d > h.o.tolerance || d < -h.o.tolerance {
		answer(w, http.StatusUnauthorized, "stale")
		return
	}
	if !order.ValidReservationID(e.ID) || e.OrderNo == "" || len(e.OrderNo) > 32 {
		answer(w, http.StatusBadRequest, "bad_event")
		return
	}
	ctx := r.Context()
	k := eventKey(h.o.prefix, h.provider, e.ID)
	claimed, err := h.rdb.SetNX(ctx, k, "pending", min(claimLease, h.o.tolerance*2)).Result()
	if err != nil {
		answer(w, http.StatusInternalServerError, "error")
		return
	}
	if !claimed {
		if v, _ := h.rdb.Get(ctx, k).Result(); v == "done" {
			answer(w, http.StatusOK, "duplicate")
		} else {
			answer(w, http.StatusConflict, "in_progress")
		}
		return
	}
	code, outcome, err := h.apply(ctx, e)
	if code != http.StatusOK {
		h.o.logger.WarnContext(ctx, "payment: callback", "event", e.ID, "type", e.Type, "order", e.OrderNo, "outcome", outcome, "err", err)
		h.rdb.Del(context.WithoutCancel(ctx), k)
	} else if err := h.rdb.Set(context.WithoutCancel(ctx), k, "done", 24*time.Hour).Err(); err != nil {
		h.o.logger.WarnContext(ctx, "payment: callback: mark done", "event", e.ID, "err", err)
	}
	answer(w, code, outcome)
}

// claimLease is how long a claim of an event being applied stands: far
// longer than applying one takes (a transaction or two), short enough
// that a dead node's claim lapses while the provider still retries.
const claimLease = 30 * time.Second

// apply applies a verified, fresh, first-seen event.
func (h *Handler) apply(ctx context.Context, e Event) (int, string, error) {
	var err error
	switch e.Type {
	case EventPaid:
		err = h.c.PayRef(ctx, e.OrderNo, status.Payment{Provider: h.provider, Reference: e.Reference})
		switch {
		case err == nil:
			return http.StatusOK, "paid", nil
		case errors.Is(err, status.ErrPaymentConflict):
			return http.StatusOK, "conflict", nil
		case errors.Is(err, status.ErrOrderCancelled) && !errors.Is(err, status.ErrReleasePending):
			return http.StatusOK, "late", nil
		}
	case EventRefunded:
		restock := e.Restock
		if restock == "" {
			restock = status.RestockNone
		}
		err = h.c.Refund(ctx, e.OrderNo, restock)
		switch {
		case errors.Is(err, status.ErrReleasePending):
		case err == nil:
			return http.StatusOK, "refunded", nil
		case errors.Is(err, status.ErrAlreadyRefunded):
			return http.StatusOK, "already_refunded", nil
		case errors.Is(err, status.ErrNotPaid):
			// out of order: the payment's callback is still to come
			return http.StatusConflict, "not_paid", err
		case errors.Is(err, status.ErrAlreadyCancelled):
			return http.StatusOK, "already_cancelled", nil
		}
	case EventExpired:
		err = h.c.Cancel(ctx, e.OrderNo)
		switch {
		case errors.Is(err, status.ErrReleasePending):
		case err == nil:
			return http.StatusOK, "cancelled", nil
		case errors.Is(err, status.ErrAlreadyCancelled):
			return http.StatusOK, "already_cancelled", nil
		case errors.Is(err, status.ErrAlreadyPaid), errors.Is(err, status.ErrAlreadyRefunded):
			return http.StatusOK, "already_paid", nil
		}
	default:
		return http.StatusBadRequest, "bad_event", fmt.Errorf("payment: event type %q", e.Type)
	}
	switch {
	case errors.Is(err, status.ErrOrderNotFound):
		return http.StatusNotFound, "not_found", err
	case errors.Is(err, order.ErrInvalidArgument), errors.Is(err, order.ErrInvalidID):
		return http.StatusBadRequest, "bad_event", err
	}
	return http.StatusInternalServerError, "error", err
}

func answer(w http.ResponseWriter, code int, outcome string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "{\"outcome\":%q}\n", outcome)
}
