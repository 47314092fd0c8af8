package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/waitroom"
	"github.com/seckillkit/seckill/waitroom/draw"
)

// The fair modes' push (#26): the page's place in the queue and the
// draw's outcome reach the buyer through the same push path as the buy's
// result — a stream ticket (ticket.go: one user, one session, a minute),
// then a WebSocket (GET /api/fair/ws?ticket=) or Server-Sent Events (GET
// /api/fair/events?ticket=, event "fair"), each message the same JSON as
// the poll it replaces (GET /api/queue/poll, GET /api/draw/outcome). In
// queue mode the stream also carries the queue ticket (&queue=, what
// X-Queue-Ticket carries to the poll): the waitroom checks it against the
// stream ticket's user, so neither works without the other.
//
// When: this instance's admitter and draw worker kick the streams of the
// users they just admitted, drew, replaced or promoted (fairKicks), so
// those messages leave at once; every stream also re-reads its view every
// second (the admitter or the drawer may be another instance). A message
// goes out when the state changes; a position change within one state at
// most every fairPosEvery. The stream ends after a final message (queue:
// admitted, done, left, or a ticket to renew; draw: final == true), when
// the session logs out, or after streamMax (the page opens another); the
// page polls while no stream is open.
//
// The draw's final answer: a drawn user's outcome is final once no
// replacement can change it. "lost" is final at once (beyond the waitlist,
// or a winner replaced: the library never gives a lost place back). The
// others are final once the draw is final: the first of (a) the sale's end
// (no buy after it), (b) every winner holds a paid order (nobody left to
// replace), (c) nobody is on the waitlist any more. The draw worker sets
// the mark ({dr:<sale>}:app final) once and stops replacing from then on,
// so a waitlisted user told "lost" is never promoted afterwards (a refund
// after that puts the unit back on sale, where no token reaches it in draw
// mode).

// fairStreamID is the stream tickets' resource name for the fair stream
// (no reservation ID has a '~').
const fairStreamID = "~fair"

// fairPosEvery bounds how often a stream sends a new queue position.
const fairPosEvery = 2 * time.Second

// fairKicks wakes the fair streams of a user on this instance.
type fairKicks struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func (k *fairKicks) subscribe(user string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	k.mu.Lock()
	if k.subs == nil {
		k.subs = map[string]map[chan struct{}]struct{}{}
	}
	if k.subs[user] == nil {
		k.subs[user] = map[chan struct{}]struct{}{}
	}
	k.subs[user][ch] = struct{}{}
	k.mu.Unlock()
	return ch, func() {
		k.mu.Lock()
		delete(k.subs[user], ch)
		if len(k.subs[user]) == 0 {
			delete(k.subs, user)
		}
		k.mu.Unlock()
	}
}

// kick wakes the streams of users (nil: every stream); it never blocks.
func (k *fairKicks) kick(users []string) {
	k.mu.Lock()
	var chans []chan struct{}
	if users == nil {
		for _, m := range k.subs {
			for ch := range m {
				chans = append(chans, ch)
			}
		}
	}
	for _, u := range users {
		for ch := range k.subs[u] {
			chans = append(chans, ch)
		}
	}
	k.mu.Unlock()
	for _, ch := range chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// fairMsg is one message of a fair stream: a queue view or a draw view.
type fairMsg struct {
	state string // what a change is: the queue state, the draw status (+ final)
	pos   int64
	final bool
	body  any
}

// fairView reads the user's current message. The queue's Poll keeps the
// entry alive (a streaming page is a polling page).
func (a *App) fairView(ctx context.Context, user, queueTicket string) (fairMsg, error) {
	f := a.p.fair
	if f.room != nil {
		p, err := f.room.Poll(ctx, waitroom.Credential{Sale: f.sale, User: user, Token: queueTicket})
		switch {
		case errors.Is(err, waitroom.ErrRefused):
			return fairMsg{state: "rejoin", final: true, body: map[string]string{"state": "rejoin", "message": "join the queue again"}}, nil
		case err != nil:
			return fairMsg{}, err
		}
		s := string(p.State)
		return fairMsg{state: s, pos: p.Position, final: p.State != waitroom.Waiting,
			body: queueView{State: s, Position: p.Position, ETAMs: p.ETA.Milliseconds(), Pass: p.Pass, Expiry: p.Expiry}}, nil
	}
	v, err := a.drawView(ctx, user)
	if err != nil {
		return fairMsg{}, err
	}
	// The winner's deadline is part of the state: the draw worker writes
	// it just after the draw, so a stream that read the win first sends
	// it again with its deadline.
	state := v.Status + "/" + strconv.FormatBool(v.Final)
	if !v.Deadline.IsZero() {
		state += "/" + strconv.FormatInt(v.Deadline.UnixMilli(), 10)
	}
	return fairMsg{state: state, pos: v.Position, final: v.Final, body: v}, nil
}

// drawView is the user's draw outcome as the page sees it (poll and push).
func (a *App) drawView(ctx context.Context, user string) (drawView, error) {
	f := a.p.fair
	o, err := f.drawer.Outcome(ctx, f.sale, user)
	if err != nil {
		return drawView{}, err
	}
	v := drawView{Status: string(o.Status), Rank: o.Rank, Position: o.Position}
	switch o.Status {
	case draw.Lost:
		v.Final = true
	case draw.Winner, draw.Waitlisted:
		fin, err := f.rdb.HExists(ctx, f.app, "final").Result()
		if err != nil {
			return drawView{}, err
		}
		if fin && o.Status == draw.Waitlisted {
			v.Status, v.Position = string(draw.Lost), 0
		}
		v.Final = fin
	}
	if o.Status == draw.Winner {
		if due, err := f.rdb.HGet(ctx, f.app, "due:"+user).Int64(); err == nil {
			v.Deadline = time.UnixMilli(due).UTC()
		}
	}
	return v, nil
}

// drawSettle sets the draw's final mark once nothing can change an
// outcome any more (see the note above) and reports whether it is set.
// drawn is the draw order; winners and waitlisted are counted by the
// caller over the places that may still move.
func (a *App) drawSettle(ctx context.Context, winners []string, waitlisted int) (bool, error) {
	f := a.p.fair
	fin, err := f.rdb.HExists(ctx, f.app, "final").Result()
	if err != nil || fin {
		return fin, err
	}
	why := ""
	switch {
	case !time.Now().Before(a.sale.act.End):
		why = "the sale ended"
	case waitlisted == 0:
		why = "nobody is on the waitlist"
	default:
		var paid int64
		if err := a.in.DB.WithContext(ctx).Model(&order.Order{}).
			Where("activity_id = ? AND status = ? AND user_id IN ?", a.sale.act.ID, order.OrderPaid, winners).
			Distinct("user_id").Count(&paid).Error; err != nil {
			return false, err
		}
		if len(winners) == 0 || paid < int64(len(winners)) {
			return false, nil
		}
		why = "every winner paid"
	}
	set, err := f.rdb.HSetNX(ctx, f.app, "final", time.Now().UnixMilli()).Result()
	if err != nil {
		return false, err
	}
	if set {
		a.log.Info("draw final: no outcome changes any more", "activity", f.sale, "why", why)
	}
	a.p.fairKicks.kick(nil)
	return true, nil
}

// handleFairTicket issues a stream ticket for the caller's fair stream.
func (a *App) handleFairTicket(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	tok, err := bearerToken(r)
	if err != nil {
		a.fail(w, r, "fair_ticket", err)
		return
	}
	t, exp := a.newTicket(user, a.sessionTag(tok), fairStreamID, time.Now())
	writeJSON(w, http.StatusOK, map[string]any{"ticket": t, "expires_at": exp})
}

// handleFairWS pushes the fair view over a WebSocket.
func (a *App) handleFairWS(w http.ResponseWriter, r *http.Request) {
	cl, ok := a.streamTicket(w, r, fairStreamID)
	if !ok {
		return
	}
	if !a.p.streams.acquire(cl.user) {
		a.refuse(w, r, "ws_limit", http.StatusTooManyRequests, "limited", "too many open streams")
		return
	}
	defer a.p.streams.release(cl.user)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	a.fairPush(ctx, cl, r.URL.Query().Get("queue"), "ws", func(b []byte) bool {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, b) == nil
	})
	_ = c.Close(websocket.StatusNormalClosure, "")
}

// handleFairEvents pushes the fair view over Server-Sent Events.
func (a *App) handleFairEvents(w http.ResponseWriter, r *http.Request) {
	cl, ok := a.streamTicket(w, r, fairStreamID)
	if !ok {
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, http.StatusInternalServerError, "retry", "streaming unsupported")
		return
	}
	if !a.p.streams.acquire(cl.user) {
		a.refuse(w, r, "sse_limit", http.StatusTooManyRequests, "limited", "too many open streams")
		return
	}
	defer a.p.streams.release(cl.user)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	a.fairPush(r.Context(), cl, r.URL.Query().Get("queue"), "sse", func(b []byte) bool {
		_, err := w.Write(append(append([]byte("event: fair\ndata: "), b...), '\n', '\n'))
		fl.Flush()
		return err == nil
	})
}

// fairPush sends the user's fair view through send (false: the client is
// gone) until a final one, the client leaving, a logout, the server
// stopping or streamMax.
func (a *App) fairPush(ctx context.Context, c streamClaim, queueTicket, transport string, send func([]byte) bool) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	kick, unsub := a.p.fairKicks.subscribe(c.user)
	defer unsub()
	a.m.pushClients.Inc()
	defer a.m.pushClients.Dec()
	sent := a.m.pushed.WithLabelValues("fair_" + transport)
	var last fairMsg
	var lastAt time.Time
	first := true
	// out sends m when it differs from the last message sent (a position
	// change: at most every fairPosEvery); it reports whether the stream
	// is over.
	out := func(m fairMsg) bool {
		changed := first || m.state != last.state
		moved := m.pos != last.pos && time.Since(lastAt) >= fairPosEvery
		if !changed && !moved {
			return false
		}
		b, _ := json.Marshal(m.body)
		sent.Inc()
		if !send(b) {
			return true
		}
		first, last, lastAt = false, m, time.Now()
		return m.final
	}
	read := func() bool {
		m, err := a.fairView(ctx, c.user, queueTicket)
		if err != nil {
			a.logger(ctx).Debug("fair stream: view unknown", "err", err)
			return false
		}
		return out(m)
	}
	if read() {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timeout := time.NewTimer(streamMax)
	defer timeout.Stop()
	for {
		select {
		case <-kick:
			if read() {
				return
			}
		case <-tick.C:
			if revoked, _ := a.sessionRevoked(ctx, c.tag); revoked || ctx.Err() != nil {
				return
			}
			if read() {
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
