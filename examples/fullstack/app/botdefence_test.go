package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// botClient is a signed-in demo user with a device ID and a client address
// (X-Forwarded-For: the test server trusts 127.0.0.1).
type botClient struct {
	*apiClient
	device, ip string
}

func (c *botClient) call(method, path string, body any) (int, map[string]any, []byte) {
	c.t.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.device != "" {
		req.Header.Set("X-Device-ID", c.device)
	}
	if c.ip != "" {
		req.Header.Set("X-Forwarded-For", c.ip)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, raw
}

// pow fetches and solves the user's proof of work.
func (c *botClient) pow() string {
	c.t.Helper()
	code, _, raw := c.call("GET", "/api/pow", nil)
	if code != 200 {
		c.t.Fatalf("GET /api/pow: %d %s", code, raw)
	}
	sol, err := captcha.Solve(context.Background(), raw)
	if err != nil {
		c.t.Fatal(err)
	}
	return sol
}

// tokenAndPath takes the user's access token and signed path.
func (c *botClient) tokenAndPath() (string, string) {
	c.t.Helper()
	code, m, raw := c.call("POST", "/api/activity/token", struct{}{})
	if code != 200 {
		c.t.Fatalf("token: %d %s", code, raw)
	}
	return c.str(m, "token"), c.str(m, "path")
}

// TestBotDefencePoW: with -bot-defence=pow a buy needs a solved proof of
// work (once, the buyer's own) and no image captcha; a buy risk
// challenges (no device ID) is told to solve the image captcha, and passes
// with both.
func TestBotDefencePoW(t *testing.T) {
	cfg := embeddedConfig(10, 5)
	cfg.BotDefence = []string{"pow", "risk", "priority"}
	cfg.PoWCost = 2000
	cfg.TrustedProxies = []string{"127.0.0.1/32"}
	_, url := startApp(t, cfg)

	u1 := &botClient{apiClient: login(t, url, "user1"), device: "dev-1", ip: "2001:db8:0:1::1"}
	tok, path := u1.tokenAndPath()
	code, m, raw := u1.call("POST", path, map[string]string{"token": tok, "request_id": "a1"})
	if code != 400 || m["status"] != "captcha" {
		t.Fatalf("buy without proof of work: %d %s, want 400 captcha", code, raw)
	}
	sol := u1.pow()
	u2 := &botClient{apiClient: login(t, url, "user2"), device: "dev-2", ip: "2001:db8:0:2::1"}
	tok2, path2 := u2.tokenAndPath()
	if code, _, raw := u2.call("POST", path2, map[string]string{"token": tok2, "pow": sol, "request_id": "a1"}); code != 400 {
		t.Fatalf("another user's proof of work: %d %s, want 400", code, raw)
	}
	if code, _, raw := u1.call("POST", path, map[string]string{"token": tok, "pow": sol, "request_id": "a1"}); code != 202 {
		t.Fatalf("buy with a solved proof of work: %d %s, want 202", code, raw)
	}
	u3 := &botClient{apiClient: login(t, url, "user3"), device: "dev-3", ip: "2001:db8:0:3::1"}
	tok3, path3 := u3.tokenAndPath()
	if code, _, raw := u3.call("POST", path3, map[string]string{"token": tok3, "pow": sol, "request_id": "a1"}); code != 400 {
		t.Fatalf("replayed proof of work: %d %s, want 400", code, raw)
	}

	// No device ID: risk challenges, the image captcha is asked for.
	u4 := &botClient{apiClient: login(t, url, "user4"), ip: "2001:db8:0:4::1"}
	tok4, path4 := u4.tokenAndPath()
	code, m, raw = u4.call("POST", path4, map[string]string{"token": tok4, "pow": u4.pow(), "request_id": "a1"})
	if code != 400 || m["message"] != "captcha required" {
		t.Fatalf("challenged buy: %d %s, want 400 captcha required", code, raw)
	}
	_, ch, _ := u4.call("GET", "/api/captcha", nil)
	_, ans, _ := u4.call("GET", "/api/demo/captcha/"+u4.str(ch, "id"), nil)
	code, _, raw = u4.call("POST", path4, map[string]string{"token": tok4, "pow": u4.pow(), "captcha_id": u4.str(ch, "id"), "captcha": u4.str(ans, "answer"), "request_id": "a1"})
	if code != 202 {
		t.Fatalf("challenged buy with both: %d %s, want 202", code, raw)
	}
}

// TestBotDefenceDeviceAndNetworkBans: with -bot-defence=risk a device
// presented by a second account is banned for its owner too, and a network
// (IPv6 /64) whose requests cross the deny threshold is banned: another
// address of it is refused.
func TestBotDefenceDeviceAndNetworkBans(t *testing.T) {
	cfg := embeddedConfig(10, 5)
	cfg.BotDefence = []string{"risk"}
	cfg.TrustedProxies = []string{"127.0.0.1/32"}
	cfg.NetChallengeAt, cfg.NetBanAt = 5, 30 // below the defaults (20, 100): the flags take effect
	_, url := startApp(t, cfg)

	owner := &botClient{apiClient: login(t, url, "user1"), device: "dev-shared", ip: "198.51.100.1"}
	owner.tokenAndPath() // binds the device to user1
	other := &botClient{apiClient: login(t, url, "user2"), device: "dev-shared", ip: "198.51.100.2"}
	if code, _, raw := other.call("POST", "/api/activity/token", struct{}{}); code != 403 {
		t.Fatalf("second account on the device: %d %s, want 403", code, raw)
	}
	if code, _, raw := owner.call("POST", "/api/activity/token", struct{}{}); code != 403 {
		t.Fatalf("owner of a banned device: %d %s, want 403 (device auto-ban)", code, raw)
	}

	farm := &botClient{apiClient: login(t, url, "user3"), device: "dev-farm", ip: ""}
	for i := 0; i <= cfg.NetBanAt; i++ { // -net-ban-at requests in the window, and one more
		farm.ip = "2001:db8:bad:1::" + strconv.FormatInt(int64(i+1), 16)
		farm.call("POST", "/api/activity/token", struct{}{})
	}
	next := &botClient{apiClient: login(t, url, "user4"), device: "dev-4", ip: "2001:db8:bad:1:ffff::9"}
	if code, _, raw := next.call("POST", "/api/activity/token", struct{}{}); code != 403 {
		t.Fatalf("new address in the banned /64: %d %s, want 403", code, raw)
	}
	outside := &botClient{apiClient: login(t, url, "user5"), device: "dev-5", ip: "2001:db8:bad:2::1"}
	if code, _, raw := outside.call("POST", "/api/activity/token", struct{}{}); code != 200 {
		t.Fatalf("address of another /64: %d %s, want 200", code, raw)
	}
}

// TestBotFarm runs a small bot farm (load.BotFarm) against the defences on
// and counts: the units the report gives humans and bots are the units
// Redis took (no oversell, nothing double-counted), and bots past the
// network rule's deny threshold were refused. The stock (60) covers every
// buyer, so no answer is "sold out": each of the 40 bots' token requests
// counts against their /64, and with -net-ban-at 30 at least 10 of them
// are denied whatever order the requests arrive in (with scarce stock the
// sale could sell out before the bots' requests crossed the threshold —
// CI on a loaded machine saw exactly that).
func TestBotFarm(t *testing.T) {
	cfg := embeddedConfig(60, 60)
	cfg.BotDefence = []string{"pow", "risk", "priority"}
	cfg.PoWCost = 500
	cfg.NetChallengeAt, cfg.NetBanAt = 10, 30
	cfg.TrustedProxies = []string{"127.0.0.1/32"}
	a, url := startApp(t, cfg)
	rep, err := load.BotFarm(context.Background(), load.BotFarmConfig{Target: url, Humans: 20, Bots: 40, Think: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	iv, err := a.Invariants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	taken := iv.RedisTotal - iv.RedisRemain
	if got := int64(rep.HumanUnits + rep.BotUnits); got != taken || taken > 60 {
		t.Fatalf("report: %d units (humans %d, bots %d); Redis: %d taken of 60\n%v", got, rep.HumanUnits, rep.BotUnits, taken, rep)
	}
	if rep.Outcomes["bot denied"] < 10 {
		t.Fatalf("fewer than 10 bots refused by risk control with the network rule on:\n%v", rep)
	}
	t.Log(rep)
}

// buyImage buys with an image captcha (the demo hook) and no proof of work.
func (c *botClient) buyImage(reqID string) (int, []byte) {
	c.t.Helper()
	tok, path := c.tokenAndPath()
	_, ch, _ := c.call("GET", "/api/captcha?image=none", nil)
	code, _, raw := c.call("POST", path, map[string]string{"token": tok, "captcha_id": c.str(ch, "id"), "captcha": c.str(ch, "demo_answer"), "request_id": reqID})
	return code, raw
}

// TestBotDefencePriority: with -bot-defence=priority the global bucket is
// shared by classes from risk's decision: once the verified buyers have
// taken it below the suspect class's floor (half the burst), a buy risk
// challenges (no device ID) is refused as limited while a verified one is
// still admitted. With one plain bucket the suspect buy would pass.
func TestBotDefencePriority(t *testing.T) {
	cfg := embeddedConfig(40, 100)
	cfg.BotDefence = []string{"priority"}
	cfg.GlobalRate, cfg.GlobalBurst = 1, 40 // floors: normal 10, suspect 20; refills 1 a second
	_, url := startApp(t, cfg)
	for i := 1; i <= 25; i++ { // the bucket: 40 − 25 = 15 (+1 a second) < 20 + 1
		u := "user" + strconv.Itoa(i)
		c := &botClient{apiClient: login(t, url, u), device: "dev-" + u}
		if code, raw := c.buyImage("a"); code != 202 {
			t.Fatalf("verified buy %d: %d %s", i, code, raw)
		}
	}
	suspect := &botClient{apiClient: login(t, url, "user30")} // no device ID: challenged
	if code, raw := suspect.buyImage("a"); code != 429 {
		t.Fatalf("suspect buy below its floor: %d %s, want 429", code, raw)
	}
	verified := &botClient{apiClient: login(t, url, "user31"), device: "dev-31"}
	if code, raw := verified.buyImage("a"); code != 202 {
		t.Fatalf("verified buy above its floor: %d %s, want 202", code, raw)
	}
}
