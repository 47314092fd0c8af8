package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouthttp"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// The buy: POST /api/buy/{activity}/{sig} is one attempt of the sale's
// checkout (build.go's buildCheckout). checkout runs the steps in order,
// cheapest refusals first, the guarded ones inside the Redis breaker, and
// gives back what earlier steps took (the access token, the reservation)
// when the attempt ends busy or with a retryable refusal. handleBuy reads
// the request into a checkout.Attempt and answers the Outcome in the API's
// shape, counting each refusal by the step that refused
// (seckill_refusals_total{stage}). The README's flow diagram is generated
// from the steps (TestFlowDiagramMatchesChain).

// handleBuy answers one buy and counts its outcome.
func (a *App) handleBuy(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	user, _ := userOf(r)
	outcome := a.buy(w, r, user)
	a.m.buyOutcomes.WithLabelValues(outcome).Inc()
	a.m.buyLatency.Observe(time.Since(start).Seconds())
}

// buy answers the request and returns the outcome's name
// (seckill_buy_outcomes_total{outcome}).
func (a *App) buy(w http.ResponseWriter, r *http.Request, user string) string {
	if r.PathValue("activity") != a.sale.key {
		a.refuse(w, r, "activity", http.StatusNotFound, "token", "unknown activity")
		return "token"
	}
	// Sold out, and none of the buyer's attempts won a unit (nearly every
	// buyer of a sold-out sale): refused before the body is read at all,
	// with no I/O. Reading it cost each refusal the parse and net/http's
	// background read of the connection (TestSoldOutRefusalReadsNoBody).
	if a.co.SoldOutFor(user) {
		a.m.reserve.WithLabelValues("sold_out_local").Inc()
		a.refuse(w, r, checkout.StepSoldOut, http.StatusConflict, "sold_out", "sold out")
		return "sold_out"
	}
	var req buyRequest
	if err := readBuyRequest(r, &req); err != nil {
		// What is wrong, with at most a short, escaped piece of the input
		// (badBody); counted as a refusal of the body.
		a.m.refused.WithLabelValues("body").Inc()
		writeJSON(w, http.StatusBadRequest, badBody("bad body", err))
		return "bad_request"
	}
	if msg := a.sale.variantRule(req.Variant); msg != "" {
		a.m.refused.WithLabelValues("body").Inc()
		writeErr(w, http.StatusBadRequest, "bad_request", msg)
		return "bad_request"
	}
	at := checkout.Attempt{User: user, RequestID: req.RequestID, Token: req.Token, CaptchaID: req.CaptchaID, Captcha: req.Captcha, PoW: req.PoW,
		Link: r.PathValue("sig"), IP: a.p.ips.ClientIP(r), Device: r.Header.Get("X-Device-ID"), Variant: req.Variant}
	return a.answerBuy(w, r, a.co.Buy(r.Context(), &at))
}

// answerBuy writes o as the API answers it and returns the outcome's name:
// "queued" (accepted, or a retry still queued), "replayed" (a retry whose
// result is settled), "failed" (a retry of a released attempt), "busy", or
// the refusal's status.
func (a *App) answerBuy(w http.ResponseWriter, r *http.Request, o checkout.Outcome) string {
	switch o.Kind {
	case checkout.Accepted:
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "queued", "reservation": o.Reservation})
		return "queued"
	case checkout.Replayed:
		if o.Result.Status == order.StatusSuccess || o.Result.Status == order.StatusFailed {
			writeJSON(w, http.StatusOK, a.view(r.Context(), o.Result))
			return "replayed"
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "queued", "reservation": o.Reservation})
		return "queued"
	case checkout.Busy:
		a.fail(w, r, o.Step, o.Err)
		return "busy"
	}
	if o.Reason == checkout.Released { // the buyer holds nothing: start a new attempt
		writeJSON(w, http.StatusConflict, map[string]string{"status": "failed", "reservation": o.Reservation, "reason": "released"})
		return "failed"
	}
	code, msg := checkouthttp.Status(o), o.Message // the one table, shared with checkouthttp
	switch o.Step {
	case checkout.StepShape:
		if o.Reason == checkout.BadRequest { // the request ID: the sale, the buyer and the quantity are the app's own
			msg = requestIDRule
		}
	case checkout.StepSoldOut:
		a.m.reserve.WithLabelValues("sold_out_local").Inc()
	case checkout.StepGlobal:
		a.m.limited.WithLabelValues("global").Inc()
	case checkout.StepUserLimit: // the window frees a slot after RetryAfter: the next whole second
		w.Header().Set("Retry-After", strconv.Itoa(int(o.RetryAfter.Seconds())+1))
	case checkout.StepReplay:
		if o.Reason == checkout.BadRequest {
			// Another buyer's reservation under this attempt's ID (IDs are
			// one to one, so only a bug or a hand-made entry gets here).
			a.logger(r.Context()).Error("attempt ID names another buyer's reservation", "reservation", o.Reservation)
			code = http.StatusConflict
		}
	case checkout.StepReserve:
		if o.Reason == checkout.AlreadyBought {
			msg = "one per person"
			if n := a.sale.act.PerUserLimit; n > 1 {
				msg = fmt.Sprintf("at most %d per person", n)
			}
		}
	case checkout.StepSubmit:
		if o.Reason == checkout.HandoffFailed { // the submitter released it through the fence
			a.m.released.WithLabelValues("submit_failed").Inc()
		}
	}
	if o.RetryAfter > 0 && o.Step != checkout.StepUserLimit {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(o.RetryAfter.Seconds()))))
	}
	a.refuse(w, r, o.Step, code, string(o.Reason), msg)
	return string(o.Reason)
}

// requestIDRule is the refusal of a request ID checkout refuses
// (checkout.ReservationID).
var requestIDRule = "request_id: 1-" + strconv.Itoa(checkout.MaxRequestIDLen) + " of [A-Za-z0-9_-] (the reservation ID u<len>.<user>-<request_id> is at most " +
	strconv.Itoa(stock.MaxReservationIDLen) + " bytes)"

// stepDocs describes checkout's steps for the flow diagram: what each
// costs and what it checks.
var stepDocs = map[string]struct{ io, does string }{
	checkout.StepShape:     {"no I/O", "shape of access token, captcha ID, request ID; the reservation ID"},
	checkout.StepWindow:    {"no I/O", "the sale is open by this node's clock"},
	checkout.StepSoldOut:   {"no I/O", "in-process sold-out flag (stock.Deductor.SoldOut); a retry that won passes"},
	checkout.StepGlobal:    {"no I/O", "this node's global bucket (limiter.TokenBucket)"},
	checkout.StepRisk:      {"Redis", "blacklist, behaviour, device (risk.Checker)"},
	checkout.StepUserLimit: {"Redis", "per-user window (limiter; its own local fallback, no breaker)"},
	checkout.StepReplay:    {"Redis", "a retried attempt gets its reservation back (stock ledger)"},
	checkout.StepResubmit:  {"DB|Kafka", "… answered from the DB, or its message handed on again"},
	checkout.StepLink:      {"no I/O", "signed buy path (token.Signer.Verify, HMAC)"},
	checkout.StepCaptcha:   {"Redis", "captcha, verified once (captcha.Store)"},
	checkout.StepToken:     {"Redis", "access token, consumed once (token.Pool.Consume)"},
	checkout.StepReserve:   {"Redis", "stock.Reserve: one Lua call (DB pool when Redis is out)"},
	checkout.StepSubmit:    {"Kafka|DB", "handoff.Submitter: Kafka, else outbox, else release"},
}

// flowDiagram renders the checkout's steps as the README shows them, after
// the two lines of what comes before them: ⛨ marks a step run inside the
// Redis breaker.
func flowDiagram(steps []checkout.Step) string {
	var sb strings.Builder
	sb.WriteString("auth (risk.AuthCache over risk.SessionStore, before the checkout: in-process cache, else one Redis GET)\n")
	sb.WriteString("handleBuy: the path names this node's sale; sold out and no attempt of the buyer's won: 409, the body unread\n")
	for i, s := range steps {
		mark, undo := " ", ""
		if s.Guarded {
			mark = "⛨"
		}
		if s.Undo != nil {
			undo = "  [undone when the attempt ends retryable]"
		}
		d := stepDocs[s.Name]
		fmt.Fprintf(&sb, "→ %2d. %s %-12s %-10s %s%s\n", i+1, mark, s.Name, d.io, d.does, undo)
	}
	sb.WriteString("→ 202 {\"status\":\"queued\",\"reservation\":ID}\n")
	return sb.String()
}

// ---- the body ----

type buyRequest struct {
	Token     string `json:"token"`
	CaptchaID string `json:"captcha_id"`
	Captcha   string `json:"captcha"`
	PoW       string `json:"pow"` // -bot-defence=pow: the solved challenge
	// RequestID is the client's idempotency key for one purchase attempt
	// (1–40 of [A-Za-z0-9_-]), reused on every retry of that attempt: the
	// reservation ID is derived from it, so a retry after a lost answer
	// gets the same reservation back instead of a second one or a refusal.
	// Optional; without it every request is a new attempt.
	RequestID string `json:"request_id"`
	// Variant is the size picked, for a sale with variants (variants.go):
	// required there, refused elsewhere.
	Variant string `json:"variant"`
}

// readBuyRequest reads a buy's body into req exactly as readJSON does
// (same answers, same errors or lack of them), without encoding/json's
// reflection for the body every client sends: one flat object of the four
// keys spelled as declared, whose values are strings of printable ASCII
// without escapes. Any other body (another spelling, an escape, a number,
// an unknown key, no Content-Length or more than maxBody) goes to
// readJSON's decoder over the same bytes. Every buy that is not refused
// before its body is read comes through here, so this is the hottest
// decoding of the service.
func readBuyRequest(r *http.Request, req *buyRequest) error {
	n := r.ContentLength
	if n <= 0 || n > maxBody {
		return readJSON(r, req)
	}
	bp := bodyBufs.Get().(*[maxBody]byte)
	defer bodyBufs.Put(bp)
	buf := bp[:n]
	got := 0
	var rerr error
	for got < len(buf) && rerr == nil {
		var k int
		k, rerr = r.Body.Read(buf[got:])
		got += k
	}
	if got == len(buf) {
		// The decoder, too, takes a complete value before looking at a
		// read error, and never looks past the value's end.
		fast := *req
		if parseBuyRequest(string(buf), &fast) {
			*req = fast
			return nil
		}
	}
	// readJSON's decoder over the same stream: the bytes read, then what
	// the body has left (nothing: its Content-Length is read) or its error.
	rest := io.Reader(http.MaxBytesReader(nil, r.Body, maxBody-int64(got)))
	if rerr != nil {
		rest = errReader{rerr}
	}
	dec := json.NewDecoder(io.MultiReader(bytes.NewReader(buf[:got]), rest))
	dec.DisallowUnknownFields()
	return dec.Decode(req)
}

// bodyBufs holds the read buffers of readBuyRequest.
var bodyBufs = sync.Pool{New: func() any { return new([maxBody]byte) }}

// errReader returns err from every Read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// parseBuyRequest parses s when it is a buyRequest in the plain shape
// readBuyRequest describes (JSON whitespace allowed, anything after the
// closing brace ignored, as json.Decoder ignores it) and reports whether
// it was; req's fields are set as the keys come (the last one of a
// repeated key wins, as in encoding/json).
func parseBuyRequest(s string, req *buyRequest) bool {
	i := skipJSONSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i = skipJSONSpace(s, i+1)
	for {
		key, j, ok := plainJSONString(s, i)
		if !ok {
			return false
		}
		if i = skipJSONSpace(s, j); i >= len(s) || s[i] != ':' {
			return false
		}
		val, j, ok := plainJSONString(s, skipJSONSpace(s, i+1))
		if !ok {
			return false
		}
		switch key {
		case "token":
			req.Token = val
		case "captcha_id":
			req.CaptchaID = val
		case "captcha":
			req.Captcha = val
		case "pow":
			req.PoW = val
		case "request_id":
			req.RequestID = val
		case "variant":
			req.Variant = val
		default:
			return false
		}
		if i = skipJSONSpace(s, j); i >= len(s) {
			return false
		}
		switch s[i] {
		case ',':
			i = skipJSONSpace(s, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
}

// plainJSONString reads the JSON string starting at s[i] when it holds
// only printable ASCII and no escape (what encoding/json decodes to the
// same bytes); end is the index after its closing quote.
func plainJSONString(s string, i int) (v string, end int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipJSONSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func skipJSONSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
