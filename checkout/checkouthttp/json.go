package checkouthttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
)

// view is the buyer's view of a reservation: the body of a result read, of
// a stream's event and of a settled replay.
type view struct {
	Status      string `json:"status"` // queued | created | paid | cancelled | failed | unknown
	Reservation string `json:"reservation,omitempty"`
	OrderNo     string `json:"order_no,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Variant is the variant the reservation holds (checkout.Attempt.Variant;
	// absent for the sale's own activity): from the attempt, or from the
	// order's one line of a variant ("<sale>/<variant>").
	Variant string `json:"variant,omitempty"`
	// Lines: of an order with lines, each line's activity, units, price
	// and own state (order.Line's JSON); of a queued variant reservation,
	// its one line's activity and units.
	Lines []order.Line `json:"lines,omitempty"`
}

// same reports whether v and w read alike (a stream sends only changes).
func (v view) same(w view) bool {
	return v.Status == w.Status && v.Reservation == w.Reservation && v.OrderNo == w.OrderNo && v.Reason == w.Reason &&
		v.Variant == w.Variant && slices.Equal(v.Lines, w.Lines)
}

// final reports whether v can no longer change into anything but a paid or
// cancelled order: a stream ends at it.
func (v view) final() bool { return v.Status != "queued" && v.Status != "unknown" && v.Status != "" }

// view is the buyer's view of res, a result of the buyer's own
// ([checkout.Checkout.Result] or a replay). Nothing known reads
// {"status":"unknown"} and nothing else, so an unknown reservation and
// another buyer's read alike.
func (h *Handler) view(ctx context.Context, res order.Result) view {
	v := view{Reservation: res.ReservationID, OrderNo: res.OrderNo, Reason: res.Reason, Lines: res.Lines, Variant: variantOf(res)}
	switch res.Status {
	case order.StatusQueued:
		v.Status, v.OrderNo, v.Reason = "queued", "", ""
	case order.StatusFailed:
		v.Status = "failed"
		if res.Reason == status.ReasonCancelled && res.OrderNo != "" {
			v.Status, v.Reason = "cancelled", ""
		}
	case order.StatusSuccess:
		v.Status, v.Reason = "created", ""
		if h.o.orderStatus != nil && res.OrderNo != "" {
			if s, err := h.o.orderStatus(ctx, res.OrderNo); err == nil && isOrderStatus(s) {
				v.Status = strings.ToLower(s)
			}
		}
	default:
		return view{Status: "unknown"}
	}
	return v
}

// variantOf is the variant of res: its one line's, when that line is a
// variant of res's activity ("<activity>/<variant>"), else "".
func variantOf(res order.Result) string {
	if len(res.Lines) != 1 {
		return ""
	}
	v, ok := strings.CutPrefix(res.Lines[0].ActivityID, res.Activity+"/")
	if !ok || res.Activity == "" {
		return ""
	}
	return v
}

// isOrderStatus reports whether s, any case, is a status an order view
// shows (order.OrderCreated, OrderPaid, OrderCancelled).
func isOrderStatus(s string) bool {
	switch strings.ToLower(s) {
	case "created", "paid", "cancelled":
		return true
	}
	return false
}

// writeErr answers a refusal in the one error shape of the library's HTTP
// APIs, [admin.ErrorAnswer]: a machine status and a human message, never
// internal error text.
func writeErr(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, admin.ErrorAnswer{Status: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the types here always encode
		code, b = http.StatusInternalServerError, []byte(`{"status":"busy","message":"`+msgBusy+`"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// isJSON reports whether a Content-Type names JSON ("application/json",
// optionally with parameters such as charset).
func isJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// maxBody caps a buy's body (one is < 200 bytes).
const maxBody = 4096

// maxEchoedName caps the piece of a body a refusal quotes (an unknown
// field's name), in bytes before escaping.
const maxEchoedName = 32

// BodyProblem says what is wrong with a JSON request body a decoder refused
// (encoding/json with DisallowUnknownFields, behind an
// http.MaxBytesReader of 4 KiB): the unknown
// field by name, the field of the wrong type, a body that is too large,
// empty or not JSON. It quotes at most maxEchoedName bytes of the input,
// escaped to printable ASCII, and never the decoder's own text. (The
// reference deployment answers its own bodies with it too.)
func BodyProblem(err error) string {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return "body too large (at most " + strconv.Itoa(maxBody) + " bytes)"
	case errors.Is(err, io.EOF):
		return "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not JSON (the body ends too soon)"
	case errors.As(err, &syntaxErr):
		return "not JSON (at byte " + strconv.FormatInt(syntaxErr.Offset, 10) + ")"
	case errors.As(err, &typeErr):
		got, _, _ := strings.Cut(typeErr.Value, " ") // "number", "array", …: the kind, not the value
		if typeErr.Field == "" {
			return "the body must be a JSON object, not " + quoteInput(got)
		}
		want := "a JSON value of another kind"
		if typeErr.Type != nil {
			want = typeErr.Type.Kind().String()
		}
		return "wrong type for field " + quoteInput(typeErr.Field) + ": want a " + want + ", got " + quoteInput(got)
	}
	// encoding/json's unknown-field error is a plain one: `json: unknown
	// field "<name>"`.
	if q, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if name, uerr := strconv.Unquote(q); uerr == nil {
			return "unknown field " + quoteInput(name)
		}
		return "unknown field"
	}
	return "malformed body"
}

// quoteInput quotes a piece of a client's input for a message: at most
// maxEchoedName bytes of it (cut on a character boundary, "..." marking the
// cut), escaped to printable ASCII.
func quoteInput(s string) string {
	if len(s) <= maxEchoedName {
		return strconv.QuoteToASCII(s)
	}
	cut := maxEchoedName
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.QuoteToASCII(s[:cut]) + "..."
}
