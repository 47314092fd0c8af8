package risk

import (
	"net/http"
	"strconv"
	"time"
)

// writeJSON answers {"error":code,"reason":reason}. Codes and reasons are
// package constants or rule reason codes, escaped anyway.
func writeJSON(w http.ResponseWriter, status int, code, reason string) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b := make([]byte, 0, 64+len(code)+len(reason))
	b = append(b, `{"error":`...)
	b = strconv.AppendQuoteToASCII(b, code)
	if reason != "" {
		b = append(b, `,"reason":`...)
		b = strconv.AppendQuoteToASCII(b, reason)
	}
	b = append(b, "}\n"...)
	_, _ = w.Write(b)
}

// retryAfterSeconds rounds d up to whole seconds (at least 1).
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
