package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckillkit/seckill/captcha"
)

// BotFarmConfig is one bot-farm run (#29): scripted clients beside
// human-paced ones race for the stock of a server started with -demo and
// -trusted-proxies naming this generator (the clients' addresses travel in
// X-Forwarded-For).
//
// A bot signs in as its own account, fires at the start with no delay,
// presents one of Devices device IDs (rotating) and an address drawn from
// Network, solves the proof of work when the server asks for one
// (captcha.Solve: maxnumber/2 SHA-256 on average, on this process's CPU),
// solves an image captcha when asked (a captcha farm: the demo hook,
// instantly) and retries a refusal that is not final at once, up to 5
// tries. A human signs in as its own account from its own IPv4 address and
// device, clicks at a uniformly random moment within 2×Think after the
// start, solves the proof of work, and types the image captcha when asked
// (the demo hook: the typing time is not counted); it retries a busy or
// limited answer after Think, up to 3 tries.
type BotFarmConfig struct {
	Target string // base URL of the service
	Humans int    // demo users user1..userHumans are humans
	Bots   int    // the next Bots demo users are bots
	// Think is the humans' mean delay after the start; default 1s.
	Think time.Duration
	// Network is the bots' IPv6 network; default 2001:db8:b07:1::/64.
	Network string
	// Devices is how many device IDs the bots rotate among; default
	// Bots: a fresh one per account (a device ID is a header the client
	// chooses), so the device binding alone does not catch them.
	Devices int
	// Concurrency bounds the clients in flight; default 256.
	Concurrency int
}

// BotFarmReport is what a bot-farm run measured.
type BotFarmReport struct {
	Stock      int64
	HumanUnits int // accepted buys (202: a unit reserved) of humans
	BotUnits   int // … of bots
	// HumanP50 and HumanP99 are the humans' latency from the click to the
	// final answer of the buy: the access token, the proof of work (its
	// solving included), the captcha when asked, the buy, its retries.
	HumanP50, HumanP99 time.Duration
	HumanCaptchas      int            // humans asked an image captcha
	BotCaptchas        int            // bots asked an image captcha
	Outcomes           map[string]int // "human <status>", "bot <status>": each client's final answer
}

// BotShare is the bots' share of the units sold.
func (r *BotFarmReport) BotShare() float64 {
	if n := r.HumanUnits + r.BotUnits; n > 0 {
		return float64(r.BotUnits) / float64(n)
	}
	return 0
}

func (r *BotFarmReport) String() string {
	keys := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	fmt.Fprintf(&sb, "stock %d: humans %d units, bots %d units (bots' share %.0f%%)\n", r.Stock, r.HumanUnits, r.BotUnits, 100*r.BotShare())
	fmt.Fprintf(&sb, "humans' latency click→answer: p50 %v, p99 %v; image captchas asked: humans %d, bots %d\n",
		r.HumanP50.Round(time.Millisecond), r.HumanP99.Round(time.Millisecond), r.HumanCaptchas, r.BotCaptchas)
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %-28s %d\n", k, r.Outcomes[k])
	}
	return sb.String()
}

type farmClient struct {
	base, bearer, ip, device string
	hc                       *http.Client
}

func (c *farmClient) call(ctx context.Context, method, path string, body any, out any) (int, []byte, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	req.Header.Set("X-Device-ID", c.device)
	req.Header.Set("X-Forwarded-For", c.ip)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err == nil && out != nil && len(raw) > 0 {
		_ = json.Unmarshal(raw, out)
	}
	return resp.StatusCode, raw, err
}

type farmAnswer struct {
	Status     string `json:"status"`
	Message    string `json:"message"`
	Token      string `json:"token"`
	Path       string `json:"path"`
	ID         string `json:"id"`
	DemoAnswer string `json:"demo_answer"`
}

// attempt is one click: token, proof of work, captcha when asked, buy.
// It returns the final status ("queued" for a unit) and whether an image
// captcha was asked.
func (c *farmClient) attempt(ctx context.Context, reqID string) (string, bool, error) {
	var tk farmAnswer
	code, _, err := c.call(ctx, "POST", "/api/activity/token", struct{}{}, &tk)
	if err != nil {
		return "", false, err
	}
	if code != 200 {
		return orStatus(tk.Status, code), false, nil
	}
	body := map[string]string{"token": tk.Token, "request_id": reqID}
	pow, err := c.pow(ctx)
	if err != nil {
		return "", false, err
	}
	asked := pow == ""
	if pow != "" {
		body["pow"] = pow
	} else if err := c.captcha(ctx, body); err != nil {
		return "", false, err
	}
	for try := 0; ; try++ {
		var r farmAnswer
		code, _, err = c.call(ctx, "POST", tk.Path, body, &r)
		if err != nil {
			return "", asked, err
		}
		switch {
		case code == 202 || code == 200:
			return "queued", asked, nil
		case code == 400 && r.Message == "captcha required" && try == 0:
			asked = true
			if body["pow"], err = c.pow(ctx); err != nil {
				return "", asked, err
			}
			if err := c.captcha(ctx, body); err != nil {
				return "", asked, err
			}
			continue
		}
		return orStatus(r.Status, code), asked, nil
	}
}

// pow solves the server's proof of work; "" when it asks none (404).
func (c *farmClient) pow(ctx context.Context) (string, error) {
	code, raw, err := c.call(ctx, "GET", "/api/pow", nil, nil)
	if err != nil || code == 404 {
		return "", err
	}
	if code != 200 {
		return "", fmt.Errorf("load: GET /api/pow: %d %s", code, raw)
	}
	return captcha.Solve(ctx, raw)
}

// captcha fetches an image captcha and its answer (the demo hook).
func (c *farmClient) captcha(ctx context.Context, body map[string]string) error {
	var r farmAnswer
	code, raw, err := c.call(ctx, "GET", "/api/captcha?image=none", nil, &r)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("load: GET /api/captcha: %d %s", code, raw)
	}
	body["captcha_id"], body["captcha"] = r.ID, r.DemoAnswer
	return nil
}

func orStatus(s string, code int) string {
	if s == "" {
		return "http_" + strconv.Itoa(code)
	}
	return s
}

// BotFarm runs one bot-farm race (see BotFarmConfig) and reports who got
// the stock.
func BotFarm(ctx context.Context, cfg BotFarmConfig) (*BotFarmReport, error) {
	if cfg.Think == 0 {
		cfg.Think = time.Second
	}
	if cfg.Network == "" {
		cfg.Network = "2001:db8:b07:1::/64"
	}
	if cfg.Devices == 0 {
		cfg.Devices = max(1, cfg.Bots)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 256
	}
	network, err := netip.ParsePrefix(cfg.Network)
	if err != nil || !network.Addr().Is6() || network.Bits() > 64 {
		return nil, fmt.Errorf("load: bot network %q: an IPv6 prefix of at most /64", cfg.Network)
	}
	lc := newClient(cfg.Target, 4)
	act, err := lc.activity(ctx)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency, MaxConnsPerHost: cfg.Concurrency}}
	n := cfg.Humans + cfg.Bots
	clients := make([]*farmClient, n)
	var bearers sync.Map
	err = parallel(ctx, 64, n, nil, func(i int) error {
		c := &farmClient{base: cfg.Target, hc: hc}
		if i < cfg.Humans {
			c.ip = netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}).String()
			c.device = "human-" + strconv.Itoa(i+1)
		} else {
			b := network.Addr().As16()
			for k := 8; k < 16; k++ {
				b[k] = byte(rand.IntN(256))
			}
			c.ip = netip.AddrFrom16(b).String()
			c.device = "bot-dev-" + strconv.Itoa((i-cfg.Humans)%cfg.Devices)
		}
		var err error
		c.bearer, err = lc.signIn(ctx, &bearers, "user"+strconv.Itoa(i+1))
		clients[i] = c
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := lc.waitStart(ctx); err != nil {
		return nil, err
	}
	rep := &BotFarmReport{Stock: act.TotalStock, Outcomes: map[string]int{}}
	var mu sync.Mutex
	var lat []time.Duration
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	var firstErr error
	for i, c := range clients {
		human := i < cfg.Humans
		wg.Add(1)
		go func() {
			defer wg.Done()
			tries, wait := 5, time.Duration(0)
			if human {
				tries = 3
				if err := sleep(ctx, time.Duration(rand.Int64N(int64(2*cfg.Think)))); err != nil {
					return
				}
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			reqID := "f" + strconv.Itoa(i)
			var st string
			var asked bool
			for try := 0; try < tries; try++ {
				var a bool
				var err error
				st, a, err = c.attempt(ctx, reqID+"-"+strconv.Itoa(try))
				asked = asked || a
				if err != nil {
					mu.Lock()
					firstErr = firstOf(firstErr, err)
					mu.Unlock()
					return
				}
				if st != "busy" && st != "limited" && st != "retry" {
					break
				}
				if human {
					wait = cfg.Think
				}
				if sleep(ctx, wait) != nil {
					return
				}
			}
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			who := "bot"
			if human {
				who = "human"
				lat = append(lat, d)
				if asked {
					rep.HumanCaptchas++
				}
			} else if asked {
				rep.BotCaptchas++
			}
			rep.Outcomes[who+" "+st]++
			if st == "queued" {
				if human {
					rep.HumanUnits++
				} else {
					rep.BotUnits++
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return rep, firstErr
	}
	slices.Sort(lat)
	rep.HumanP50, rep.HumanP99 = Percentile(lat, 0.50), Percentile(lat, 0.99)
	return rep, nil
}

func firstOf(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
