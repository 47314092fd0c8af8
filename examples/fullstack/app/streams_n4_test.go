package app_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// streamCode opens resv's SSE stream with ticket and returns the status
// code (the stream is closed at once).
func streamCode(t *testing.T, base, resv, ticket string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/events/"+resv+"?ticket="+url.QueryEscape(ticket), nil)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// wsCode dials resv's WebSocket with ticket and returns the handshake's
// status code (101 when it opened; closed at once).
func wsCode(t *testing.T, base, resv, ticket string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/ws/"+resv+"?ticket="+url.QueryEscape(ticket), nil)
	if err == nil {
		c.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	return resp.StatusCode
}

// TestTicketEndsWithTheSession (N4): a stream ticket is bound to the
// session that asked for it: after logout it opens no stream (SSE or
// WebSocket), while a ticket of the user's other session still does.
// Before, a ticket kept opening streams for its whole minute after logout.
func TestTicketEndsWithTheSession(t *testing.T) {
	_, base := startApp(t, embeddedConfig(5, 2))
	u, other := login(t, base, "user1"), login(t, base, "user1")
	const resv = "r-n4-ticket"
	tk, tkWS, tkOther := u.ticket(resv), u.ticket(resv), other.ticket(resv)
	if code, m := u.do("POST", "/api/logout", nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d %v", code, m)
	}
	if code := streamCode(t, base, resv, tk); code != http.StatusUnauthorized {
		t.Errorf("SSE with a ticket of a logged-out session: %d, want 401", code)
	}
	if code := wsCode(t, base, resv, tkWS); code != http.StatusUnauthorized {
		t.Errorf("WebSocket with a ticket of a logged-out session: %d, want 401", code)
	}
	if code := streamCode(t, base, resv, tkOther); code != http.StatusOK {
		t.Errorf("SSE with a ticket of the user's other session: %d, want 200", code)
	}
}

// TestLogoutClosesTheSessionsStreams (N4): POST /api/logout closes the
// streams (SSE and WebSocket) opened with that session's tickets, and only
// those: the user's other session keeps its stream. Before, they stayed
// open (re-reading the result every second) until their two minutes ran
// out.
func TestLogoutClosesTheSessionsStreams(t *testing.T) {
	_, base := startApp(t, embeddedConfig(5, 2))
	u, other := login(t, base, "user1"), login(t, base, "user1")
	const resv = "r-n4-open"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sA := openSSE(t, base, resv, u.ticket(resv))
	sB := openSSE(t, base, resv, other.ticket(resv))
	wA := dialWS(t, ctx, base, resv, u.ticket(resv))
	for name, ok := range map[string]bool{"A": first(sA), "B": first(sB)} {
		if !ok {
			t.Fatalf("stream %s sent nothing", name)
		}
	}
	if _, err := readWS(t, ctx, wA); err != nil {
		t.Fatalf("WebSocket: %v", err)
	}
	if code, m := u.do("POST", "/api/logout", nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d %v", code, m)
	}
	// The stream of the logged-out session ends: at most one view that was
	// under way, then the end (it re-reads once a second while open).
	for n := 0; ; n++ {
		if _, ok := sA.next(); !ok {
			break
		}
		if n >= 2 {
			t.Fatalf("the logged-out session's SSE stream still sends views")
		}
	}
	for n := 0; ; n++ {
		if _, err := readWS(t, ctx, wA); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the logged-out session's WebSocket: %v", err)
			}
			break
		}
		if n >= 2 {
			t.Fatalf("the logged-out session's WebSocket still sends views")
		}
	}
	// The other session's stream is open still.
	if ev, ok := sB.next(); !ok || ev["status"] != "unknown" {
		t.Errorf("the other session's stream after the logout: %v %v", ev, ok)
	}
}

func first(s *sseStream) bool { _, ok := s.next(); return ok }

// TestTicketExpiryCanonical (I1): a ticket's expiry verifies only in its
// canonical decimal spelling; "+", leading zeros and the like are refused
// (by the check and by the stream). Before, strconv.ParseInt accepted them
// and the MAC, made over the canonical form, matched.
func TestTicketExpiryCanonical(t *testing.T) {
	a, base := startApp(t, embeddedConfig(5, 2))
	u := login(t, base, "user1")
	const resv = "r-i1"
	tk := u.ticket(resv)
	f := strings.Split(tk, "~")
	if len(f) < 3 {
		t.Fatalf("ticket %q", tk)
	}
	exp := f[len(f)-2]
	now := time.Now()
	for _, alt := range []string{"+" + exp, "0" + exp, "00" + exp, "+0" + exp} {
		g := append([]string(nil), f...)
		g[len(g)-2] = alt
		bad := strings.Join(g, "~")
		if user, ok := app.CheckTicket(a, bad, resv, now); ok {
			t.Errorf("expiry %q verifies (as user %q)", alt, user)
		}
		if code := streamCode(t, base, resv, bad); code != http.StatusUnauthorized {
			t.Errorf("stream with expiry %q: %d, want 401", alt, code)
		}
	}
	if _, ok := app.CheckTicket(a, tk, resv, now); !ok {
		t.Error("the canonical ticket does not verify")
	}
	if code := streamCode(t, base, resv, tk); code != http.StatusOK {
		t.Errorf("stream with the canonical ticket: %d, want 200", code)
	}
}
