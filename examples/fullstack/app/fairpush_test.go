package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// fairStream is one buyer's fair push stream (WebSocket).
type fairStream struct {
	t   *testing.T
	c   *websocket.Conn
	ctx context.Context
}

// openFairWS asks for a stream ticket with bearer and opens the fair
// WebSocket (queue: with the queue ticket).
func openFairWS(t *testing.T, base, bearer, queueTicket string) *fairStream {
	t.Helper()
	code, m := fairCall(t, base, "POST", "/api/fair/ticket", bearer, nil, struct{}{})
	tk, _ := m["ticket"].(string)
	if code != 200 || tk == "" {
		t.Fatalf("fair ticket: %d %v", code, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound only
	t.Cleanup(cancel)
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/fair/ws?ticket=" + url.QueryEscape(tk)
	if queueTicket != "" {
		u += "&queue=" + url.QueryEscape(queueTicket)
	}
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatalf("dial the fair stream: %v", err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return &fairStream{t: t, c: c, ctx: ctx}
}

// next reads the next message; nil when the server closed the stream
// normally.
func (s *fairStream) next() map[string]any {
	s.t.Helper()
	_, b, err := s.c.Read(s.ctx)
	if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
		return nil
	}
	if err != nil {
		s.t.Fatalf("fair stream: %v", err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		s.t.Fatalf("fair stream message %q: %v", b, err)
	}
	return m
}

// until reads messages until one satisfies cond and returns it (fails
// when the stream ends first).
func (s *fairStream) until(what string, cond func(map[string]any) bool) map[string]any {
	s.t.Helper()
	for {
		m := s.next()
		if m == nil {
			s.t.Fatalf("fair stream closed before %s", what)
		}
		if cond(m) {
			return m
		}
	}
}

// TestQueueAdmissionPushed: a waiting buyer's stream pushes its place,
// then the moment of admission with the pass (the pass buys), then ends;
// the same over Server-Sent Events. A stream ticket of another resource,
// or none, opens nothing.
func TestQueueAdmissionPushed(t *testing.T) {
	cfg := embeddedConfig(10, 5)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, 50
	a, base := startApp(t, cfg)
	ctx := context.Background()
	if err := app.PauseQueue(ctx, a, true); err != nil {
		t.Fatal(err)
	}
	var bearers, tickets [2]string
	for i := range 2 {
		_, m := fairCall(t, base, "POST", "/api/login", "", nil, map[string]string{"username": "user" + string(rune('1'+i))})
		bearers[i], _ = m["token"].(string)
		code, m := fairCall(t, base, "POST", "/api/queue/join", bearers[i], nil, struct{}{})
		if code != 200 {
			t.Fatalf("join: %d %v", code, m)
		}
		tickets[i], _ = m["ticket"].(string)
	}
	if code, _ := fairCall(t, base, "GET", "/api/fair/ws?ticket=nope", "", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("fair stream with a bad ticket: %d, want 401", code)
	}
	s := openFairWS(t, base, bearers[0], tickets[0])
	if m := s.next(); m["state"] != "waiting" || m["position"] != 1.0 {
		t.Fatalf("first push %v, want waiting at position 1", m)
	}
	// The second buyer's stream over SSE, with its own queue ticket.
	sse := openFairSSE(t, base, bearers[1], tickets[1])
	if m := sse.next(); m["state"] != "waiting" || m["position"] != 2.0 {
		t.Fatalf("first SSE push %v, want waiting at position 2", m)
	}
	if err := app.PauseQueue(ctx, a, false); err != nil {
		t.Fatal(err)
	}
	m := s.until("admission", func(m map[string]any) bool { return m["state"] != "waiting" })
	pass, _ := m["pass"].(string)
	if m["state"] != "admitted" || pass == "" {
		t.Fatalf("pushed %v, want admitted with a pass", m)
	}
	if end := s.next(); end != nil {
		t.Fatalf("after the admission the stream sent %v, want a normal close", end)
	}
	if m := sse.until("admission", func(m map[string]any) bool { return m["state"] != "waiting" }); m["state"] != "admitted" {
		t.Fatalf("SSE pushed %v, want admitted", m)
	}
	if tc, st, bc := fairBuy(t, base, bearers[0], map[string]string{"X-Queue-Pass": pass}); tc != 200 || bc != 202 {
		t.Fatalf("buy with the pushed pass: token %d %q, buy %d", tc, st, bc)
	}
	// Another user's queue ticket on my stream: told to join again.
	s2 := openFairWS(t, base, bearers[0], tickets[1])
	if m := s2.next(); m["state"] != "rejoin" {
		t.Fatalf("a stream with another user's queue ticket pushed %v, want rejoin", m)
	}
}

// fairSSE reads "fair" events of a Server-Sent Events stream.
type fairSSE struct {
	t  *testing.T
	sc *bufio.Scanner
}

func openFairSSE(t *testing.T, base, bearer, queueTicket string) *fairSSE {
	t.Helper()
	_, m := fairCall(t, base, "POST", "/api/fair/ticket", bearer, nil, struct{}{})
	tk, _ := m["ticket"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound only
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/fair/events?ticket="+url.QueryEscape(tk)+"&queue="+url.QueryEscape(queueTicket), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("open the fair SSE stream: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &fairSSE{t: t, sc: bufio.NewScanner(resp.Body)}
}

func (s *fairSSE) next() map[string]any {
	s.t.Helper()
	event := ""
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "fair":
			m := map[string]any{}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
				s.t.Fatal(err)
			}
			return m
		}
	}
	if err := s.sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		s.t.Fatalf("SSE: %v", err)
	}
	return nil
}

// waitStreams waits until user holds n streams open on a (the server lets
// a stream go once it saw its connection closed).
func waitStreams(t *testing.T, a *app.App, user string, n int) {
	t.Helper()
	for i := 0; app.OpenStreams(a, user) != n; i++ {
		if i == 3000 {
			t.Fatalf("user %s holds %d streams, want %d", user, app.OpenStreams(a, user), n)
		}
		time.Sleep(10 * time.Millisecond) // the poll's interval, bounded at 30 s
	}
}

func (s *fairSSE) until(what string, cond func(map[string]any) bool) map[string]any {
	s.t.Helper()
	for {
		m := s.next()
		if m == nil {
			s.t.Fatalf("SSE stream closed before %s", what)
		}
		if cond(m) {
			return m
		}
	}
}

// TestDrawOutcomePushed: every entrant's stream pushes "entered", then
// the draw's outcome — the winner with a pay deadline, the first of the
// waitlist with its position, the one beyond the waitlist a final "lost"
// (and the stream ends) — and once the winner paid, the draw is final:
// the waitlisted user is pushed a final "lost", the winner a final win,
// and no replacement happens afterwards.
func TestDrawOutcomePushed(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	cfg := embeddedConfig(10, 1)
	cfg.SaleMode, cfg.DrawDeadline = app.SaleDraw, time.Hour
	// Every entry must come before the start: 6 s, as the queue's
	// pre-queue test found 2 s too short under -race on a loaded machine.
	cfg.StartIn, cfg.PathLead = 6*time.Second, 6*time.Second
	a, base := startApp(t, cfg)
	ctx := context.Background()
	users := []string{"1", "2", "3"}
	clients, streams := map[string]*apiClient{}, map[string]*fairStream{}
	for _, u := range users {
		c := login(t, base, "user"+u)
		if code, m := c.do("POST", "/api/draw/enter", struct{}{}); code != 200 {
			t.Fatalf("enter user%s: %d %v", u, code, m)
		}
		clients[u] = c
		streams[u] = openFairWS(t, base, c.bearer, "")
		if m := streams[u].next(); m["status"] != "entered" || m["final"] != false {
			t.Fatalf("user%s's first push %v, want entered", u, m)
		}
	}
	drawn := func(m map[string]any) bool { return m["status"] != "entered" }
	got := map[string]map[string]any{}
	for _, u := range users {
		got[u] = streams[u].until("the draw", drawn)
	}
	pub, err := app.FairPublished(ctx, a)
	if err != nil || len(pub.Order) != 3 {
		t.Fatalf("published %+v %v", pub, err)
	}
	w, wl, lo := pub.Order[0], pub.Order[1], pub.Order[2]
	// The draw worker writes the winner's deadline just after the draw:
	// a stream may send the win first, then again with its deadline.
	if m := got[w]; m["status"] == "winner" && m["deadline"] == nil {
		got[w] = streams[w].until("the winner's deadline", func(m map[string]any) bool { return m["deadline"] != nil })
	}
	if m := got[w]; m["status"] != "winner" || m["deadline"] == nil || m["final"] != false {
		t.Fatalf("winner pushed %v, want winner with a deadline, not final", m)
	}
	// A stream that read the win before its deadline was written sends it
	// again once written. Made to happen here: the deadline is taken away
	// (the worker writes one again within its next tick) and a new stream
	// opened, until one's first message is a win without a deadline.
	// Before, the stream sent nothing more: the status had not changed.
	var appKey string
	for _, k := range app.Miniredis(a).Keys() {
		if strings.Contains(k, "{dr:") && strings.HasSuffix(k, "}:app") {
			appKey = k
		}
	}
	if appKey == "" {
		t.Fatalf("no draw app key among %v", app.Miniredis(a).Keys())
	}
	for try := 0; ; try++ {
		if try == 20 {
			t.Fatal("no stream's first message came before the deadline was written again, in 20 tries")
		}
		app.Miniredis(a).HDel(appKey, "due:"+w)
		s := openFairWS(t, base, clients[w].bearer, "")
		if first := s.next(); first["status"] != "winner" || first["deadline"] != nil {
			// A user holds at most 4 streams: this one is closed, and
			// the next opened once the server let it go.
			s.c.CloseNow()
			waitStreams(t, a, w, 1)
			continue
		}
		bound, cancel := context.WithTimeout(ctx, 30*time.Second) // a bound only: the worker ticks every 500 ms
		s.ctx = bound
		m := s.until("the deadline written again", func(m map[string]any) bool { return m["deadline"] != nil })
		cancel()
		if m["status"] != "winner" || m["final"] != false {
			t.Fatalf("the win pushed again %v, want a winner with a deadline", m)
		}
		break
	}
	if m := got[wl]; m["status"] != "waitlisted" || m["position"] != 1.0 || m["final"] != false {
		t.Fatalf("first of the waitlist pushed %v, want waitlisted at 1", m)
	}
	if m := got[lo]; m["status"] != "lost" || m["final"] != true {
		t.Fatalf("beyond the waitlist pushed %v, want a final lost", m)
	}
	if end := streams[lo].next(); end != nil {
		t.Fatalf("after a final lost the stream sent %v, want a normal close", end)
	}
	// The winner buys and pays: nobody can be replaced any more.
	_, orderNo := buyOrder(t, base, clients[w], w, "d1")
	if code, m := clients[w].do("POST", "/api/pay/fake", map[string]string{"order_no": orderNo}); code != 200 || m["status"] != "paid" {
		t.Fatalf("pay: %d %v", code, m)
	}
	if m := streams[wl].until("the final answer", func(m map[string]any) bool { return m["final"] == true }); m["status"] != "lost" {
		t.Fatalf("the waitlisted user's final push %v, want lost", m)
	}
	if m := streams[w].until("the final win", func(m map[string]any) bool { return m["final"] == true }); m["status"] != "winner" {
		t.Fatalf("the winner's final push %v, want winner", m)
	}
	// The poll says the same (the fallback).
	if _, m := clients[wl].do("GET", "/api/draw/outcome", nil); m["status"] != "lost" || m["final"] != true {
		t.Fatalf("the waitlisted user's poll %v, want a final lost", m)
	}
	if c, err := app.FairStatsOf(ctx, a); err != nil || c.Admitted != 1 {
		t.Fatalf("winners %+v %v, want 1", c, err)
	}
}
