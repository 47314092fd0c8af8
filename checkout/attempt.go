package checkout

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
)

// Attempt is one buy attempt: what the buyer sent, as the handler read it.
// The user is the authenticated buyer, never a value from the body.
type Attempt struct {
	Activity string // "" means the checkout's sale
	User     string // the authenticated buyer ([stock.ValidID])
	// RequestID is the client's idempotency key for one purchase attempt,
	// reused on every retry of it: 1-[MaxRequestIDLen] of [A-Za-z0-9_-].
	// The reservation ID is derived from it, so a retry after a lost
	// answer gets the same reservation back. "" makes every request a new
	// attempt.
	RequestID string
	Qty       int64 // units; 0 means 1
	// Variant is the variant of the sale the attempt buys (a size, a
	// colour: stock.Activity.Variants): "" buys the sale's activity
	// itself; otherwise a variant ID of the sale ([stock.ValidID], and
	// "<activity>/<variant>" at most [stock.MaxIDLen] bytes, the width of
	// the order's line column), and every stock call of the attempt — the
	// sold-out flag, the spent-token rule's Held and Lookup, the replay
	// lookup, Reserve, the undo's Release, the resubmit — addresses
	// stock.VariantOf(sale, Variant). A malformed variant is refused
	// [BadRequest] (final); a variant the sale does not have is refused
	// [BadRequest] (final) once the stock says so (a variant of a sale
	// not loaded yet is [NotStarted], retryable).
	//
	// The variant is part of the attempt's identity: the reservation ID of
	// a variant attempt is [ReservationID](user, request ID) + "/" +
	// Variant (a server-made ID + "/" + Variant without a request ID), so
	// a retry of the same request ID naming the same variant gets its
	// reservation back (Replayed), and one naming another variant is
	// another attempt — never the first one's reservation, its unit or its
	// order handed out for the wrong variant; a second unit it takes counts
	// against the per-user caps (the variant's and the sale's over all its
	// variants) like any other attempt's. The rule keeps ReservationID's
	// guarantees: one to one with (user, request ID, variant) (neither a
	// request ID nor a user ID holds '/'), prefix-free across users (the
	// user's prefix still leads), and within the stores' limit: the order
	// is an order with one line ([order.Message.Lines]) whose stock
	// reservation is "<reservation ID>#0", so a reservation ID that leaves
	// no room for "#0" within [stock.MaxReservationIDLen] bytes (a long
	// user and request ID with a long variant) is refused BadRequest: use
	// a shorter request ID.
	Variant string

	Token     string // the access token ([Config.Tokens])
	CaptchaID string // the captcha ([Config.Captcha])
	Captcha   string
	PoW       string     // the proof of work's payload ([Config.PoW])
	Link      string     // the signed buy path's token ([Config.Link])
	IP        netip.Addr // for [Config.Risk]
	Device    string
	At        time.Time // when it arrived; zero: now

	reservation string
	risk        risk.Decision // the risk step's decision
	found       bool          // replay: the attempt's reservation exists, held
	heldQty     int64         // what the replayed reservation holds
	released    bool          // the hand-off released the reservation already

	fusedTo int                                           // the fused admission covered the steps before this one
	replies map[string]func(context.Context) (any, error) // the fused script's answers, by step
}

// Risk is the risk step's decision, once it has run (for a step of one's
// own after it, e.g. a priority class by risk; zero before).
func (a *Attempt) Risk() risk.Decision { return a.risk }

// Reservation is the attempt's reservation ID, once a step has set it.
func (a *Attempt) Reservation() string { return a.reservation }

// SetReservation sets the attempt's reservation ID, for a step that
// replaces the shape step's rule ([ReservationID]). A rule of one's own must
// keep what ReservationID guarantees — one to one with (user, request ID),
// and the variant ([Attempt.Variant]: the shape step appends "/" + Variant),
// prefix-free across users, within every store's limit with room for a
// variant's "#0" — or retries and other buyers' attempts collide; package
// checkouttest checks it (its variant_retry scenario fails a rule that
// drops the variant).
func (a *Attempt) SetReservation(id string) { a.reservation = id }

// Kind is how an attempt ended.
type Kind uint8

const (
	// Accepted: a unit is reserved and the order message handed on; the
	// result follows (queued).
	Accepted Kind = iota + 1
	// Replayed: a retry of an attempt that reserved. Result says what became
	// of it: settled (an order, or a failure), or still queued, its
	// message handed on again.
	Replayed
	// Refused: a step said no. Reason says why; Final says whether the same
	// attempt can ever succeed; RetryAfter, when set, when to try again.
	Refused
	// Busy: an infrastructure failure (Err). Nothing is held; retry.
	Busy
)

// String is the kind's name.
func (k Kind) String() string {
	switch k {
	case Accepted:
		return "accepted"
	case Replayed:
		return "replayed"
	case Refused:
		return "refused"
	case Busy:
		return "busy"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Reason is why an attempt was refused: a machine status a client can act
// on.
type Reason string

// The reasons the default steps give.
const (
	SoldOut       Reason = "sold_out"       // final
	AlreadyBought Reason = "already_bought" // final: the buyer's cap is held (or the token spent while holding)
	Limited       Reason = "limited"        // retryable: a rate limit; RetryAfter when known
	BadCaptcha    Reason = "captcha"        // retryable with a new captcha
	BadToken      Reason = "token"          // final for this token or link
	Denied        Reason = "denied"         // final: risk control
	NotStarted    Reason = "not_started"    // retryable
	Ended         Reason = "ended"          // final
	Paused        Reason = "paused"         // retryable: an operator paused the sale
	TryAgain      Reason = "busy"           // retryable: the sale is being rebuilt, or Redis is out and the DB pool empty
	HandoffFailed Reason = "retry"          // retryable: neither Kafka nor the outbox took the order; the reservation was released
	Released      Reason = "released"       // final: this attempt's reservation was released; start a new attempt
	BadRequest    Reason = "bad_request"    // final: a malformed attempt
)

// Outcome is how an attempt ended. The zero Outcome, returned by a step,
// means "go on".
type Outcome struct {
	Kind        Kind
	Step        string // the step that ended the attempt ("" when every step passed)
	Reason      Reason // Refused
	Message     string // a human sentence for Refused, never internal error text
	Final       bool   // Refused: retrying this attempt cannot succeed
	RetryAfter  time.Duration
	Reservation string       // Accepted, Replayed
	Result      order.Result // Replayed: StatusQueued when handed on again
	Err         error        // Busy: the failure, for the log
}

// refuse is a refusal; final or not.
func refuse(r Reason, final bool, msg string) Outcome {
	return Outcome{Kind: Refused, Reason: r, Final: final, Message: msg}
}

// busy is an infrastructure failure.
func busy(err error) Outcome {
	return Outcome{Kind: Busy, Reason: TryAgain, Message: "busy, retry shortly", Err: err}
}

// CaptchaRequired is the message of the refusal ([BadCaptcha]) that asks
// an attempt risk challenged for a captcha, under [Config.PoW].
const CaptchaRequired = "captcha required"

// MaxRequestIDLen is the longest [Attempt.RequestID]: with a user ID of at
// most stock.MaxIDLen (64) bytes, a client attempt's reservation ID
// "u<len>.<user>-<request ID>" is at most 4+64+1+40 = 109 bytes, within the
// reservation-ID rule of every store that keeps it (stock and order:
// 128; checked by [New]).
const MaxRequestIDLen = 40

// ReservationID is the reservation ID of user's attempt requestID,
// "u<len(user)>.<user>-<request ID>": one to one (user and request IDs may
// both contain "-"; the length makes the split unique), prefix-free across
// users (no user's IDs start with another's prefix), never a server-made ID
// ("r…"). It fails for an invalid user or request ID.
func ReservationID(user, requestID string) (string, error) {
	if !stock.ValidID(user) {
		return "", fmt.Errorf("checkout: user %q: 1-%d of [A-Za-z0-9._@+-]", user, stock.MaxIDLen)
	}
	if !validRequestID(requestID) {
		return "", fmt.Errorf("checkout: request_id: 1-%d of [A-Za-z0-9_-]", MaxRequestIDLen)
	}
	return reservationPrefix(user) + requestID, nil
}

// reservationPrefix starts every reservation ID of user's attempts, and no
// other user's.
func reservationPrefix(user string) string {
	return "u" + strconv.Itoa(len(user)) + "." + user + "-"
}

func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// lineEntry is the suffix of a variant attempt's stock reservation: its
// order is an order with one line, and line 0 of the order of reservation
// R is held in stock under "R#0" (order.Message.Lines).
const lineEntry = "#0"

// withVariant is the reservation ID of a variant attempt whose ID without
// the variant is id: id + "/" + variant ("" leaves id as it is).
func withVariant(id, variant string) string {
	if variant == "" {
		return id
	}
	return id + "/" + variant
}

// variantOf is the variant a checkout's reservation ID names ("" for the
// sale's own activity), and false when the part after '/' is no variant
// ID: no checkout made it.
func variantOf(id string) (string, bool) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", true
	}
	return id[i+1:], stock.ValidID(id[i+1:])
}

// entryOf is the stock reservation ID of reservation id of variant v: id
// itself, or its line's "<id>#0".
func entryOf(id, variant string) string {
	if variant == "" {
		return id
	}
	return id + lineEntry
}

// maxEntryLen is the longest stock reservation (and order reservation) ID.
const maxEntryLen = min(stock.MaxReservationIDLen, order.MaxReservationIDLen)

// longestReservationID is the longest ID a checkout makes: a client
// attempt's with the longest user and request IDs (server-made ones are
// shorter: "r" + 8 + "." + 9 + "." + 13).
const longestReservationID = 1 + 2 + 1 + stock.MaxIDLen + 1 + MaxRequestIDLen

// checkIDRule: every ID a checkout makes is one the stores take.
func checkIDRule() error {
	if longestReservationID > stock.MaxReservationIDLen || longestReservationID > order.MaxReservationIDLen {
		return fmt.Errorf("%w: reservation IDs up to %d bytes, stock takes %d, order %d", ErrInvalidConfig,
			longestReservationID, stock.MaxReservationIDLen, order.MaxReservationIDLen)
	}
	return nil
}
