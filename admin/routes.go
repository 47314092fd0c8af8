package admin

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// route is one endpoint: a method and a path pattern whose "{…}" segments
// are IDs.
type route struct {
	method  string
	pattern []string
	vars    []string // names of the {…} segments, in order
	query   []string // query parameters a GET takes
	serve   func(h *Handler, w http.ResponseWriter, r *http.Request, c *call)
}

func newRoute(method, pattern string, query []string, serve func(*Handler, http.ResponseWriter, *http.Request, *call)) route {
	rt := route{method: method, pattern: strings.Split(pattern, "/"), query: query, serve: serve}
	for _, s := range rt.pattern {
		if strings.HasPrefix(s, "{") {
			rt.vars = append(rt.vars, strings.Trim(s, "{}"))
		}
	}
	return rt
}

// routes of the admin API, relative to the prefix.
var routes = []route{
	newRoute(http.MethodGet, "activities/{activity}/stats", nil, (*Handler).stats),
	newRoute(http.MethodGet, "activities/{activity}/reservations", []string{"user"}, (*Handler).reservations),
	newRoute(http.MethodGet, "activities/{activity}/reservations/{reservation}", nil, (*Handler).story),
	newRoute(http.MethodPost, "activities/{activity}/load", nil, (*Handler).load),
	newRoute(http.MethodPost, "activities/{activity}/pause", nil, (*Handler).pause),
	newRoute(http.MethodPost, "activities/{activity}/resume", nil, (*Handler).resume),
	newRoute(http.MethodPost, "activities/{activity}/topup", nil, (*Handler).topUp),
	newRoute(http.MethodPost, "activities/{activity}/withdraw", nil, (*Handler).withdraw),
	newRoute(http.MethodPost, "activities/{activity}/reconcile", nil, (*Handler).reconcile),
	// A size of a sale in sizes ("<activity>/<variant>" to the Backend).
	newRoute(http.MethodGet, "activities/{activity}/variants/{variant}/stats", nil, (*Handler).stats),
	newRoute(http.MethodPost, "activities/{activity}/variants/{variant}/pause", nil, (*Handler).pause),
	newRoute(http.MethodPost, "activities/{activity}/variants/{variant}/resume", nil, (*Handler).resume),
	newRoute(http.MethodPost, "activities/{activity}/variants/{variant}/topup", nil, (*Handler).topUp),
	newRoute(http.MethodPost, "activities/{activity}/variants/{variant}/withdraw", nil, (*Handler).withdraw),
	newRoute(http.MethodPost, "activities/{activity}/orders/{order}/refund", nil, (*Handler).refund),
	newRoute(http.MethodGet, "outbox/stats", nil, (*Handler).outboxStats),
	newRoute(http.MethodPost, "outbox/retry", nil, (*Handler).outboxRetry),
	newRoute(http.MethodGet, "bans", []string{"kind", "after", "limit"}, (*Handler).bans),
	newRoute(http.MethodPost, "ban", nil, (*Handler).ban),
	newRoute(http.MethodPost, "unban", nil, (*Handler).unban),
	newRoute(http.MethodGet, "audit", []string{"activity", "before", "limit"}, (*Handler).auditList),
}

// match finds the route of path and method. When the path matches only
// other methods' routes, allow lists them.
func match(path, method string) (rt *route, vars []string, allow string) {
	segs := strings.Split(path, "/")
	var methods []string
	for i := range routes {
		v, ok := routes[i].match(segs)
		if !ok {
			continue
		}
		if routes[i].method == method {
			return &routes[i], v, ""
		}
		methods = append(methods, routes[i].method)
	}
	return nil, nil, strings.Join(methods, ", ")
}

func (rt *route) match(segs []string) ([]string, bool) {
	if len(segs) != len(rt.pattern) {
		return nil, false
	}
	var vars []string
	for i, p := range rt.pattern {
		if strings.HasPrefix(p, "{") {
			vars = append(vars, segs[i])
		} else if p != segs[i] {
			return nil, false
		}
	}
	return vars, true
}

func urlQuery(r *http.Request) (url.Values, error) { return url.ParseQuery(r.URL.RawQuery) }

// decode reads a POST's JSON body into dst: Content-Type must be
// application/json, the body at most the handler's cap, one JSON object
// without unknown fields. An empty body is {}.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, dst any) (apiError, bool) {
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return apiError{}, true // no body at all: as {} (pause, resume, a bare curl -X POST)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return apiError{http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type must be application/json"}, false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.o.maxBody))
	dec.DisallowUnknownFields()
	err = dec.Decode(dst)
	if err == nil {
		if _, e2 := dec.Token(); !errors.Is(e2, io.EOF) {
			err = e2
			if err == nil {
				err = errors.New("trailing data")
			}
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return apiError{}, true
	case errors.As(err, &tooBig):
		return apiError{http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "request body too large"}, false
	}
	if s, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badRequest("unknown field " + quoteShort(strings.Trim(s, `"`))), false
	}
	return badRequest("malformed JSON body"), false
}

// MaxQuantity is the largest stock, limit or top-up the API accepts: 2^53−1,
// the largest integer Redis' Lua numbers hold exactly.
const MaxQuantity = 1<<53 - 1

// MaxRetryIDs caps the outbox IDs of one retry.
const MaxRetryIDs = 1000

// MaxBanDuration caps a ban's duration.
const MaxBanDuration = 10 * 365 * 24 * time.Hour

// MaxListed caps each list of a reconcile report in an answer (the
// counters stay exact).
const MaxListed = 1000

func (h *Handler) stats(w http.ResponseWriter, r *http.Request, c *call) {
	h.read(w, r, c, "stats", func(ctx ctxT) (any, error) { return h.b.Stats(ctx, c.vars[0]) })
}

// ReservationsAnswer is the answer of GET …/reservations?user=.
type ReservationsAnswer struct {
	Activity     string        `json:"activity"`
	User         string        `json:"user"`
	Reservations []Reservation `json:"reservations"`
}

func (h *Handler) reservations(w http.ResponseWriter, r *http.Request, c *call) {
	user := r.URL.Query().Get("user")
	if !ValidID(user) {
		writeError(w, invalidArg("user: want 1..64 bytes of [A-Za-z0-9._@+-]"))
		return
	}
	h.read(w, r, c, "reservations", func(ctx ctxT) (any, error) {
		rs, err := h.b.Reservations(ctx, c.vars[0], user)
		if rs == nil {
			rs = []Reservation{}
		}
		return ReservationsAnswer{Activity: c.vars[0], User: user, Reservations: rs}, err
	})
}

func (h *Handler) story(w http.ResponseWriter, r *http.Request, c *call) {
	h.read(w, r, c, "story", func(ctx ctxT) (any, error) { return h.b.Story(ctx, c.vars[0], c.vars[1]) })
}

// LoadRequest is the body of POST …/load.
type LoadRequest struct {
	Stock        *int64    `json:"stock"`          // required, 0..MaxQuantity
	PerUserLimit int64     `json:"per_user_limit"` // 0..MaxQuantity; 0 means 1
	Start        time.Time `json:"start,omitzero"` // RFC 3339; zero: open when loaded
	End          time.Time `json:"end,omitzero"`   // RFC 3339; zero: no end
	// Variants: the activity sold in variants (sizes, colours), at most
	// 256; stock is then their sum.
	Variants []Variant `json:"variants,omitempty"`
}

// maxVariants is the most variants one load takes.
const maxVariants = 256

// variantsErr checks a load's variants against its stock and limit:
// the refusal, or ok.
func variantsErr(req LoadRequest) (apiError, bool) {
	if len(req.Variants) == 0 {
		return apiError{}, true
	}
	if len(req.Variants) > maxVariants {
		return invalidArg("variants: at most 256"), false
	}
	seen := map[string]bool{}
	var sum int64
	for _, v := range req.Variants {
		switch {
		case !ValidID(v.ID):
			return invalidArg("variants: each id must be 1..64 bytes of [A-Za-z0-9._@+-]"), false
		case seen[v.ID]:
			return invalidArg("variants: id " + v.ID + " given twice"), false
		case v.Stock < 0 || v.Stock > MaxQuantity:
			return invalidArg("variants: " + v.ID + ": stock 0..2^53-1"), false
		case v.PerUserLimit < 0 || v.PerUserLimit > MaxQuantity:
			return invalidArg("variants: " + v.ID + ": per_user_limit 0..2^53-1"), false
		}
		seen[v.ID] = true
		if sum += v.Stock; sum > MaxQuantity {
			return invalidArg("variants: their stock exceeds 2^53-1"), false
		}
	}
	if sum != *req.Stock {
		return invalidArg("stock must be the variants' sum " + strconv.FormatInt(sum, 10)), false
	}
	return apiError{}, true
}

func (h *Handler) load(w http.ResponseWriter, r *http.Request, c *call) {
	var req LoadRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	switch {
	case req.Stock == nil || *req.Stock < 0 || *req.Stock > MaxQuantity:
		writeError(w, invalidArg("stock: required, 0..2^53-1"))
		return
	case req.PerUserLimit < 0 || req.PerUserLimit > MaxQuantity:
		writeError(w, invalidArg("per_user_limit: 0..2^53-1"))
		return
	case !req.Start.IsZero() && !req.End.IsZero() && !req.End.After(req.Start):
		writeError(w, invalidArg("end must be after start"))
		return
	}
	if e, ok := variantsErr(req); !ok {
		writeError(w, e)
		return
	}
	p := LoadParams{Activity: c.vars[0], Stock: *req.Stock, PerUserLimit: req.PerUserLimit, Start: req.Start, End: req.End, Variants: req.Variants}
	h.change(w, r, c, "load", req, func(ctx ctxT) (Change, error) { return h.b.Load(ctx, p) })
}

// emptyRequest is the body of pause and resume: {} or nothing.
type emptyRequest struct{}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request, c *call) {
	var req emptyRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	h.change(w, r, c, "pause", req, func(ctx ctxT) (Change, error) { return h.b.Pause(ctx, c.vars[0]) })
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request, c *call) {
	var req emptyRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	h.change(w, r, c, "resume", req, func(ctx ctxT) (Change, error) { return h.b.Resume(ctx, c.vars[0]) })
}

// UnitsRequest is the body of POST …/topup and …/withdraw.
type UnitsRequest struct {
	N int64 `json:"n"` // required, 1..MaxQuantity
}

func (h *Handler) units(w http.ResponseWriter, r *http.Request, c *call, action string, f func(ctx ctxT, activity string, n int64) (Change, error)) {
	var req UnitsRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	if req.N <= 0 || req.N > MaxQuantity {
		writeError(w, invalidArg("n: required, 1..2^53-1"))
		return
	}
	h.change(w, r, c, action, req, func(ctx ctxT) (Change, error) { return f(ctx, c.vars[0], req.N) })
}

func (h *Handler) topUp(w http.ResponseWriter, r *http.Request, c *call) {
	h.units(w, r, c, "topup", h.b.TopUp)
}

func (h *Handler) withdraw(w http.ResponseWriter, r *http.Request, c *call) {
	h.units(w, r, c, "withdraw", h.b.Withdraw)
}

// change runs an activity mutation whose answer is a [Change].
func (h *Handler) change(w http.ResponseWriter, r *http.Request, c *call, action string, params any, f func(ctx ctxT) (Change, error)) {
	h.mutate(w, r, c, mutation{
		action: action, activity: c.vars[0], params: params,
		run: func(ctx ctxT) (any, any, any, error) {
			ch, err := f(ctx)
			if err != nil {
				return nil, nil, nil, err
			}
			return ch.Before, ch.After, ch, nil
		},
	})
}

// ReconcileRequest is the body of POST …/reconcile: without Apply a dry
// run; with Apply, DryRunID must be the ID a dry run of the same activity
// returned within the dry-run window, and Plan, when given, that dry run's
// plan digest.
type ReconcileRequest struct {
	Apply    bool   `json:"apply"`
	DryRunID string `json:"dry_run_id,omitempty"`
	// Plan is the dry run's plan digest (optional): an apply whose Plan is
	// not its dry run's is refused (409 plan_changed), so an operator who
	// read one dry run cannot apply another by a mixed-up ID.
	Plan string `json:"plan,omitempty"`
}

// ReconcileAnswer is the answer of POST …/reconcile. Each list of Report is
// cut to MaxListed IDs (Truncated says so); the counters are exact.
//
// A dry run's plan is the reservations its Release lists (after the cut):
// the apply of its DryRunID releases those still due and nothing else, so
// an apply never releases a reservation the operator was not shown. When
// Truncated, apply this plan and run another dry run for the rest.
type ReconcileAnswer struct {
	DryRunID  string    `json:"dry_run_id,omitempty"` // dry run: the ID to apply it with
	ExpiresAt time.Time `json:"expires_at,omitzero"`  // dry run: when the ID stops working
	// Plan is the plan digest (64 hex digits) of the activity and the
	// reservations listed for release: of this dry run, or of the dry run
	// an apply carried out.
	Plan      string          `json:"plan,omitempty"`
	Report    ReconcileReport `json:"report"`
	Released  int64           `json:"released"` // len(Report.Release) before the cut
	Truncated bool            `json:"truncated"`
}

func cutReport(rep ReconcileReport) ReconcileAnswer {
	a := ReconcileAnswer{Report: rep, Released: int64(len(rep.Release))}
	for _, l := range []*[]string{&a.Report.Release, &a.Report.InGrace, &a.Report.Pending, &a.Report.Orphans, &a.Report.Skipped, &a.Report.Failed} {
		if *l == nil {
			*l = []string{}
		}
		if len(*l) > MaxListed {
			*l = (*l)[:MaxListed:MaxListed]
			a.Truncated = true
		}
	}
	return a
}

func (h *Handler) reconcile(w http.ResponseWriter, r *http.Request, c *call) {
	var req ReconcileRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	activity := c.vars[0]
	if !req.Apply {
		if req.DryRunID != "" || req.Plan != "" {
			writeError(w, invalidArg("dry_run_id and plan go with apply: true"))
			return
		}
		rep, err := h.b.Reconcile(r.Context(), ReconcileParams{Activity: activity, DryRun: true})
		if err != nil {
			writeError(w, h.backendError(r.Context(), c, "reconcile dry run", err))
			return
		}
		a := cutReport(rep)
		a.DryRunID, a.ExpiresAt = h.dry.issue(activity, a.Report, h.now())
		a.ExpiresAt = a.ExpiresAt.UTC()
		a.Plan = planDigest(activity, a.Report.Release)
		writeJSON(w, http.StatusOK, marshal(a))
		return
	}
	var dry dryRun
	h.mutate(w, r, c, mutation{
		action: "reconcile", activity: activity, params: req,
		claim: func() (func(), *apiError) {
			d, undo, ok := h.dry.take(activity, req.DryRunID, h.now())
			if !ok {
				return nil, &apiError{http.StatusConflict, CodeDryRunRequired,
					"run a dry run of this activity first and apply it with its dry_run_id before it expires"}
			}
			if req.Plan != "" && req.Plan != d.plan {
				undo()
				return nil, &apiError{http.StatusConflict, CodePlanChanged,
					"the plan is not the one this dry run showed; apply the dry run you read, or run a new one"}
			}
			dry = d
			return undo, nil
		},
		run: func(ctx ctxT) (any, any, any, error) {
			before := cutReport(dry.report).Report
			rep, err := h.b.Reconcile(ctx, ReconcileParams{Activity: activity, Plan: dry.report.Release})
			if err != nil {
				return before, nil, nil, err
			}
			a := cutReport(rep)
			a.Plan = dry.plan
			return before, a.Report, a, nil
		},
	})
}

func (h *Handler) outboxStats(w http.ResponseWriter, r *http.Request, c *call) {
	h.read(w, r, c, "outbox stats", func(ctx ctxT) (any, error) { return h.b.OutboxStats(ctx) })
}

// RetryRequest is the body of POST outbox/retry.
type RetryRequest struct {
	IDs []int64 `json:"ids"` // 1..MaxRetryIDs outbox row IDs, each > 0
}

func (h *Handler) outboxRetry(w http.ResponseWriter, r *http.Request, c *call) {
	var req RetryRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	if len(req.IDs) == 0 || len(req.IDs) > MaxRetryIDs {
		writeError(w, invalidArg("ids: 1..1000 outbox row IDs"))
		return
	}
	ids := slices.Clone(req.IDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if ids[0] <= 0 {
		writeError(w, invalidArg("ids: each > 0"))
		return
	}
	req.IDs = ids
	h.mutate(w, r, c, mutation{
		action: "outbox_retry", target: "outbox", params: req,
		run: func(ctx ctxT) (any, any, any, error) {
			res, err := h.b.OutboxRetry(ctx, ids)
			if err != nil {
				return nil, nil, nil, err
			}
			return res.Before, res.After, res, nil
		},
	})
}

// BansAnswer is the answer of GET bans: a page of active bans, by kind
// (user, ip, device) and ID. Next is the cursor of the next page (pass it
// as after), "" at the end; a page may hold fewer than limit bans, even
// none, before the end.
type BansAnswer struct {
	Bans []Ban  `json:"bans"`
	Next string `json:"next,omitempty"`
}

// MaxBansPage is the largest page of GET bans; the default is 100.
const MaxBansPage = 1000

const defaultBansPage = 100

// banKinds is the order GET bans without a kind lists the kinds in.
var banKinds = []BanKind{BanUser, BanIP, BanDevice}

// bansCursor is GET bans' cursor: "<kind>:<the backend's cursor>", where
// an empty backend cursor starts that kind.
func parseBansCursor(s string) (BanKind, string, bool) {
	k, rest, ok := strings.Cut(s, ":")
	if !ok || !slices.Contains(banKinds, BanKind(k)) || len(rest) > MaxIDLen {
		return "", "", false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c <= 0x20 || c >= 0x7f {
			return "", "", false
		}
	}
	return BanKind(k), rest, true
}

func (h *Handler) bans(w http.ResponseWriter, r *http.Request, c *call) {
	q := r.URL.Query()
	kind := BanKind(q.Get("kind"))
	if kind != "" && !slices.Contains(banKinds, kind) {
		writeError(w, invalidArg("kind: user, ip or device"))
		return
	}
	limit := defaultBansPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxBansPage {
			writeError(w, invalidArg("limit: 1..1000"))
			return
		}
		limit = n
	}
	at, after := kind, ""
	if at == "" {
		at = banKinds[0]
	}
	if s := q.Get("after"); s != "" {
		k, rest, ok := parseBansCursor(s)
		if !ok || (kind != "" && k != kind) {
			writeError(w, invalidArg("after: the next cursor of a previous page of the same listing"))
			return
		}
		at, after = k, rest
	}
	h.read(w, r, c, "bans", func(ctx ctxT) (any, error) {
		bs, next, err := h.b.Bans(ctx, at, after, limit)
		if err != nil {
			return nil, err
		}
		a := BansAnswer{Bans: bs}
		if a.Bans == nil {
			a.Bans = []Ban{}
		}
		switch i := slices.Index(banKinds, at); {
		case next != "":
			a.Next = string(at) + ":" + next
		case kind == "" && i+1 < len(banKinds):
			a.Next = string(banKinds[i+1]) + ":" // the next kind, from its start
		}
		return a, nil
	})
}

// BanRequest is the body of POST ban.
type BanRequest struct {
	Kind   BanKind `json:"kind"`   // user, ip or device
	ID     string  `json:"id"`     // the ID, or the IP address
	Reason string  `json:"reason"` // 1..64 bytes of [A-Za-z0-9._@+-]
	// Duration is a Go duration ("90m", "24h"), up to MaxBanDuration; ""
	// lets the backend choose (its escalation).
	Duration string `json:"duration,omitempty"`
}

func (h *Handler) ban(w http.ResponseWriter, r *http.Request, c *call) {
	var req BanRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	id, err := banSubject(req.Kind, req.ID)
	if err != nil {
		writeError(w, invalidArg("kind must be user, ip or device, and id a valid ID or IP address"))
		return
	}
	if !ValidID(req.Reason) {
		writeError(w, invalidArg("reason: want 1..64 bytes of [A-Za-z0-9._@+-]"))
		return
	}
	var d time.Duration
	if req.Duration != "" {
		if d, err = time.ParseDuration(req.Duration); err != nil || d <= 0 || d > MaxBanDuration {
			writeError(w, invalidArg("duration: a Go duration such as 90m or 24h, up to 87600h"))
			return
		}
	}
	req.ID = id
	p := BanParams{Kind: req.Kind, ID: id, Reason: req.Reason, Duration: d}
	h.banChange(w, r, c, "ban", req, string(req.Kind)+":"+id, func(ctx ctxT) (BanChange, error) { return h.b.Ban(ctx, p) })
}

// UnbanRequest is the body of POST unban.
type UnbanRequest struct {
	Kind BanKind `json:"kind"`
	ID   string  `json:"id"`
}

func (h *Handler) unban(w http.ResponseWriter, r *http.Request, c *call) {
	var req UnbanRequest
	if e, ok := h.decode(w, r, &req); !ok {
		writeError(w, e)
		return
	}
	id, err := banSubject(req.Kind, req.ID)
	if err != nil {
		writeError(w, invalidArg("kind must be user, ip or device, and id a valid ID or IP address"))
		return
	}
	req.ID = id
	h.banChange(w, r, c, "unban", req, string(req.Kind)+":"+id, func(ctx ctxT) (BanChange, error) { return h.b.Unban(ctx, req.Kind, id) })
}

func (h *Handler) banChange(w http.ResponseWriter, r *http.Request, c *call, action string, params any, target string, f func(ctx ctxT) (BanChange, error)) {
	h.mutate(w, r, c, mutation{
		action: action, target: target, params: params,
		run: func(ctx ctxT) (any, any, any, error) {
			ch, err := f(ctx)
			if err != nil {
				return nil, nil, nil, err
			}
			return ch.Before, ch.After, ch, nil
		},
	})
}

// MaxAuditPage is the largest page of GET audit; the default is 50.
const MaxAuditPage = 500

func (h *Handler) auditList(w http.ResponseWriter, r *http.Request, c *call) {
	q := r.URL.Query()
	activity := q.Get("activity")
	if q.Has("activity") && !validActivity(activity) {
		writeError(w, invalidArg("activity: want 1..64 bytes of [A-Za-z0-9._@+-]"))
		return
	}
	var before uint64
	if s := q.Get("before"); s != "" {
		v, err := strconv.ParseUint(s, 10, 63)
		if err != nil || v == 0 {
			writeError(w, invalidArg("before: an audit entry ID"))
			return
		}
		before = v
	}
	limit := 50
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > MaxAuditPage {
			writeError(w, invalidArg("limit: 1..500"))
			return
		}
		limit = v
	}
	page, err := h.audit.list(r.Context(), activity, before, limit)
	if err != nil {
		h.o.log.ErrorContext(r.Context(), "admin: audit list failed", "request_id", c.requestID, "err", err)
		writeError(w, apiError{http.StatusServiceUnavailable, CodeAuditUnavailable, "the audit log cannot be read"})
		return
	}
	writeJSON(w, http.StatusOK, marshal(page))
}
