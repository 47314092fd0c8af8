package checkouthttp

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Result serves GET: the signed-in buyer's view of one reservation
// ([WithReservation]). A reservation that is not the buyer's reads
// {"status":"unknown"}, as one that does not exist.
func (h *Handler) Result(w http.ResponseWriter, r *http.Request) {
	user, ok := h.reader(w, r)
	if !ok {
		return
	}
	v, err := h.read(r.Context(), user, h.o.reservation(r))
	if err != nil {
		h.o.log.WarnContext(r.Context(), "checkouthttp: result read failed", "err", err)
		writeErr(w, http.StatusServiceUnavailable, "busy", msgBusy)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// streamMax bounds how long a stream stays open, counted in polls.
const streamMax = 2 * time.Minute

// Stream serves GET: the signed-in buyer's view of one reservation
// ([WithReservation]) as Server-Sent Events, "event: result" with the view
// of [Handler.Result] as data, first at once and then at each change, until
// a final status (created, paid, cancelled, failed), the request's context
// ends or two minutes' worth of polls passed. A stream of a reservation
// that is not the buyer's says unknown and nothing else. 429 limited when
// the buyer already holds the most streams ([WithMaxStreams]).
func (h *Handler) Stream(w http.ResponseWriter, r *http.Request) {
	user, ok := h.reader(w, r)
	if !ok {
		return
	}
	if !canFlush(w) {
		writeErr(w, http.StatusInternalServerError, "busy", "streaming is not supported here")
		return
	}
	if !h.streams.acquire(user, h.o.maxStreams) {
		writeErr(w, http.StatusTooManyRequests, "limited", "too many open result streams")
		return
	}
	defer h.streams.release(user)
	ctx, resv := r.Context(), h.o.reservation(r)
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	var ticks <-chan time.Time
	var last view
	sent := false
	for polls := int64(0); ; polls++ {
		v, err := h.read(ctx, user, resv)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			h.o.log.WarnContext(ctx, "checkouthttp: stream: result read failed", "err", err)
		case !sent || !v.same(last):
			b, _ := json.Marshal(v)
			if _, err := w.Write(append(append([]byte("event: result\ndata: "), b...), '\n', '\n')); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			last, sent = v, true
			if v.final() {
				return
			}
		}
		if polls >= int64(streamMax/h.o.poll) {
			return
		}
		if ticks == nil { // after the first read: a stream whose answer is there needs no ticker
			var stop func()
			ticks, stop = h.o.ticker(h.o.poll)
			defer stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}

// reader checks a read's method and buyer, and answers when they fail.
func (h *Handler) reader(w http.ResponseWriter, r *http.Request) (string, bool) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeErr(w, http.StatusMethodNotAllowed, "bad_request", "method not allowed")
		return "", false
	}
	user, ok := h.user(r)
	if !ok || user == "" {
		writeErr(w, http.StatusUnauthorized, "unauthorized", "sign in first")
		return "", false
	}
	return user, true
}

// read is user's view of resv: [checkout.Checkout.Result] answers another
// buyer's reservation as unknown.
func (h *Handler) read(ctx context.Context, user, resv string) (view, error) {
	res, err := h.c.Result(ctx, user, resv)
	if err != nil {
		return view{}, err
	}
	return h.view(ctx, res), nil
}

// canFlush reports whether w, or a writer it wraps (Unwrap), can flush.
func canFlush(w http.ResponseWriter) bool {
	for {
		if _, ok := w.(http.Flusher); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// streamCount counts the open streams of each buyer.
type streamCount struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a stream slot of user; false when user holds max already.
func (c *streamCount) acquire(user string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user] >= max {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[user]++
	return true
}

func (c *streamCount) release(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user]--; c.n[user] <= 0 {
		delete(c.n, user)
	}
}
