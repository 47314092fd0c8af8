package chaos

import (
	"net/http"
	osexec "os/exec"
	"strconv"
)

// attackers are demo users beyond the crowd (users+1 … users+attackers),
// driven by attack only.
const attackers = 12

func runCmd(name string, args ...string) ([]byte, error) {
	return osexec.Command(name, args...).CombinedOutput()
}

func execLook(name string) (string, error) { return osexec.LookPath(name) }

// attack is SEC's strike, run while the crowd buys. Each attacker takes its
// access token and signed path on one api and then, on the other api or
// the same: buys legitimately and replays the same link and token with a
// new request_id on the other api (F9: one-time across instances); uses
// another attacker's link, another attacker's access token, a forged link;
// and answers a captcha wrong past its attempt limit, then right. Every
// attack must be refused (anything but a 202 or a replayed reservation);
// a 202 on an attack is a violation. Refusals are counted by answer.
func attack(r *run) error {
	users := r.sys.apis
	n := len(users)
	base := int64(len(r.crowds[0].Buyers))
	ag := make([]*agent, attackers)
	for i := range ag {
		ag[i] = r.agentFor(base+int64(i)+1, i)
		if tok := ag[i].takeToken(r.ctx); tok.Code != http.StatusOK {
			r.count("sec token "+tok.key(), 1)
		}
	}
	r.note("SEC: %d attackers took their tokens", attackers)
	refused := func(what string, a reply) {
		if a.Code == http.StatusAccepted || (a.Code == http.StatusOK && a.Reservation != "") {
			r.violation("SEC %s accepted: %s (reservation %s)", what, a.key(), a.Reservation)
			return
		}
		if a.Status == "sold_out" || a.Code == 0 || a.Code >= 500 {
			// Refused before the check under attack ran: not evaluated.
			r.count("sec not evaluated", 1)
			return
		}
		r.count("sec refused "+what+" "+a.key(), 1)
	}
	buyWith := func(g *agent, api int, path, tok, capAns func(string) string, rid string) reply {
		h := newAgent(r.hc, users[api%n].URL, g.user)
		h.bearer = g.bearer
		id, ans, c := h.captcha(r.ctx)
		if c.Code != http.StatusOK {
			return c
		}
		return h.buy(r.ctx, path(g.path), tok(g.token), id, capAns(ans), rid)
	}
	same := func(s string) string { return s }
	for i, g := range ag {
		if g.token == "" || g.path == "" {
			continue
		}
		home, other := i, i+1
		rid := "sec-" + strconv.Itoa(i)
		// A legitimate buy on the home api.
		first := buyWith(g, home, same, same, same, rid+"-a")
		r.count("sec legit "+first.key(), 1)
		if first.Code == http.StatusAccepted && first.Reservation != "" {
			r.mu.Lock()
			r.extra[first.Reservation] = g.user
			r.mu.Unlock()
			// The same link and token, a new request_id, on the other api.
			refused("cross-instance replay", buyWith(g, other, same, same, same, rid+"-b"))
		}
		// Another attacker's link with this attacker's session.
		v := ag[(i+1)%attackers]
		if v.path != "" {
			foreign := func(string) string { return v.path }
			refused("foreign link", buyWith(g, other, foreign, same, same, rid+"-c"))
		}
		// Another attacker's access token with this attacker's own link.
		if v.token != "" {
			stolen := func(string) string { return v.token }
			refused("stolen token", buyWith(g, other, same, stolen, same, rid+"-d"))
		}
		// A forged link: the signature's last character changed.
		forged := func(p string) string {
			last := p[len(p)-1]
			if last == 'A' {
				last = 'B'
			} else {
				last = 'A'
			}
			return p[:len(p)-1] + string(last)
		}
		refused("forged link", buyWith(g, home, forged, same, same, rid+"-e"))
		// Captcha brute force: one captcha, wrong answers past the limit
		// (3 attempts), then the right one.
		h := newAgent(r.hc, users[home%n].URL, g.user)
		h.bearer = g.bearer
		id, ans, c := h.captcha(r.ctx)
		if c.Code != http.StatusOK {
			continue
		}
		for j := 0; j < 4; j++ {
			refused("captcha wrong", h.buy(r.ctx, g.path, g.token, id, "wrong"+strconv.Itoa(j), rid+"-f"+strconv.Itoa(j)))
		}
		refused("captcha right after the limit", h.buy(r.ctx, g.path, g.token, id, ans, rid+"-g"))
	}
	evaluated := 0
	r.mu.Lock()
	for k, n := range r.counts {
		if len(k) > 11 && k[:11] == "sec refused" {
			evaluated += n
		}
	}
	skipped := r.counts["sec not evaluated"]
	r.mu.Unlock()
	r.note("SEC: attacks done: %d refused by the check under attack, %d refused earlier (not evaluated)", evaluated, skipped)
	// Most attacks must reach the check they attack, or the run proves
	// little: with the sale sold out before the strike, 85 of 86 did not.
	if evaluated == 0 || skipped*4 > evaluated {
		r.violation("SEC: %d attacks reached the check they attack, %d were refused earlier (e.g. sold_out): the run proves too little", evaluated, skipped)
	}
	return nil
}
