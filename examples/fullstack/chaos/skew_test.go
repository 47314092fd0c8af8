package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// F9's shape: api1 runs 5 s ahead (-clock-skew 5s), api2 5 s behind. The
// sale starts skewStartIn after api1 seeded it (api1 seeds with the real
// clock: the skew moves only the handler's window check and the signed
// links) and lasts skewDuration; the wave starts skewLead before the start
// as Redis TIME reads it and its buyers arrive until skewLead after the
// end, so both apis let buys through their own window check that Redis
// must refuse: api1 during the 5 s before the start, api2 during the 5 s
// after the end. Both apis' own clocks say "open" only in [start + 5 s,
// end - 5 s): skewDuration leaves a second for the cross-instance replays.
const (
	skew         = 5 * time.Second
	skewStartIn  = 10 * time.Second
	skewDuration = 11 * time.Second
	skewLead     = 3 * time.Second
	skewBuyers   = 600 // at most this many of the crowd buy in F9's wave
)

func skewFault() fault {
	return fault{
		sys: func(sc *sysConfig) {
			// Stock for every buyer: the sale must not sell out, or the
			// in-process sold-out flag would refuse the buys at the
			// window's edges before Redis sees them.
			sc.stock = int64(min(sc.users-attackers, skewBuyers) + attackers)
			sc.extra = append(sc.extra, "-start-in", skewStartIn.String(), "-duration", skewDuration.String())
			sc.procExtra = map[string][]string{
				"api1": {"-clock-skew", skew.String()},
				"api2": {"-clock-skew", (-skew).String()},
			}
		},
		before: func(r *run) error {
			r.start = time.Now()
			start, end, err := saleWindow(r)
			if err != nil {
				return err
			}
			r.note("sale window by Redis TIME: %s – %s; api1 -clock-skew %v, api2 %v", start.Format("15:04:05.000"), end.Format("15:04:05.000"), skew, -skew)
			if err := waitRedisTime(r, start.Add(-skewLead)); err != nil {
				return err
			}
			r.note("Redis TIME is %v before the start: the wave begins", skewLead)
			return nil
		},
		ramp: skewLead + skewDuration + skewLead,
		// Enough for an early buyer to outlast the up to 8 s its api
		// refuses it before the start (back-off up to 1 s); tries left
		// after the end are only spent, so more would only lengthen
		// the run.
		tries:     16,
		noSweep:   "the sale has ended: every buyer would be refused ended",
		waveUsers: func(users int) int { return min(users, skewBuyers) },
		strike: func(r *run) error {
			start, _, err := saleWindow(r)
			if err != nil {
				return err
			}
			// Both apis' own clocks say "open" only from start + skew.
			if err := waitRedisTime(r, start.Add(skew+200*time.Millisecond)); err != nil {
				return err
			}
			r.note("both apis open: signed links replayed across the skewed instances")
			replayAcross(r)
			return nil
		},
		check: checkSkew,
	}
}

// saleWindow is the activity's start and end as the stock's meta hash in
// Redis holds them (unix ms): the window reserve.lua checks Redis TIME
// against.
func saleWindow(r *run) (time.Time, time.Time, error) {
	m, err := r.sys.store.Meta(r.ctx)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	st, err1 := strconv.ParseInt(m["start"], 10, 64)
	en, err2 := strconv.ParseInt(m["end"], 10, 64)
	if err1 != nil || err2 != nil || st <= 0 || en <= st {
		return time.Time{}, time.Time{}, fmt.Errorf("chaos: sale meta start=%q end=%q", m["start"], m["end"])
	}
	return time.UnixMilli(st), time.UnixMilli(en), nil
}

// waitRedisTime waits until Redis TIME reaches at (the scenario's
// schedule, read on the clock the sale runs on).
func waitRedisTime(r *run, at time.Time) error {
	for {
		now, err := r.sys.store.Redis.Time(r.ctx).Result()
		if err != nil {
			return err
		}
		if !now.Before(at) {
			return nil
		}
		d := min(at.Sub(now), 250*time.Millisecond)
		t := time.NewTimer(d) // re-read Redis TIME at least every 250 ms
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return r.ctx.Err()
		}
	}
}

// replayAcross: each extra user takes its access token and signed link on
// one api, buys there, then sends the same link and token with a new
// request_id to the other api, whose clock is 10 s away. The replay must
// be refused; a 202 is a violation. An answer refused before the link and
// token are checked (sold_out, not_started, ended, busy) is not evaluated.
func replayAcross(r *run) {
	apis := r.sys.apis
	base := int64(len(r.crowds[0].Buyers))
	buyOn := func(g *agent, api int, rid string) reply {
		h := newAgent(r.hc, apis[api%len(apis)].URL, g.user)
		h.bearer = g.bearer
		id, ans, c := h.captcha(r.ctx)
		if c.Code != http.StatusOK {
			return c
		}
		return h.buy(r.ctx, g.path, g.token, id, ans, rid)
	}
	evaluated := 0
	for i := 0; i < attackers; i++ {
		home, other := i, i+1
		g := r.agentFor(base+int64(i)+1, home)
		if tok := g.takeToken(r.ctx); tok.Code != http.StatusOK || g.path == "" {
			r.count("skew replay: no link "+tok.key(), 1)
			continue
		}
		rid := "skew-" + strconv.Itoa(i)
		first := buyOn(g, home, rid+"-a")
		r.count("skew legit buy "+first.key(), 1)
		if first.Code != http.StatusAccepted || first.Reservation == "" {
			continue
		}
		r.mu.Lock()
		r.extra[first.Reservation] = g.user
		r.mu.Unlock()
		a := buyOn(g, other, rid+"-b")
		switch {
		case a.Code == http.StatusAccepted || (a.Code == http.StatusOK && a.Reservation != ""):
			r.violation("F9: a signed link used on api%d was accepted again on api%d: %s (reservation %s)", home%2+1, other%2+1, a.key(), a.Reservation)
		case a.Code == 0 || a.Code >= 500 || a.Status == "sold_out" || a.Status == "not_started" || a.Status == "ended":
			r.count("sec not evaluated", 1)
		default:
			evaluated++
			r.count("sec refused skew replay "+a.key(), 1)
		}
	}
	r.note("skew replays: %d refused by the check under attack", evaluated)
	if evaluated == 0 {
		r.violation("F9: no cross-instance replay reached the link and token checks: the run proves nothing about one-time links")
	}
}

// checkSkew: every reservation the stock ledger holds (held or released)
// was made inside the sale window as Redis TIME reads it; and the apis'
// own clocks did let buys through that Redis then refused (api1 before the
// start, api2 after the end), or the run did not test the window's edges.
func checkSkew(r *run, st crash.State) {
	start, end, err := saleWindow(r)
	if err != nil {
		r.violation("F9: %v", err)
		return
	}
	led, err := r.sys.store.Redis.HGetAll(r.ctx, prefix+"{a:1}:resv").Result()
	if err != nil {
		r.violation("F9: ledger: %v", err)
		return
	}
	in := 0
	for id, v := range led {
		f := strings.Split(v, ":")
		if len(f) < 4 {
			r.violation("F9: ledger entry %s = %q", id, v)
			continue
		}
		at, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			r.violation("F9: ledger entry %s = %q: %v", id, v, err)
			continue
		}
		if f[2] == "T" { // a tombstone: released before it was reserved, never a sale
			continue
		}
		if at < start.UnixMilli() || at >= end.UnixMilli() {
			r.violation("F9: reservation %s made at %s by Redis TIME, outside the sale window %s – %s", id,
				time.UnixMilli(at).Format("15:04:05.000"), start.Format("15:04:05.000"), end.Format("15:04:05.000"))
			continue
		}
		in++
	}
	r.count("reserved in window", in)
	early, err := reserveCount(r, 0, "not started")
	if err != nil {
		r.violation("F9: %v", err)
	}
	late, err := reserveCount(r, 1, "ended")
	if err != nil {
		r.violation("F9: %v", err)
	}
	r.count("redis refused not started (api1 +5s)", early)
	r.count("redis refused ended (api2 -5s)", late)
	r.note("ledger: %d reservations, all within the window by Redis TIME; Redis refused %d buys api1 (+5 s) let through before the start, %d api2 (-5 s) let through after the end",
		in, early, late)
	if early == 0 || late == 0 {
		r.violation("F9: the window's edges were not exercised (Redis refused %d early buys of api1, %d late buys of api2): the run proves nothing about the skew", early, late)
	}
}

// reserveCount reads seckill_reserve_total{status=…} from api i's /metrics:
// stock.Reserve outcomes, counted after the handler's own window check let
// the buy through.
func reserveCount(r *run, i int, status string) (int, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.sys.apis[i].URL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	want := `seckill_reserve_total{status="` + status + `"} `
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, sc.Err()
}
