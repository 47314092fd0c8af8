package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/history"
)

// agent is one user driven step by step over HTTP (the attacks, the
// payments, the result reads of attackers): it holds what it was given
// (bearer, access token, signed path) so a test can replay or forge it.
type agent struct {
	base   string
	hc     *http.Client
	user   int64
	bearer string
	token  string
	path   string
	hist   *history.Client // the answers of result and pay, when recorded (run.agentFor)
}

func newAgent(hc *http.Client, base string, user int64) *agent {
	return &agent{base: base, hc: hc, user: user}
}

// reply is the union of the service's JSON bodies.
type reply struct {
	Code        int    `json:"-"`
	Status      string `json:"status"`
	Token       string `json:"token"`
	ID          string `json:"id"`
	DemoAnswer  string `json:"demo_answer"`
	Path        string `json:"path"`
	Reservation string `json:"reservation"`
	OrderNo     string `json:"order_no"`
	Reason      string `json:"reason"`
}

// key is "code status" ("0 err" for a transport error).
func (r reply) key() string {
	if r.Code == 0 {
		return "err"
	}
	return strconv.Itoa(r.Code) + " " + r.Status
}

func (g *agent) do(ctx context.Context, method, path string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, rd)
	if err != nil {
		return reply{}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+g.bearer)
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return reply{}
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return reply{}
	}
	var r reply
	_ = json.Unmarshal(b, &r)
	r.Code = resp.StatusCode
	return r
}

// retry repeats f while it answers a transport error, a 5xx or 401
// (signing in again), at most tries times, paced by a short back-off.
func (g *agent) retry(ctx context.Context, tries int, f func() reply) reply {
	var r reply
	for i := 0; i < tries; i++ {
		if g.bearer == "" {
			g.login(ctx)
		}
		r = f()
		switch {
		case r.Code == http.StatusUnauthorized:
			g.bearer = ""
		case r.Code == 0 || r.Code >= 500:
		default:
			return r
		}
		t := time.NewTimer(time.Duration(100*(i+1)) * time.Millisecond) // back-off pacing, synchronises nothing
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return r
		}
	}
	return r
}

func (g *agent) login(ctx context.Context) reply {
	r := g.do(ctx, http.MethodPost, "/api/login", map[string]string{"username": "user" + strconv.FormatInt(g.user, 10)})
	if r.Code == http.StatusOK && r.Token != "" {
		g.bearer = r.Token
	}
	return r
}

// captcha returns a fresh captcha's id and (demo hook) answer.
func (g *agent) captcha(ctx context.Context) (string, string, reply) {
	r := g.retry(ctx, 6, func() reply { return g.do(ctx, http.MethodGet, "/api/captcha?image=none", nil) })
	return r.ID, r.DemoAnswer, r
}

// takeToken asks for the access token and the signed path.
func (g *agent) takeToken(ctx context.Context) reply {
	r := g.retry(ctx, 6, func() reply { return g.do(ctx, http.MethodPost, "/api/activity/token", struct{}{}) })
	if r.Code == http.StatusOK {
		g.token = r.Token
		if r.Path != "" {
			g.path = r.Path
		}
	}
	return r
}

// buy sends one buy with the given credentials (no retry).
func (g *agent) buy(ctx context.Context, path, tok, capID, capAns, requestID string) reply {
	return g.do(ctx, http.MethodPost, path, map[string]string{
		"token": tok, "captcha_id": capID, "captcha": capAns, "request_id": requestID})
}

// result reads /api/result/{resv}.
func (g *agent) result(ctx context.Context, resv string) reply {
	return g.retry(ctx, 8, func() reply {
		start := g.hist.Now()
		r := g.do(ctx, http.MethodGet, "/api/result/"+resv, nil)
		g.hist.Add(history.Op{Kind: history.Result, Reservation: resv, Start: start, End: g.hist.Now(), Code: r.Code,
			Status: r.Status, OrderNo: r.OrderNo, Reason: r.Reason, Named: r.Reservation})
		return r
	})
}

// pay pays the order of reservation resv.
func (g *agent) pay(ctx context.Context, resv, orderNo string) reply {
	return g.retry(ctx, 8, func() reply {
		start := g.hist.Now()
		r := g.do(ctx, http.MethodPost, "/api/pay", map[string]string{"order_no": orderNo})
		g.hist.Add(history.Op{Kind: history.Pay, Reservation: resv, Start: start, End: g.hist.Now(), Code: r.Code,
			Status: r.Status, OrderNo: r.OrderNo, Reason: r.Reason})
		return r
	})
}
