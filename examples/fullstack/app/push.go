package app

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// hub fans a reservation's final result out to the SSE streams waiting for it
// on this node. The order consumer's Notifier calls publish after the DB
// commit; with several nodes the consumer that settled the order may not be
// the node holding the stream, so streams also re-read the result store
// every second (the same fallback the page's polling uses).
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan resultView]struct{}
}

func newHub() *hub { return &hub{subs: map[string]map[chan resultView]struct{}{}} }

func (h *hub) subscribe(resv string) (chan resultView, func()) {
	ch := make(chan resultView, 1)
	h.mu.Lock()
	m := h.subs[resv]
	if m == nil {
		m = map[chan resultView]struct{}{}
		h.subs[resv] = m
	}
	m[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[resv], ch)
		if len(h.subs[resv]) == 0 {
			delete(h.subs, resv)
		}
		h.mu.Unlock()
	}
}

// waiting reports whether a stream on this node waits for resv.
func (h *hub) waiting(resv string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[resv]) > 0
}

// publish never blocks: a subscriber that already has a result pending keeps it.
func (h *hub) publish(resv string, v resultView) {
	h.mu.Lock()
	chans := make([]chan resultView, 0, len(h.subs[resv]))
	for ch := range h.subs[resv] {
		chans = append(chans, ch)
	}
	h.mu.Unlock()
	for _, ch := range chans {
		select {
		case ch <- v:
		default:
		}
	}
}

// streamCap counts the open SSE streams of each user on this instance.
type streamCap struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a stream slot of user; false when the user already holds
// maxStreamsPerUser.
func (c *streamCap) acquire(user string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[user] >= maxStreamsPerUser {
		return false
	}
	c.n[user]++
	return true
}

func (c *streamCap) release(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user]--; c.n[user] <= 0 {
		delete(c.n, user)
	}
}

// serveSSE streams "result" events for one reservation until a final status.
// A user holds at most maxStreamsPerUser result streams (SSE and WebSocket
// together) at once on one instance (each polls Redis while it waits): 429
// past that.
func (a *App) serveSSE(w http.ResponseWriter, r *http.Request, user, resv string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, http.StatusInternalServerError, "retry", "streaming unsupported")
		return
	}
	if !a.p.streams.acquire(user) {
		a.refuse(w, r, "sse_limit", http.StatusTooManyRequests, "limited", "too many open result streams")
		return
	}
	defer a.p.streams.release(user)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	a.push(r.Context(), user, resv, "sse", func(v resultView) bool {
		b, _ := json.Marshal(v)
		_, err := w.Write(append(append([]byte("event: result\ndata: "), b...), '\n', '\n'))
		fl.Flush()
		return err != nil || v.final()
	})
}

// serveWS pushes the result of one reservation over a WebSocket: one JSON
// text message per change (the same view as SSE and GET /api/result), then
// a normal close after the final one. Same ticket, same per-user cap as SSE.
// The handshake refuses a cross-origin page (the library's default origin
// check), so another site cannot read a buyer's result with a stolen ticket
// through the buyer's browser.
func (a *App) serveWS(w http.ResponseWriter, r *http.Request, user, resv string) {
	if !a.p.streams.acquire(user) {
		a.refuse(w, r, "ws_limit", http.StatusTooManyRequests, "limited", "too many open result streams")
		return
	}
	defer a.p.streams.release(user)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered the client
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context()) // the client sends nothing; a close from it ends ctx
	a.push(ctx, user, resv, "ws", func(v resultView) bool {
		b, _ := json.Marshal(v)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Write(wctx, websocket.MessageText, b)
		cancel()
		return err != nil || v.final()
	})
	_ = c.Close(websocket.StatusNormalClosure, "")
}

// push waits for resv's result and hands every view to send until send
// reports the stream is done (a final status or a write error), or the
// client leaves, the server stops or two minutes pass. The consumer's push
// (hub) is the fast path; a poll of the result every second covers a
// consumer on another node.
func (a *App) push(ctx context.Context, user, resv, transport string, send func(resultView) bool) {
	ch, cancel := a.hub.subscribe(resv)
	defer cancel()
	a.m.pushClients.Inc()
	defer a.m.pushClients.Dec()
	sent := a.m.pushed.WithLabelValues(transport)
	out := func(v resultView) bool { sent.Inc(); return send(v) }
	// The result may already be there.
	if v, err := a.resultOf(ctx, user, resv); err == nil && out(v) {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	for {
		select {
		case v := <-ch:
			if out(v) {
				return
			}
		case <-tick.C:
			v, err := a.resultOf(ctx, user, resv)
			if err == nil && out(v) {
				return
			}
		case <-timeout.C:
			return
		case <-ctx.Done():
			return
		case <-a.srv.stopping:
			return
		}
	}
}
