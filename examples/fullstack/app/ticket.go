package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckillkit/seckill/breaker"
)

// Stream tickets (SSE and WebSocket). EventSource and the browser's
// WebSocket cannot send an Authorization header, and a
// bearer token in the query string ends up in proxy and access logs where
// it stays valid for a day. So a signed-in client first asks for a ticket
// (POST /api/events/{reservation}/ticket, with its bearer) and opens the
// stream with ?ticket= (GET /api/events/{reservation} for SSE,
// /api/ws/{reservation} for a WebSocket). A ticket is good for one user, one
// session, one reservation and ticketTTL: leaked, it reads one result of its
// user for a minute, and not after the session's logout.
//
// Ownership: a stream shows the ticket's user only their own result (the
// reads are the user's, resultOf, and the push hub is keyed by user and
// reservation), so a ticket for a reservation that is not the caller's is
// answered exactly as one for a reservation that does not exist — issued,
// and its stream says "unknown" — and tells nobody whether another buyer's
// reservation ID exists.
//
// Sessions: the ticket carries the session's tag (sessionTag, a MAC of the
// bearer token: the token itself never appears in a URL). POST /api/logout
// marks the tag revoked in Redis for as long as a ticket or a stream of the
// session can live (ticketRevokeTTL) and closes the session's streams on
// this instance at once; a stream opening checks the mark (401 once it is
// set), and an open stream re-reads it with the result every second, so
// the session's streams on other instances close within a second too.
//
// Format: <user>~<session tag>~<expiry unix seconds>~<base64url HMAC-SHA256
// of "sse|user|tag|reservation|expiry" under a key derived from the service
// secret> ('~' is in no user ID: they are [A-Za-z0-9._@+-], nor in the tag,
// base64url; and it needs no escaping in a URL). The expiry verifies only
// in its canonical decimal spelling (no sign, no leading zero).

const ticketTTL = time.Minute

// ticketRevokeTTL is how long a logout's mark lives: past it no ticket of
// the session is left (ticketTTL) and no stream opened with one (streamMax).
const ticketRevokeTTL = ticketTTL + streamMax

// sessionTagLen is the length of a sessionTag (12 bytes of MAC, base64url).
const sessionTagLen = 16

// ticketMAC is the MAC of a ticket's fields.
func (a *App) ticketMAC(user, tag, resv string, exp int64) []byte {
	m := hmac.New(sha256.New, a.p.ticketKey)
	m.Write([]byte("sse|" + user + "|" + tag + "|" + resv + "|" + strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// sessionTag names the session of the bearer token tok in tickets and in
// the logout's mark: a MAC of it (a tag does not lead back to the token).
func (a *App) sessionTag(tok string) string {
	m := hmac.New(sha256.New, a.p.ticketKey)
	m.Write([]byte("session|" + tok))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:12])
}

// newTicket returns a ticket of user's session tag for resv, valid until
// now + ticketTTL.
func (a *App) newTicket(user, tag, resv string, now time.Time) (string, time.Time) {
	exp := now.Add(ticketTTL).Truncate(time.Second)
	mac := a.ticketMAC(user, tag, resv, exp.Unix())
	return user + "~" + tag + "~" + strconv.FormatInt(exp.Unix(), 10) + "~" + base64.RawURLEncoding.EncodeToString(mac), exp
}

// streamClaim is what a genuine ticket says: whose, of which session.
type streamClaim struct {
	user, tag string
}

// parseTicket returns the claim of a ticket when it is genuine, made for
// resv and not expired at now. Whether its session is still live is
// sessionLive's question.
func (a *App) parseTicket(t, resv string, now time.Time) (streamClaim, bool) {
	if len(t) > 200 {
		return streamClaim{}, false
	}
	user, rest, ok1 := strings.Cut(t, "~")
	tag, rest, ok2 := strings.Cut(rest, "~")
	es, ms, ok3 := strings.Cut(rest, "~")
	if !ok1 || !ok2 || !ok3 || user == "" || len(tag) != sessionTagLen {
		return streamClaim{}, false
	}
	exp, err1 := strconv.ParseInt(es, 10, 64)
	mac, err2 := base64.RawURLEncoding.DecodeString(ms)
	if err1 != nil || err2 != nil || strconv.FormatInt(exp, 10) != es { // canonical only: no "+", no leading zero
		return streamClaim{}, false
	}
	if !hmac.Equal(mac, a.ticketMAC(user, tag, resv, exp)) || now.Unix() >= exp {
		return streamClaim{}, false
	}
	return streamClaim{user: user, tag: tag}, true
}

// checkTicket returns the user a ticket was made for, when it is genuine,
// made for resv and not expired at now.
func (a *App) checkTicket(t, resv string, now time.Time) (string, bool) {
	c, ok := a.parseTicket(t, resv, now)
	return c.user, ok
}

// revokedKey is the Redis key of a logged-out session's mark.
func (a *App) revokedKey(tag string) string { return a.cfg.KeyPrefix + "stream:revoked:" + tag }

// revokeStreams marks the session tag revoked (no ticket of it opens a
// stream any more, on any instance) and closes its streams on this one.
func (a *App) revokeStreams(ctx context.Context, tag string) error {
	if err := a.in.Redis.Set(ctx, a.revokedKey(tag), "1", ticketRevokeTTL).Err(); err != nil {
		return err
	}
	a.hub.closeSession(tag)
	return nil
}

// sessionRevoked reports whether the session of tag logged out (its mark
// is set); an error when Redis cannot tell.
func (a *App) sessionRevoked(ctx context.Context, tag string) (bool, error) {
	return breaker.Do(ctx, a.p.brRedis, func(ctx context.Context) (bool, error) {
		n, err := a.in.Redis.Exists(ctx, a.revokedKey(tag)).Result()
		return n > 0, err
	})
}

// handleTicket issues a stream ticket of the caller's session for a
// reservation: see the ownership note above.
func (a *App) handleTicket(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	resv := r.PathValue("reservation")
	if resv == "" || len(resv) > 128 {
		writeErr(w, http.StatusBadRequest, "bad_request", "no such reservation")
		return
	}
	tok, err := bearerToken(r)
	if err != nil { // authenticated checked it: cannot happen
		a.fail(w, r, "ticket", err)
		return
	}
	t, exp := a.newTicket(user, a.sessionTag(tok), resv, time.Now())
	writeJSON(w, http.StatusOK, map[string]any{"ticket": t, "expires_at": exp})
}

// streamTicket checks the ticket of a stream request for resv: genuine,
// unexpired, and of a session that has not logged out. It answers the
// refusal itself (401, or 503 when Redis cannot tell) and reports whether
// to go on.
func (a *App) streamTicket(w http.ResponseWriter, r *http.Request, resv string) (streamClaim, bool) {
	c, ok := a.parseTicket(r.URL.Query().Get("ticket"), resv, time.Now())
	if !ok {
		writeErr(w, http.StatusUnauthorized, "unauthorized", "ask for a ticket first")
		return streamClaim{}, false
	}
	revoked, err := a.sessionRevoked(r.Context(), c.tag)
	switch {
	case err != nil:
		a.fail(w, r, "stream_ticket", err)
		return streamClaim{}, false
	case revoked:
		writeErr(w, http.StatusUnauthorized, "unauthorized", "ask for a ticket first")
		return streamClaim{}, false
	}
	return c, true
}

// handleEvents streams the result over SSE, for the holder of a ticket.
func (a *App) handleEvents(w http.ResponseWriter, r *http.Request) {
	resv := r.PathValue("reservation")
	if c, ok := a.streamTicket(w, r, resv); ok {
		a.serveSSE(w, r, c, resv)
	}
}

// handleWS pushes the result over a WebSocket, for the holder of a ticket.
func (a *App) handleWS(w http.ResponseWriter, r *http.Request) {
	resv := r.PathValue("reservation")
	if c, ok := a.streamTicket(w, r, resv); ok {
		a.serveWS(w, r, c, resv)
	}
}
