package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// sseStream is an open result stream (GET /api/events/{reservation}).
type sseStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

// openSSE opens resv's result stream with ticket; the stream is closed at
// cleanup. It fails the test unless the server answers 200.
func openSSE(t *testing.T, base, resv, ticket string) *sseStream {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/events/"+resv+"?ticket="+url.QueryEscape(ticket), nil)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req) // a bound: the server ends a stream after 2 minutes
	if err != nil {
		t.Fatalf("open the stream of %s: %v", resv, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open the stream of %s: %d", resv, resp.StatusCode)
	}
	return &sseStream{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next "result" event; false when the stream ended.
func (s *sseStream) next() (map[string]any, bool) {
	for s.sc.Scan() {
		if line, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			ev := map[string]any{}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				s.t.Fatalf("event %q: %v", line, err)
			}
			return ev, true
		}
	}
	return nil, false
}

// untilFinal reads events until one that is not "queued" or "unknown".
func (s *sseStream) untilFinal() map[string]any {
	s.t.Helper()
	for {
		ev, ok := s.next()
		if !ok {
			s.t.Fatal("the stream ended without a final result")
		}
		if st := ev["status"]; st != "queued" && st != "unknown" {
			return ev
		}
	}
}

// dialWS opens resv's result WebSocket with ticket, closed at cleanup.
func dialWS(t *testing.T, ctx context.Context, base, resv, ticket string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/ws/"+resv+"?ticket="+url.QueryEscape(ticket), nil)
	if err != nil {
		t.Fatalf("WebSocket of %s: %v", resv, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// readWS reads one message of c as a result view.
func readWS(t *testing.T, ctx context.Context, c *websocket.Conn) (map[string]any, error) {
	t.Helper()
	_, msg, err := c.Read(ctx)
	if err != nil {
		return nil, err
	}
	v := map[string]any{}
	if err := json.Unmarshal(msg, &v); err != nil {
		t.Fatalf("WebSocket message %q: %v", msg, err)
	}
	return v, nil
}

func keysOf(m map[string]any) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// TestStreamsCarryOnlyTheOwnersResult (N1): another buyer asking for a
// ticket of user 1's reservation is answered exactly as for a reservation
// that does not exist, and its streams (SSE and WebSocket), open on that
// reservation before user 1's order settles, never carry user 1's result.
// Before, the push hub was keyed by the reservation alone and user 2's
// stream received user 1's {"status":"created","order_no":…}.
func TestStreamsCarryOnlyTheOwnersResult(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	_, base := startApp(t, embeddedConfig(10, 2))
	u1, u2 := login(t, base, "user1"), login(t, base, "user2")
	const attempt = "n1-attempt"
	resv := app.ClientReservationID("1", attempt) // user1's ID is "1"

	// No oracle: the ticket answer for user 1's reservation is the answer
	// for one that does not exist (same code, same fields).
	codeOther, other := u2.do("POST", "/api/events/"+resv+"/ticket", nil)
	codeNone, none := u2.do("POST", "/api/events/r-no-such-reservation/ticket", nil)
	if codeOther != codeNone || keysOf(other) != keysOf(none) {
		t.Errorf("ticket for another buyer's reservation: %d %v; for an unknown one: %d %v", codeOther, other, codeNone, none)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// user 2's streams on user 1's reservation, and user 1's own, all
	// subscribed (their first view read) before the buy.
	s2 := openSSE(t, base, resv, u2.ticket(resv))
	if ev, ok := s2.next(); !ok || ev["status"] != "unknown" {
		t.Fatalf("user 2's first view of user 1's reservation: %v %v", ev, ok)
	}
	w2 := dialWS(t, ctx, base, resv, u2.ticket(resv))
	if v, err := readWS(t, ctx, w2); err != nil || v["status"] != "unknown" {
		t.Fatalf("user 2's first WebSocket view: %v %v", v, err)
	}
	s1 := openSSE(t, base, resv, u1.ticket(resv))
	if ev, ok := s1.next(); !ok || ev["status"] != "unknown" {
		t.Fatalf("user 1's first view before the buy: %v %v", ev, ok)
	}

	cid, ans, tok, path := u1.creds()
	code, m := u1.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": attempt})
	if code != http.StatusAccepted || m["reservation"] != resv {
		t.Fatalf("user 1's buy: %d %v", code, m)
	}
	if ev := s1.untilFinal(); ev["status"] != "created" || ev["order_no"] == "" {
		t.Fatalf("user 1's pushed result: %v", ev)
	}
	// user 1's order exists and was pushed. user 2's streams go on saying
	// "unknown": three more views each (the stream re-reads every second),
	// none of them user 1's.
	for i := range 3 {
		ev, ok := s2.next()
		if !ok {
			t.Fatalf("user 2's stream ended after view %d (a final result pushed to it?)", i)
		}
		if ev["status"] != "unknown" || ev["order_no"] != nil {
			t.Fatalf("user 2's stream carried %v", ev)
		}
		v, err := readWS(t, ctx, w2)
		if err != nil {
			t.Fatalf("user 2's WebSocket ended after view %d: %v", i, err)
		}
		if v["status"] != "unknown" || v["order_no"] != nil {
			t.Fatalf("user 2's WebSocket carried %v", v)
		}
	}
	// The reads by reservation are the caller's only.
	if _, m := u2.do("GET", "/api/result/"+resv, nil); m["status"] != "unknown" || m["order_no"] != nil {
		t.Errorf("user 2 reading user 1's result: %v", m)
	}
}
