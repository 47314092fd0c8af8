package app

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Stream tickets (SSE and WebSocket). EventSource and the browser's
// WebSocket cannot send an Authorization header, and a
// bearer token in the query string ends up in proxy and access logs where
// it stays valid for a day. So a signed-in client first asks for a ticket
// (POST /api/events/{reservation}/ticket, with its bearer) and opens the
// stream with ?ticket= (GET /api/events/{reservation} for SSE,
// /api/ws/{reservation} for a WebSocket). A ticket is good for one user, one reservation and
// ticketTTL: leaked, it reads one result for a minute.
//
// Format: <user>~<expiry unix seconds>~<base64url HMAC-SHA256 of
// "sse|user|reservation|expiry" under a key derived from the service secret>
// ('~' is in no user ID: they are [A-Za-z0-9._@+-], and it needs no
// escaping in a URL).

const ticketTTL = time.Minute

// ticketMAC is the MAC of a ticket's fields.
func (a *App) ticketMAC(user, resv string, exp int64) []byte {
	m := hmac.New(sha256.New, a.p.ticketKey)
	m.Write([]byte("sse|" + user + "|" + resv + "|" + strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// newTicket returns a ticket of user for resv, valid until now + ticketTTL.
func (a *App) newTicket(user, resv string, now time.Time) (string, time.Time) {
	exp := now.Add(ticketTTL).Truncate(time.Second)
	mac := a.ticketMAC(user, resv, exp.Unix())
	return user + "~" + strconv.FormatInt(exp.Unix(), 10) + "~" + base64.RawURLEncoding.EncodeToString(mac), exp
}

// checkTicket returns the user a ticket was made for, when it is genuine,
// made for resv and not expired at now.
func (a *App) checkTicket(t, resv string, now time.Time) (string, bool) {
	user, rest, ok := strings.Cut(t, "~")
	if !ok || user == "" || len(t) > 200 {
		return "", false
	}
	es, ms, ok := strings.Cut(rest, "~")
	if !ok {
		return "", false
	}
	exp, err1 := strconv.ParseInt(es, 10, 64)
	mac, err2 := base64.RawURLEncoding.DecodeString(ms)
	if err1 != nil || err2 != nil {
		return "", false
	}
	if !hmac.Equal(mac, a.ticketMAC(user, resv, exp)) || now.Unix() >= exp {
		return "", false
	}
	return user, true
}

// handleTicket issues an SSE ticket for the caller's reservation.
func (a *App) handleTicket(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	resv := r.PathValue("reservation")
	if resv == "" || len(resv) > 128 {
		writeErr(w, http.StatusBadRequest, "bad_request", "no such reservation")
		return
	}
	t, exp := a.newTicket(user, resv, time.Now())
	writeJSON(w, http.StatusOK, map[string]any{"ticket": t, "expires_at": exp})
}

// handleEvents streams the result over SSE, for the holder of a ticket.
func (a *App) handleEvents(w http.ResponseWriter, r *http.Request) {
	resv := r.PathValue("reservation")
	user, ok := a.checkTicket(r.URL.Query().Get("ticket"), resv, time.Now())
	if !ok {
		writeErr(w, http.StatusUnauthorized, "unauthorized", "ask for a ticket first")
		return
	}
	a.serveSSE(w, r, user, resv)
}

// handleWS pushes the result over a WebSocket, for the holder of a ticket.
func (a *App) handleWS(w http.ResponseWriter, r *http.Request) {
	resv := r.PathValue("reservation")
	user, ok := a.checkTicket(r.URL.Query().Get("ticket"), resv, time.Now())
	if !ok {
		writeErr(w, http.StatusUnauthorized, "unauthorized", "ask for a ticket first")
		return
	}
	a.serveWS(w, r, user, resv)
}
