package crash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/history"
)

// Answer is one answer a buyer got: an HTTP status and the JSON status, or
// a transport error (Code 0).
type Answer struct {
	Step        string // login, captcha, token, buy, result
	Code        int    // HTTP status; 0 = transport error
	Status      string // "status" of the JSON body
	Reservation string // "reservation" of the JSON body
	Err         string // transport error
}

// Key is "step code status", e.g. "buy 202 queued", "token 425 not_started"
// or "buy err".
func (a Answer) Key() string {
	if a.Step == "" {
		return "-"
	}
	if a.Code == 0 {
		return a.Step + " err"
	}
	return a.Step + " " + strconv.Itoa(a.Code) + " " + a.Status
}

// Attempt is one purchase attempt: one request_id, kept across the retries
// of that attempt (a transport error or a 5xx), as the page keeps it.
type Attempt struct {
	RequestID   string
	Reservation string   // named by an answer: 202, a replayed result, a released reservation
	Accepted    bool     // answered 202, or 200 with the reservation's result (a replay)
	Answers     []Answer // the buy answers of this attempt, in order
}

// Buyer is one demo user. A buyer is driven by one goroutine at a time
// (a wave or a probe); read it after the wave returned.
type Buyer struct {
	User     int64
	Name     string
	Attempts []*Attempt
	Stop     string // why the last wave stopped driving this buyer

	// Queue mode (Crowd.Queue): Admissions are the distinct admissions
	// the buyer saw, each named by its admission deadline (a poll's
	// "expiry": one admission keeps one deadline however often it is
	// polled), Told the times the service told it its place was gone (a
	// poll answering 403 "join again", or the state left), Joins its joins.
	Admissions  []string
	AdmittedAt  []time.Time // when each of Admissions was first seen
	Told, Joins int

	bearer, token, path string
	qticket, pass       string          // queue mode: the queue ticket, the admission pass
	hist                *history.Client // with Crowd.History: this buyer's answers
}

// Accepted returns the buyer's accepted attempts.
func (b *Buyer) Accepted() []*Attempt {
	var out []*Attempt
	for _, a := range b.Attempts {
		if a.Accepted {
			out = append(out, a)
		}
	}
	return out
}

// Crowd is N demo users buying from one service over HTTP (net/http), the
// way the page does: sign in (again after a 401), a fresh captcha (answer
// through the demo hook), the access token and the signed path from
// /api/activity/token, then the buy with a request_id. Like the page it
// keeps the request_id across transport errors and 5xx answers and starts
// a new attempt after any other refusal. Unlike the page, the retry of an
// attempt whose token call is refused (already_bought: the attempt spent
// the token; sold_out) goes on with the token it holds, so every retry
// reaches the buy, which answers from the attempt's reservation.
// It records every answer, tallied by phase. Safe for concurrent use by
// the waves it runs; the test reads Buyers after a wave returned.
type Crowd struct {
	Buyers []*Buyer // Buyers[i] is user i+1
	// OnAccepted, when set, is called after each accepted attempt with the
	// number accepted so far (from a buyer's goroutine).
	OnAccepted func(n int64)
	// OnBuy, when set, is called before each buy request is sent with the
	// number of buy requests sent so far, this one included (from a
	// buyer's goroutine; the request waits for it).
	OnBuy func(n int64)
	// History, when set (before the first wave), records every buyer's
	// buy and result answers with their times, one history.Client per
	// buyer, for history.Check.
	History *history.Recorder
	// Queue, when set (before the first wave), is the queue sale mode
	// (-sale-mode queue): a buyer joins the waiting room, polls until
	// admitted and sends the admission pass (X-Queue-Pass) with its token
	// call; a place the service says is gone is joined again (Buyer.Told).
	Queue bool

	base     string
	hc       *http.Client
	seed     uint64
	accepted atomic.Int64
	buys     atomic.Int64
	reqSeq   atomic.Int64
	active   atomic.Int64 // buyers a wave is driving now

	mu    sync.Mutex
	phase string
	tally map[string]map[string]int // phase → Answer.Key → count
}

// NewCrowd returns users demo users (user1..userN) of the service at base.
// seed makes request IDs and back-off jitter repeatable.
func NewCrowd(base string, users int, seed uint64) *Crowd {
	c := &Crowd{base: strings.TrimRight(base, "/"), seed: seed, phase: "start", tally: map[string]map[string]int{},
		hc: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			MaxConnsPerHost: 48, MaxIdleConnsPerHost: 48, IdleConnTimeout: 30 * time.Second,
		}}}
	for i := 1; i <= users; i++ {
		c.Buyers = append(c.Buyers, &Buyer{User: int64(i), Name: "user" + strconv.Itoa(i)})
	}
	return c
}

// Close closes idle connections.
func (c *Crowd) Close() { c.hc.CloseIdleConnections() }

// Buyer returns user's buyer.
func (c *Crowd) Buyer(user int64) *Buyer { return c.Buyers[user-1] }

// SetPhase names the phase the following answers are tallied under.
func (c *Crowd) SetPhase(name string) {
	c.mu.Lock()
	c.phase = name
	c.mu.Unlock()
}

// Tally returns a copy of the answers counted in phase, by Answer.Key.
func (c *Crowd) Tally(phase string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, n := range c.tally[phase] {
		out[k] = n
	}
	return out
}

// Active is the number of buyers a wave is driving right now.
func (c *Crowd) Active() int64 { return c.active.Load() }

// AcceptedCount is the number of attempts accepted so far.
func (c *Crowd) AcceptedCount() int64 { return c.accepted.Load() }

func (c *Crowd) record(a Answer) {
	c.mu.Lock()
	m := c.tally[c.phase]
	if m == nil {
		m = map[string]int{}
		c.tally[c.phase] = m
	}
	m[a.Key()]++
	c.mu.Unlock()
}

// Accepted returns every accepted attempt by reservation ID, with its buyer.
func (c *Crowd) Accepted() map[string]*Buyer {
	out := map[string]*Buyer{}
	for _, b := range c.Buyers {
		for _, a := range b.Accepted() {
			out[a.Reservation] = b
		}
	}
	return out
}

// reply is the union of the JSON bodies the service answers.
type reply struct {
	Status      string `json:"status"`
	Message     string `json:"message"`
	Token       string `json:"token"`
	ID          string `json:"id"`
	DemoAnswer  string `json:"demo_answer"`
	Path        string `json:"path"`
	Reservation string `json:"reservation"`
	OrderNo     string `json:"order_no"`
	Reason      string `json:"reason"`
	Ticket      string `json:"ticket"` // queue mode
	State       string `json:"state"`
	Pass        string `json:"pass"`
	Expiry      string `json:"expiry"`
}

// call does one request and records its answer.
func (c *Crowd) call(ctx context.Context, step, method, path, bearer string, body any) (Answer, reply) {
	return c.callH(ctx, step, method, path, bearer, nil, body)
}

// callH is call with more headers.
func (c *Crowd) callH(ctx context.Context, step, method, path, bearer string, hdr map[string]string, body any) (Answer, reply) {
	var r reply
	a := Answer{Step: step}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.Err = err.Error()
			c.record(a)
			return a, r
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		a.Err = err.Error()
		c.record(a)
		return a, r
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		a.Err = err.Error()
		c.record(a)
		return a, r
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil { // the answer was cut: as good as lost
		a.Err = err.Error()
		c.record(a)
		return a, r
	}
	a.Code = resp.StatusCode
	_ = json.Unmarshal(b, &r)
	a.Status, a.Reservation = r.Status, r.Reservation
	c.record(a)
	return a, r
}

// pause waits the back-off for the n-th consecutive wait of a buyer
// (80 ms doubling to 1 s, jittered); false when ctx ended. It paces a
// buyer's retries like a user's, it synchronises nothing.
func pause(ctx context.Context, n int, rng *rand.Rand) bool {
	d := 80 * time.Millisecond << min(n, 4)
	d = min(d, time.Second)
	d = d/2 + time.Duration(rng.Int64N(int64(d/2)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (c *Crowd) newAttempt(b *Buyer) *Attempt {
	a := &Attempt{RequestID: "c" + strconv.FormatUint(c.seed, 36) + "-" + strconv.FormatInt(c.reqSeq.Add(1), 36)}
	b.Attempts = append(b.Attempts, a)
	return a
}

func (c *Crowd) login(ctx context.Context, b *Buyer) Answer {
	a, r := c.call(ctx, "login", http.MethodPost, "/api/login", "", map[string]string{"username": b.Name})
	if a.Code == http.StatusOK && r.Token != "" {
		b.bearer = r.Token
	}
	return a
}

// captcha returns a fresh captcha and its answer (demo mode hands both).
func (c *Crowd) captcha(ctx context.Context, b *Buyer) (Answer, string, string) {
	a, r := c.call(ctx, "captcha", http.MethodGet, "/api/captcha?image=none", b.bearer, nil)
	return a, r.ID, r.DemoAnswer
}

// takeToken asks /api/activity/token for the buyer's access token and path.
func (c *Crowd) takeToken(ctx context.Context, b *Buyer) Answer {
	var hdr map[string]string
	if b.pass != "" {
		hdr = map[string]string{"X-Queue-Pass": b.pass}
	}
	a, r := c.callH(ctx, "token", http.MethodPost, "/api/activity/token", b.bearer, hdr, struct{}{})
	if a.Code == http.StatusOK {
		b.token = r.Token
		if r.Path != "" {
			b.path = r.Path
		}
	}
	return a
}

func (c *Crowd) buyCall(ctx context.Context, b *Buyer, att *Attempt, capID, capAns string) Answer {
	path := b.path
	if path == "" {
		path = "/api/buy/none"
	}
	if n := c.buys.Add(1); c.OnBuy != nil {
		c.OnBuy(n)
	}
	h := c.historyOf(b)
	start := h.Now()
	a, r := c.call(ctx, "buy", http.MethodPost, path, b.bearer, map[string]string{
		"token": b.token, "captcha_id": capID, "captcha": capAns, "request_id": att.RequestID})
	h.Add(history.Op{Kind: history.Buy, Attempt: att.RequestID, Reservation: r.Reservation, Start: start, End: h.Now(),
		Code: a.Code, Status: r.Status, OrderNo: r.OrderNo, Reason: r.Reason})
	att.Answers = append(att.Answers, a)
	if a.Reservation != "" {
		att.Reservation = a.Reservation
	}
	if a.Code == http.StatusAccepted || (a.Code == http.StatusOK && a.Reservation != "") {
		att.Accepted = true
		if n := c.accepted.Add(1); c.OnAccepted != nil {
			c.OnAccepted(n)
		}
	}
	return a
}

// WaveOptions shape a [Crowd.Wave].
type WaveOptions struct {
	// Tries bounds each buyer's tries (one try = captcha, token, buy; a
	// failed sign-in or captcha is a try too). Default 10.
	Tries int
	// Ramp spreads the buyers' arrival: each starts after a random delay
	// in [0, Ramp) (a load shape, as buyers arrive over time). Default 0.
	Ramp time.Duration
}

// Wave drives the buyers of users (nil = everyone) concurrently until each
// stops: accepted, refused for good (sold_out, already_bought, ended,
// denied, or such a refusal of its access token), or out of tries. It
// returns why they stopped, counted.
func (c *Crowd) Wave(ctx context.Context, users []int64, o WaveOptions) map[string]int {
	if o.Tries <= 0 {
		o.Tries = 10
	}
	if users == nil {
		for _, b := range c.Buyers {
			users = append(users, b.User)
		}
	}
	var wg sync.WaitGroup
	for _, u := range users {
		b := c.Buyer(u)
		wg.Add(1)
		c.active.Add(1)
		go func() {
			defer wg.Done()
			defer c.active.Add(-1)
			rng := rand.New(rand.NewPCG(c.seed, uint64(b.User)<<20+uint64(len(b.Attempts))))
			if o.Ramp > 0 {
				t := time.NewTimer(time.Duration(rng.Int64N(int64(o.Ramp))))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
			}
			b.Stop = c.drive(ctx, b, o.Tries, rng)
		}()
	}
	wg.Wait()
	out := map[string]int{}
	for _, u := range users {
		out[c.Buyer(u).Stop]++
	}
	return out
}

// queueStep is one step of a queue-mode buyer towards its pass: a join
// when it has no ticket, else a poll. It reports "" when the buyer holds a
// pass, "wait" to poll again after a pause, "again" to go on at once,
// "done" when the room says the buyer used its turn, or "unauthorized".
func (c *Crowd) queueStep(ctx context.Context, b *Buyer) string {
	if b.qticket == "" {
		a, r := c.call(ctx, "queue_join", http.MethodPost, "/api/queue/join", b.bearer, struct{}{})
		switch {
		case a.Code == http.StatusUnauthorized:
			return "unauthorized"
		case a.Code != http.StatusOK || r.Ticket == "":
			return "wait"
		}
		b.qticket = r.Ticket
		b.Joins++
		return "again"
	}
	a, r := c.callH(ctx, "queue_poll", http.MethodGet, "/api/queue/poll", b.bearer, map[string]string{"X-Queue-Ticket": b.qticket}, nil)
	switch {
	case a.Code == http.StatusUnauthorized:
		return "unauthorized"
	case a.Code == http.StatusForbidden: // the place is gone (or the ticket lapsed): told; join again
		b.Told++
		b.qticket = ""
		return "again"
	case a.Code != http.StatusOK:
		return "wait"
	}
	switch r.State {
	case "admitted":
		if r.Pass == "" {
			return "wait"
		}
		b.pass = r.Pass
		if !slices.Contains(b.Admissions, r.Expiry) {
			b.Admissions = append(b.Admissions, r.Expiry)
			b.AdmittedAt = append(b.AdmittedAt, time.Now())
		}
		return ""
	case "left": // skipped (stopped polling) or its turn lapsed: told
		b.Told++
		b.qticket = ""
		return "again"
	case "done":
		return "done"
	}
	return "wait"
}

// drive is one buyer's loop (see Wave).
func (c *Crowd) drive(ctx context.Context, b *Buyer, maxTries int, rng *rand.Rand) string {
	att := c.newAttempt(b)
	retry := false // the next try repeats att's buy (same request_id, token and path)
	waits := 0
	wait := func() bool { waits++; return pause(ctx, waits-1, rng) }
	for try := 0; try < maxTries; try++ {
		if ctx.Err() != nil {
			return "cancelled"
		}
		if b.bearer == "" {
			if a := c.login(ctx, b); a.Code != http.StatusOK {
				if !wait() {
					return "cancelled"
				}
			}
			continue
		}
		if c.Queue && b.pass == "" && !retry {
			switch c.queueStep(ctx, b) {
			case "":
			case "unauthorized":
				b.bearer = ""
				continue
			case "done":
				return "queue done"
			case "again":
				try-- // the queue's steps are not buy tries
				continue
			default:
				try--
				if !pause(ctx, 3, rng) { // a poll every ~0.5–1 s
					return "cancelled"
				}
				continue
			}
		}
		a, capID, capAns := c.captcha(ctx, b)
		switch {
		case a.Code == http.StatusUnauthorized:
			b.bearer = ""
			continue
		case a.Code != http.StatusOK || capAns == "":
			if !wait() {
				return "cancelled"
			}
			continue
		}
		heldToken := b.token
		a = c.takeToken(ctx, b)
		switch {
		case a.Code == http.StatusOK:
		case a.Code == http.StatusUnauthorized:
			b.bearer = ""
			continue
		case retry && a.Code == http.StatusConflict && heldToken != "" && b.path != "":
			// A refusal of the token call (already_bought: the attempt
			// being retried spent the token; sold_out) does not end the
			// attempt: its retry goes on with the token it holds, since
			// the buy answers from the attempt's reservation first.
			b.token = heldToken
		case a.Code == http.StatusConflict: // sold_out (pool empty or sold out), already_bought (token used)
			return "token " + a.Status
		case c.Queue && a.Code == http.StatusForbidden && a.Status == "queue":
			// The pass no longer verifies (spent, lapsed, or the room
			// lost it): to the queue again.
			b.pass = ""
			continue
		default: // not_started, busy, transport error
			if !wait() {
				return "cancelled"
			}
			continue
		}
		a = c.buyCall(ctx, b, att, capID, capAns)
		retry = false
		switch {
		case att.Accepted:
			return "accepted"
		case a.Code == 0 || a.Code >= 500: // lost answer, busy, retry: the same attempt again
			retry = true
			if !wait() {
				return "cancelled"
			}
		case a.Status == "failed": // the attempt's reservation was released: a new attempt
			att = c.newAttempt(b)
		case a.Status == "sold_out" || a.Status == "already_bought" || a.Status == "ended" || a.Status == "denied":
			return a.Status
		case a.Code == http.StatusUnauthorized:
			b.bearer = ""
			att = c.newAttempt(b)
		default: // captcha, token, limited, not_started: refused, a new attempt
			att = c.newAttempt(b)
			if !wait() {
				return "cancelled"
			}
		}
	}
	return "exhausted"
}

// retryCall repeats call (at most tries times) while it fails with a
// transport error, a 5xx or 401 (signing in again).
func (c *Crowd) retryCall(ctx context.Context, b *Buyer, tries int, call func() Answer) Answer {
	rng := rand.New(rand.NewPCG(c.seed, uint64(b.User)))
	var a Answer
	for i := 0; i < tries; i++ {
		if b.bearer == "" {
			c.login(ctx, b)
		}
		a = call()
		switch {
		case a.Code == http.StatusUnauthorized:
			b.bearer = ""
		case a.Code == 0 || a.Code >= 500:
		default:
			return a
		}
		if !pause(ctx, i, rng) {
			return a
		}
	}
	return a
}

// PageAttempt is one new purchase attempt started the way the page starts
// one: /api/activity/token first (the token and the signed path), then a
// fresh captcha and the buy with a new request_id. It returns the token
// answer and, when a token was granted, the buy answer (Step "" if not).
func (c *Crowd) PageAttempt(ctx context.Context, b *Buyer) (Answer, Answer) {
	tok := c.Token(ctx, b)
	if tok.Code != http.StatusOK {
		return tok, Answer{}
	}
	return tok, c.DirectAttempt(ctx, b)
}

// DirectAttempt is one new purchase attempt with the access token and the
// signed path the buyer already holds (no token call): a fresh captcha, a
// new request_id, the buy (retried with the same request_id on a transport
// error or a 5xx).
func (c *Crowd) DirectAttempt(ctx context.Context, b *Buyer) Answer {
	return c.Resend(ctx, b, c.newAttempt(b))
}

// Token is POST /api/activity/token as the buyer (signing in again on
// 401, retried on transport errors and 5xx); a granted token and path
// replace the ones the buyer holds.
func (c *Crowd) Token(ctx context.Context, b *Buyer) Answer {
	return c.retryCall(ctx, b, 8, func() Answer { return c.takeToken(ctx, b) })
}

// Resend repeats att's buy as a client does after losing the answer: the
// same request_id, the token and path the buyer holds, a fresh captcha.
func (c *Crowd) Resend(ctx context.Context, b *Buyer, att *Attempt) Answer {
	return c.retryCall(ctx, b, 8, func() Answer {
		a, capID, capAns := c.captcha(ctx, b)
		if a.Code != http.StatusOK {
			return a
		}
		return c.buyCall(ctx, b, att, capID, capAns)
	})
}

// Result is GET /api/result/{reservation} as the buyer (signing in again
// on 401, retried on transport errors and 5xx).
func (c *Crowd) Result(ctx context.Context, b *Buyer, reservation string) Answer {
	h := c.historyOf(b)
	return c.retryCall(ctx, b, 8, func() Answer {
		start := h.Now()
		a, r := c.call(ctx, "result", http.MethodGet, "/api/result/"+reservation, b.bearer, nil)
		h.Add(history.Op{Kind: history.Result, Reservation: reservation, Start: start, End: h.Now(), Code: a.Code,
			Status: r.Status, OrderNo: r.OrderNo, Reason: r.Reason, Named: r.Reservation})
		return a
	})
}

// historyOf is b's history client (nil without Crowd.History); b is
// driven by one goroutine at a time, which creates it the first time.
func (c *Crowd) historyOf(b *Buyer) *history.Client {
	if b.hist == nil && c.History != nil {
		b.hist = c.History.NewClient(strconv.FormatInt(b.User, 10))
	}
	return b.hist
}

// FormatCounts renders a count map sorted by key: "a=1 b=2".
func FormatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
