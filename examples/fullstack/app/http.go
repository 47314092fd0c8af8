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
	"sync/atomic"
	"time"
)

//go:embed web
var webFS embed.FS

type ctxKey int

const (
	ctxRequestID ctxKey = iota
	ctxUser
)

// requestID returns the request ID of ctx ("" outside a request).
func requestID(ctx context.Context) string {
	s, _ := ctx.Value(ctxRequestID).(string)
	return s
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
// it is sane, or makes one, echoes it in the response and puts it into the
// context for the logs. Cheap: a counter, no crypto random per request.
func (a *App) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if id == "" || len(id) > 64 || strings.ContainsAny(id, " \r\n\t\"") {
			id = a.nodeTag + "-" + strconv.FormatUint(reqSeq.Add(1), 36)
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxRequestID, id)))
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		h(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		a.m.httpReqs.WithLabelValues(name, strconv.Itoa(sw.code)).Inc()
		if a.log.Enabled(r.Context(), slog.LevelDebug) {
			a.logger(r.Context()).Debug("http", "route", name, "method", r.Method, "path", r.URL.Path, "code", sw.code, "dur", time.Since(start))
		}
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is the JSON body of every refusal: a machine status the page
// maps to a message, and a human message.
type apiError struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func writeErr(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, apiError{Status: status, Message: msg})
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 4096))
	return dec.Decode(v)
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
