package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// Handler is the admin API: an http.Handler over a [Backend], with its own
// authentication hook and an audit log in a gorm database. See the package
// documentation for the routes. It is safe for concurrent use.
type Handler struct {
	b     Backend
	auth  Authenticator
	audit auditLog
	o     options
	dry   *dryRuns
}

// New returns the admin handler over b, writing its audit log to db and
// authenticating every request with auth. b, db and auth are required (nil
// is [ErrInvalidConfig]). Options: [WithPrefix], [WithTable], [WithClock],
// [WithLogger], [WithMaxBody], [WithDryRunWindow], [WithActionTimeout].
// New does no I/O: call [Handler.AutoMigrate] (or create the table by hand)
// before serving.
func New(b Backend, db *gorm.DB, auth Authenticator, opts ...Option) (*Handler, error) {
	switch {
	case b == nil:
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidConfig)
	case db == nil:
		return nil, fmt.Errorf("%w: nil audit database", ErrInvalidConfig)
	case auth == nil:
		return nil, fmt.Errorf("%w: nil authenticator", ErrInvalidConfig)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return &Handler{b: b, auth: auth, audit: auditLog{db: db, table: o.table}, o: o, dry: newDryRuns(o.dryRunWindow)}, nil
}

// AutoMigrate creates or updates the audit table (its name set by
// [WithTable]) and its indexes.
func (h *Handler) AutoMigrate(ctx context.Context) error { return h.audit.migrate(ctx) }

// call is one authenticated request.
type call struct {
	operator  string
	requestID string
	vars      []string // path parameters, in route order
}

// maxOperatorLen is the longest operator name an Authenticator may return.
const maxOperatorLen = 128

// ServeHTTP authenticates the request, then routes it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{requestID: r.Header.Get("X-Request-ID")}
	if !ValidID(c.requestID) {
		c.requestID = newRequestID()
	}
	w.Header().Set("X-Request-ID", c.requestID)

	op, err := h.auth(r)
	if err == nil && !validOperator(op) {
		h.o.log.ErrorContext(r.Context(), "admin: authenticator returned an unusable operator name", "request_id", c.requestID, "len", len(op))
		err = ErrUnauthorized
	}
	if err != nil {
		if errors.Is(err, ErrForbidden) {
			writeError(w, apiError{http.StatusForbidden, CodeForbidden, "forbidden"})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="seckill-admin"`)
		writeError(w, apiError{http.StatusUnauthorized, CodeUnauthorized, "authentication required"})
		return
	}
	c.operator = op

	rest, ok := strings.CutPrefix(r.URL.Path, h.o.prefix)
	if !ok {
		writeError(w, notFound())
		return
	}
	rt, vars, allow := match(rest, r.Method)
	switch {
	case rt == nil && allow != "":
		w.Header().Set("Allow", allow)
		writeError(w, apiError{http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed"})
		return
	case rt == nil:
		writeError(w, notFound())
		return
	}
	c.vars = vars
	for i, v := range vars {
		if err := checkID(rt.vars[i], v); err != nil {
			writeError(w, invalidArg(rt.vars[i]+": want 1..64 bytes of [A-Za-z0-9._@+-]"))
			return
		}
	}
	if len(rt.vars) > 1 && rt.vars[1] == "variant" {
		// A size of a sale in sizes: the Backend takes "<activity>/<variant>".
		a := vars[0] + "/" + vars[1]
		if len(a) > MaxIDLen {
			writeError(w, invalidArg(fmt.Sprintf("activity/variant: at most %d bytes together", MaxIDLen)))
			return
		}
		c.vars = append([]string{a}, vars[2:]...)
	}
	if e, ok := checkQuery(r, rt.query); !ok {
		writeError(w, e)
		return
	}
	rt.serve(h, w, r, c)
}

func validOperator(op string) bool {
	if op == "" || len(op) > maxOperatorLen || !utf8.ValidString(op) {
		return false
	}
	for _, c := range op {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkQuery refuses query parameters the route does not take (actions
// take none: their input is the body), and repeated ones.
func checkQuery(r *http.Request, allowed []string) (apiError, bool) {
	q, err := urlQuery(r)
	if err != nil {
		return badRequest("malformed query string"), false
	}
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return badRequest("unknown query parameter " + quoteShort(k)), false
		}
		if len(vs) > 1 {
			return badRequest("repeated query parameter " + quoteShort(k)), false
		}
	}
	return apiError{}, true
}

// quoteShort quotes s for an error message, cut to 32 bytes.
func quoteShort(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return fmt.Sprintf("%q", s)
}

// mutation is one audited action.
type mutation struct {
	action   string
	activity string
	target   string
	params   any
	// claim, when set, runs after the idempotency check and before the
	// attempt row; it refuses the action with an answer, or returns an
	// undo run when the attempt row cannot be written.
	claim func() (undo func(), refuse *apiError)
	// run performs the action and returns the states to record and the
	// answer to send.
	run func(ctx context.Context) (before, after, resp any, err error)
}

// MaxIdempotencyKeyLen is the longest Idempotency-Key header accepted.
const MaxIdempotencyKeyLen = 128

// mutate runs m with its audit row: an "attempt" row is written first (the
// action is refused with 503 audit_unavailable when it cannot be), the
// action runs on a context detached from the client's, and the row is
// completed with the states, the outcome and the answer. With an
// Idempotency-Key, a repeat of the operator's key answers what the first
// request answered without acting again.
func (h *Handler) mutate(w http.ResponseWriter, r *http.Request, c *call, m mutation) {
	ctx := r.Context()
	params := marshal(m.params)
	var key *string
	fp := ""
	if vs := r.Header.Values("Idempotency-Key"); len(vs) > 0 {
		k := vs[0]
		if len(vs) > 1 || !validKey(k) {
			writeError(w, invalidArg(fmt.Sprintf("Idempotency-Key: want one header of 1..%d printable ASCII bytes", MaxIdempotencyKeyLen)))
			return
		}
		sum := sha256.Sum256([]byte(m.action + "\x00" + m.activity + "\x00" + m.target + "\x00" + string(params)))
		fp = hex.EncodeToString(sum[:])
		if h.replay(w, r, c, k, fp) {
			return
		}
		key = &k
	}
	var undo func()
	if m.claim != nil {
		var refuse *apiError
		if undo, refuse = m.claim(); refuse != nil {
			writeError(w, *refuse)
			return
		}
	}
	row := &auditRow{
		RequestID: c.requestID, Operator: c.operator, Action: m.action,
		Activity: m.activity, Target: m.target, Params: jsonText(params),
		StateBefore: "null", StateAfter: "null", Response: "null",
		Status: AuditAttempt, IdempotencyKey: key, Fingerprint: fp,
		StartedAt: h.o.clock.Now().UTC(),
	}
	if err := h.audit.insert(ctx, row); err != nil {
		if undo != nil {
			undo()
		}
		// A concurrent request with the same key may have won the insert.
		if key != nil && h.replay(w, r, c, *key, fp) {
			return
		}
		h.o.log.ErrorContext(ctx, "admin: audit attempt row not written; action refused",
			"request_id", c.requestID, "action", m.action, "err", err)
		writeError(w, auditUnavailable())
		return
	}

	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.actionTimeout)
	actx = WithAction(actx, Action{ID: "audit-" + strconv.FormatUint(row.ID, 10), Operator: c.operator, RequestID: c.requestID})
	before, after, resp, err := m.run(actx)
	cancel()
	status, body := http.StatusOK, marshal(resp)
	row.Status = AuditOK
	if err != nil {
		e := h.backendError(ctx, c, m.action, err)
		status, body = e.status, e.body()
		row.Status, row.ErrorCode = AuditFailed, e.code
	}
	fin := h.o.clock.Now().UTC()
	row.StateBefore, row.StateAfter = jsonText(marshal(before)), jsonText(marshal(after))
	row.HTTPStatus, row.Response, row.FinishedAt = status, jsonText(body), &fin
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.actionTimeout)
	if ferr := h.audit.finish(fctx, row); ferr != nil {
		// The action is done; answer it. The row stays "attempt": an
		// operator reading the log sees an action of unknown outcome.
		h.o.log.ErrorContext(ctx, "admin: audit row not completed",
			"request_id", c.requestID, "audit_id", row.ID, "action", m.action, "err", ferr)
	}
	fcancel()
	writeJSON(w, status, body)
}

func validKey(k string) bool {
	if k == "" || len(k) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// replay answers a request whose Idempotency-Key the operator used before
// and reports whether it did.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request, c *call, key, fp string) bool {
	row, err := h.audit.byKey(r.Context(), c.operator, key)
	if err != nil {
		h.o.log.ErrorContext(r.Context(), "admin: audit lookup failed", "request_id", c.requestID, "err", err)
		writeError(w, auditUnavailable())
		return true
	}
	switch {
	case row == nil:
		return false
	case row.Fingerprint != fp:
		writeError(w, apiError{http.StatusUnprocessableEntity, CodeKeyReused, "the Idempotency-Key was used for a different request"})
	case row.Status == AuditAttempt:
		writeError(w, apiError{http.StatusConflict, CodeInProgress, "the first request with this Idempotency-Key has not finished"})
	default:
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, row.HTTPStatus, []byte(row.Response))
	}
	return true
}

// backendError maps err to its answer and logs the ones that are not the
// client's doing.
func (h *Handler) backendError(ctx context.Context, c *call, what string, err error) apiError {
	e := backendError(err)
	if e.status >= 500 {
		h.o.log.LogAttrs(ctx, slog.LevelError, "admin: backend failed",
			slog.String("request_id", c.requestID), slog.String("op", what), slog.Any("err", err))
	}
	return e
}

// read answers a GET from the backend.
func (h *Handler) read(w http.ResponseWriter, r *http.Request, c *call, what string, f func(ctx context.Context) (any, error)) {
	v, err := f(r.Context())
	if err != nil {
		writeError(w, h.backendError(r.Context(), c, what, err))
		return
	}
	writeJSON(w, http.StatusOK, marshal(v))
}

// now is the handler clock's time.
func (h *Handler) now() time.Time { return h.o.clock.Now() }

// ctxT shortens the signatures of the route functions.
type ctxT = context.Context

// Action describes the audited action a Backend call serves: its ID (the
// audit row's, unique and stable for this action, so a Backend can use it
// as the idempotency key of what it writes, such as a stock adjustment),
// the operator and the request ID.
type Action struct {
	ID        string
	Operator  string
	RequestID string
}

type actionKey struct{}

// WithAction returns ctx carrying a, as the handler gives it to every
// mutating Backend call: for a Backend's own tests, or a caller that drives
// a Backend outside the handler with an action ID of its own.
func WithAction(ctx context.Context, a Action) context.Context {
	return context.WithValue(ctx, actionKey{}, a)
}

// ActionOf returns the audited action a mutating Backend call serves; false
// outside one (a read, a dry run).
func ActionOf(ctx context.Context) (Action, bool) {
	a, ok := ctx.Value(actionKey{}).(Action)
	return a, ok
}
