package app

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/checkout/checkouthttp"
)

//go:embed web
var webFS embed.FS

type ctxKey int

const ctxRequest ctxKey = iota

// reqState is what the middleware learns about one request, in one
// allocation: its ID, the signed-in user, and guard's and route's response
// writers. withRequestID puts it into the request's context once; the later
// layers fill it in place instead of copying the request and its context
// again (each copy cost ≈ 0.3 µs of a buy).
type reqState struct {
	id     string
	idHdr  [1]string // the X-Request-Id header's value slice
	user   string    // set by authenticated
	guard  guardWriter
	status statusWriter
}

// stateOf returns ctx's request state (nil outside withRequestID).
func stateOf(ctx context.Context) *reqState {
	st, _ := ctx.Value(ctxRequest).(*reqState)
	return st
}

// requestID returns the request ID of ctx ("" outside a request).
func requestID(ctx context.Context) string {
	if st := stateOf(ctx); st != nil {
		return st.id
	}
	return ""
}

// logger returns a's logger with the request ID of ctx attached.
func (a *App) logger(ctx context.Context) *slog.Logger {
	if id := requestID(ctx); id != "" {
		return a.log.With("request_id", id)
	}
	return a.log
}

var reqSeq atomic.Uint64

// withRequestID takes X-Request-ID from the client (or a trusted proxy) when
// it is sane, or makes one, echoes it in the response and puts the request's
// state, with the ID for the logs, into the context. Cheap: a counter, no
// crypto random per request.
func (a *App) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &reqState{}
		if v := r.Header["X-Request-Id"]; len(v) > 0 { // Header.Get's key, already canonical
			st.id = v[0]
		}
		if st.id == "" || len(st.id) > 64 || strings.ContainsAny(st.id, " \r\n\t\"") {
			var buf [48]byte
			b := append(append(buf[:0], a.p.nodeTag...), '-')
			st.id = string(strconv.AppendUint(b, reqSeq.Add(1), 36))
		}
		st.idHdr[0] = st.id
		w.Header()["X-Request-Id"] = st.idHdr[:] // canonical key, no re-canonicalising
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxRequest, st)))
	})
}

// statusWriter records the status code for the metrics and the access log.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets SSE through the wrapper.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// route wraps a handler with per-route metrics and a debug access log. At
// 20k req/s an info line per request would cost more than the request.
func (a *App) route(name string, h http.HandlerFunc) http.Handler {
	var byCode sync.Map // status code → prometheus.Counter of this route
	count := func(code int) {
		c, ok := byCode.Load(code)
		if !ok {
			c, _ = byCode.LoadOrStore(code, a.m.httpReqs.WithLabelValues(name, strconv.Itoa(code)))
		}
		c.(prometheus.Counter).Inc()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.cfg.Trace.Start != nil {
			ctx, end := a.cfg.Trace.Start(r.Context(), name)
			defer end()
			r = r.WithContext(ctx)
		}
		var sw *statusWriter
		if st := stateOf(r.Context()); st != nil && st.status.ResponseWriter == nil {
			sw = &st.status // the request's one allocation
			sw.ResponseWriter = w
		} else {
			sw = &statusWriter{ResponseWriter: w}
		}
		var start time.Time // read only for the debug log: a clock read per request otherwise
		debug := a.log.Enabled(r.Context(), slog.LevelDebug)
		if debug {
			start = time.Now()
		}
		h(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		count(sw.code)
		if debug && a.log.Enabled(r.Context(), slog.LevelDebug) {
			a.logger(r.Context()).Debug("http", "route", name, "method", r.Method, "path", r.URL.Path, "code", sw.code, "dur", time.Since(start))
		}
	})
}

var (
	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"status":"error","message":"encoding the answer failed"}`)
	}
	writeBody(w, code, append(b, '\n'))
}

// writeBody writes an encoded JSON answer. The header values are shared,
// read-only slices, set under their canonical keys.
func writeBody(w http.ResponseWriter, code int, b []byte) {
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Cache-Control"] = noStore
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// errBodies caches the encoded refusals: the buy path answers the same few
// (status, message) pairs at tens of thousands per second. Bounded: messages
// carrying error text stop being cached once it is full.
var (
	errBodies    sync.Map // admin.ErrorAnswer → []byte
	errBodyCount atomic.Int32
)

const maxErrBodies = 512

// writeErr answers a refusal in the one error shape of the library's HTTP
// APIs, admin.ErrorAnswer (checkouthttp's buy refusals and the admin API
// answer in it too): a machine status the page maps to a message, and a
// human message.
func writeErr(w http.ResponseWriter, code int, status, msg string) {
	key := admin.ErrorAnswer{Status: status, Message: msg}
	if b, ok := errBodies.Load(key); ok {
		writeBody(w, code, b.([]byte))
		return
	}
	b, err := json.Marshal(key)
	if err != nil {
		writeJSON(w, code, key)
		return
	}
	b = append(b, '\n')
	if errBodyCount.Add(1) <= maxErrBodies {
		errBodies.Store(key, b)
	}
	writeBody(w, code, b)
}

// maxBody caps every JSON request body (the largest, a buy, is < 200 bytes).
const maxBody = 4096

// readJSON decodes the request body (at most maxBody bytes, unknown fields
// refused). The JSON Content-Type itself is checked by guard, before any
// handler runs.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// writeBadBody refuses a request body readJSON could not take: 400
// bad_request, what the body must be (what) and what is wrong with it
// (checkouthttp.BodyProblem). Not through writeErr's cache: the message may
// quote input.
func writeBadBody(w http.ResponseWriter, what string, err error) {
	writeJSON(w, http.StatusBadRequest, badBody(what, err))
}

// badBody is writeBadBody's answer.
func badBody(what string, err error) admin.ErrorAnswer {
	return admin.ErrorAnswer{Status: "bad_request", Message: what + ": " + checkouthttp.BodyProblem(err)} // the rules checkouthttp answers with too
}

// isJSON reports whether a Content-Type header names JSON
// ("application/json", optionally with parameters such as charset).
func isJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// isCleanPath reports whether p, which starts with "/", is what ServeMux
// would leave as it is: path.Clean's answer, with the trailing slash kept.
// That is: no empty segment ("//") before the last one, and no "." or ".."
// segment. It builds nothing (path.Clean allocated on every request); the
// fuzz test compares it with path.Clean.
func isCleanPath(p string) bool {
	for i := 0; i < len(p); { // p[i] == '/'
		end := len(p)
		if j := strings.IndexByte(p[i+1:], '/'); j >= 0 {
			end = i + 1 + j
		}
		switch seg := p[i+1 : end]; {
		case seg == "." || seg == "..":
			return false
		case seg == "" && end < len(p):
			return false
		}
		i = end
	}
	return true
}

// guard sits in front of the mux and gives every refusal the one JSON error
// shape of the API:
//   - a path that is not canonical (".." or "." segments, "//", also when
//     percent-encoded) is refused with 400, never redirected: ServeMux would
//     answer 301/307 and send the client elsewhere;
//   - a request body that is not declared as JSON is refused with 415 (a
//     bodiless POST needs no Content-Type);
//   - a path or method no route serves gets a JSON 404 or 405 (with
//     Allow), not ServeMux's text.
//
// The mux matches each request once: its routes (marked by routed) answer
// on the real ResponseWriter, and so does a redirect the mux chose for a
// pattern; its fallbacks for no pattern (404, 405, redirect) answer into a
// recorder whose code and headers guard turns into the answers above.
func guard(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || !isCleanPath(p) {
			writeErr(w, http.StatusBadRequest, "bad_request", "malformed path")
			return
		}
		if r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead && !isJSON(r.Header.Get("Content-Type")) {
			writeErr(w, http.StatusUnsupportedMediaType, "bad_request", "the body must be application/json")
			return
		}
		var g *guardWriter
		if st := stateOf(r.Context()); st != nil {
			g = &st.guard // the request's one allocation
		} else {
			g = &guardWriter{}
		}
		g.w, g.r = w, r
		mux.ServeHTTP(g, r)
		if g.routed || r.Pattern != "" {
			return
		}
		rec := &g.rec // ServeMux's own 404/405/redirect: keep the code and Allow only
		switch {
		case rec.code == http.StatusMethodNotAllowed:
			if allow := rec.Header().Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			writeErr(w, http.StatusMethodNotAllowed, "bad_request", "method not allowed")
		case rec.code >= 300 && rec.code < 400 && !strings.HasPrefix(r.URL.Path, "/api/"):
			// "/static" → "/static/" for the page; API paths never redirect.
			http.Redirect(w, r, rec.Header().Get("Location"), rec.code)
		default:
			writeErr(w, http.StatusNotFound, "not_found", "no such path")
		}
	})
}

// routed marks h as a route's handler for guard: it runs on the real
// ResponseWriter (its Flusher, Hijacker and Unwrap), not guard's.
func routed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g, ok := w.(*guardWriter); ok {
			g.routed = true
			w = g.w
		}
		h.ServeHTTP(w, r)
	})
}

// guardWriter is what guard passes to the mux. A route's handler unwraps
// it (routed); any other handler the mux picked writes through to w when
// the mux named a pattern (r.Pattern, set before the handler runs), and
// into rec when it did not.
type guardWriter struct {
	w      http.ResponseWriter
	r      *http.Request
	routed bool
	rec    headerOnly
}

func (g *guardWriter) target() http.ResponseWriter {
	if g.r.Pattern != "" {
		return g.w
	}
	return &g.rec
}

func (g *guardWriter) Header() http.Header         { return g.target().Header() }
func (g *guardWriter) WriteHeader(code int)        { g.target().WriteHeader(code) }
func (g *guardWriter) Write(b []byte) (int, error) { return g.target().Write(b) }

// headerOnly records the status and headers of ServeMux's fallback
// handlers and drops their text body.
type headerOnly struct {
	h    http.Header
	code int
}

func (h *headerOnly) Header() http.Header {
	if h.h == nil {
		h.h = http.Header{}
	}
	return h.h
}
func (h *headerOnly) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}
func (h *headerOnly) Write(b []byte) (int, error) {
	if h.code == 0 {
		h.code = http.StatusOK
	}
	return len(b), nil
}

func staticHandler() http.Handler {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		http.StripPrefix("/static", files).ServeHTTP(w, r)
	})
}
