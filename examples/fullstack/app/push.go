package app

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// hub fans a reservation's final result out to the streams (SSE and
// WebSocket) of its owner waiting for it on this node. The order consumer's
// Notifier calls publish after the DB commit; with several nodes the
// consumer that settled the order may not be the node holding the stream,
// so streams also re-read the result store every second (the same fallback
// the page's polling uses).
//
// Subscriptions are keyed by (user, reservation): a view reaches only the
// streams of the user it belongs to (resultView.owner), never another
// user's stream opened on the same reservation ID. A view without an owner
// reaches nobody. The hub also knows each stream's session, so a logout
// closes that session's streams (closeSession).
type hub struct {
	mu       sync.Mutex
	subs     map[hubKey]map[chan resultView]struct{}
	resvs    map[string]int                              // subscriptions by reservation, any user (waiting)
	sessions map[string]map[*context.CancelFunc]struct{} // session tag → its streams' stops
}

// hubKey is one user's reservation.
type hubKey struct{ user, resv string }

func newHub() *hub {
	return &hub{subs: map[hubKey]map[chan resultView]struct{}{}, resvs: map[string]int{},
		sessions: map[string]map[*context.CancelFunc]struct{}{}}
}

// subscribe registers a stream of user, of the session tag, for resv; stop
// ends the stream (closeSession calls it). The returned function
// unsubscribes.
func (h *hub) subscribe(user, resv, tag string, stop context.CancelFunc) (chan resultView, func()) {
	ch := make(chan resultView, 1)
	k := hubKey{user, resv}
	sp := &stop
	h.mu.Lock()
	m := h.subs[k]
	if m == nil {
		m = map[chan resultView]struct{}{}
		h.subs[k] = m
	}
	m[ch] = struct{}{}
	h.resvs[resv]++
	s := h.sessions[tag]
	if s == nil {
		s = map[*context.CancelFunc]struct{}{}
		h.sessions[tag] = s
	}
	s[sp] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[k], ch)
		if len(h.subs[k]) == 0 {
			delete(h.subs, k)
		}
		if h.resvs[resv]--; h.resvs[resv] <= 0 {
			delete(h.resvs, resv)
		}
		delete(h.sessions[tag], sp)
		if len(h.sessions[tag]) == 0 {
			delete(h.sessions, tag)
		}
		h.mu.Unlock()
	}
}

// waiting reports whether a stream on this node waits for resv (of any
// user: the notifier's cheap check before it builds a view).
func (h *hub) waiting(resv string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resvs[resv] > 0
}

// publish hands v to the streams of v's owner waiting for resv. It never
// blocks: a subscriber that already has a result pending keeps it.
func (h *hub) publish(resv string, v resultView) {
	if v.owner == "" {
		return
	}
	k := hubKey{v.owner, resv}
	h.mu.Lock()
	chans := make([]chan resultView, 0, len(h.subs[k]))
	for ch := range h.subs[k] {
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

// closeSession ends the streams of the session tag on this node.
func (h *hub) closeSession(tag string) {
	h.mu.Lock()
	stops := make([]context.CancelFunc, 0, len(h.sessions[tag]))
	for sp := range h.sessions[tag] {
		stops = append(stops, *sp)
	}
	h.mu.Unlock()
	for _, stop := range stops {
		stop()
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
func (a *App) serveSSE(w http.ResponseWriter, r *http.Request, c streamClaim, resv string) {
	user := c.user
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
	a.push(r.Context(), c, resv, "sse", func(v resultView) bool {
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
func (a *App) serveWS(w http.ResponseWriter, r *http.Request, cl streamClaim, resv string) {
	user := cl.user
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
	a.push(ctx, cl, resv, "ws", func(v resultView) bool {
		b, _ := json.Marshal(v)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Write(wctx, websocket.MessageText, b)
		cancel()
		return err != nil || v.final()
	})
	_ = c.Close(websocket.StatusNormalClosure, "")
}

// streamMax bounds how long a result stream stays open.
const streamMax = 2 * time.Minute

// push waits for the result of c.user's reservation resv and hands every
// view to send until send reports the stream is done (a final status or a
// write error), or the client leaves, the server stops, streamMax passes or
// c's session logs out (closeSession on this node; the revocation mark,
// re-read every second, on another). The consumer's push (hub) is the fast
// path; a poll of the result every second covers a consumer on another
// node. Every view is the user's own (resultOf, and the hub's key).
func (a *App) push(ctx context.Context, c streamClaim, resv, transport string, send func(resultView) bool) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	user := c.user
	ch, cancel := a.hub.subscribe(user, resv, c.tag, stop)
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
	timeout := time.NewTimer(streamMax)
	defer timeout.Stop()
	for {
		select {
		case v := <-ch:
			if out(v) {
				return
			}
		case <-tick.C:
			if revoked, err := a.sessionRevoked(ctx, c.tag); revoked || ctx.Err() != nil {
				return // logged out on another node (a Redis error keeps the stream)
			} else if err != nil {
				a.logger(ctx).Debug("stream: revocation unknown", "err", err)
			}
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
