package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/risk"
)

// Bot defences (#29), each switched on by name in -bot-defence (default
// none: the buy works exactly as before, an image captcha on every buy):
//
//   - pow: the challenge after the click. Every buy carries a proof of work
//     (captcha.PoW, ALTCHA's v1 format) the page solves invisibly from GET
//     /api/pow; the image captcha is asked only of a buy risk challenges
//     (checkout.Config.PoW; the refusal says checkout.CaptchaRequired).
//   - risk: device bans (a device presented by a second account is banned,
//     escalating; a user crossing the behaviour's deny threshold has its
//     device banned too) and a network rule: the requests of each client
//     network (an IPv6 /64, an IPv4 address) are counted, challenged above
//     -net-challenge-at in netWindow and the network banned above
//     -net-ban-at (risk.KindIP, the /64 as a CIDR).
//   - priority: the node's global bucket shared by classes from risk's
//     decision (limiter.Priority): verified (allowed, no flag), normal
//     (allowed with a flag), suspect (challenged), so under overload the
//     suspect class is shed first. The class step runs after risk (it
//     needs the decision): it protects the reservation and the hand-off,
//     not risk's own Redis call.
const (
	defencePoW      = "pow"
	defenceRisk     = "risk"
	defencePriority = "priority"

	netWindow = 10 * time.Second // the network rule's window (-net-challenge-at, -net-ban-at count in it)

	stepPriority = "priority" // the app's checkout step (botSteps)
)

// botParts are the bot defences' parts; each nil when off.
type botParts struct {
	pow  *captcha.PoW
	prio *limiter.Priority
}

// validBotDefence checks -bot-defence's names.
func validBotDefence(names []string, cost, netChallengeAt, netBanAt int) error {
	for _, n := range names {
		if n != defencePoW && n != defenceRisk && n != defencePriority {
			return fmt.Errorf("bot-defence: unknown defence %q (pow, risk, priority)", n)
		}
	}
	if slices.Contains(names, defencePoW) && (cost < 1 || cost > 1_000_000_000) {
		return fmt.Errorf("pow-cost must be between 1 and 1e9, got %d", cost)
	}
	if slices.Contains(names, defenceRisk) && (netChallengeAt < 1 || netBanAt <= netChallengeAt) {
		return fmt.Errorf("net-challenge-at must be at least 1 and net-ban-at above it, got %d and %d", netChallengeAt, netBanAt)
	}
	return nil
}

func (a *App) defence(name string) bool { return slices.Contains(a.cfg.BotDefence, name) }

// buildBotDefence builds the defences -bot-defence names, after the risk
// rules and the limits it replaces or shares.
func (a *App) buildBotDefence() (err error) {
	p, cfg := a.p, a.cfg
	if a.defence(defencePoW) {
		// A key of its own, derived from the shared secret like the ticket key.
		k := hmac.New(sha256.New, p.ticketKey)
		k.Write([]byte("seckill pow v1"))
		if p.bots.pow, err = captcha.NewPoW(a.in.Redis, []captcha.PoWKey{{ID: "k1", Secret: k.Sum(nil)}},
			captcha.PoWConfig{KeyPrefix: cfg.KeyPrefix, MaxNumber: int64(cfg.PoWCost), Observer: p.obs, Clock: skewClock(cfg.ClockSkew)}); err != nil {
			return err
		}
	}
	if a.defence(defenceRisk) {
		if err = a.buildRiskDefence(); err != nil {
			return err
		}
	}
	if a.defence(defencePriority) {
		b := cfg.GlobalBurst
		if b < 3 {
			return fmt.Errorf("bot-defence=priority needs -global-burst >= 3, got %d", b)
		}
		normal := max(1, b/4)
		suspect := max(normal+1, b/2)
		if p.bots.prio, err = limiter.NewPriority(p.global, limiter.PriorityClass{Name: "verified"},
			limiter.PriorityClass{Name: "normal", Floor: normal}, limiter.PriorityClass{Name: "suspect", Floor: suspect}); err != nil {
			return err
		}
	}
	return nil
}

// buildRiskDefence replaces the risk checker: device bans on, the
// behaviour's automatic ban covering the device, and the network rule.
func (a *App) buildRiskDefence() (err error) {
	p, rdb, prefix := a.p, a.in.Redis, a.cfg.KeyPrefix
	behaviour, err := risk.NewBehaviour(rdb, risk.BehaviourConfig{Window: 10 * time.Second, FlagAt: 30, DenyAt: 60,
		KeyPrefix: prefix, AutoBlacklist: p.blacklist, AutoBlacklistKinds: []risk.Kind{risk.KindUser, risk.KindDevice}, Logger: a.log})
	if err != nil {
		return err
	}
	devices, err := risk.NewDeviceBinder(rdb, risk.DeviceBinderConfig{KeyPrefix: prefix, AutoBlacklist: p.blacklist, Logger: a.log})
	if err != nil {
		return err
	}
	nets, err := risk.NewBehaviour(rdb, risk.BehaviourConfig{Window: netWindow, FlagAt: int64(a.cfg.NetChallengeAt), DenyAt: int64(a.cfg.NetBanAt), KeyPrefix: prefix + "net:"})
	if err != nil {
		return err
	}
	network := risk.NewRule("network", func(ctx context.Context, s risk.Subject) (risk.Decision, error) {
		n, ok := clientNetwork(s.IP)
		if !ok {
			return risk.Decision{Action: risk.Allow}, nil
		}
		r, err := nets.Record(ctx, "n"+hex.EncodeToString(n.Addr().AsSlice()))
		switch {
		case err != nil:
			return risk.Decision{}, err
		case r.Denied:
			if r.Crossed {
				if _, err := p.blacklist.Add(ctx, risk.KindIP, n.String(), "network_flood"); err != nil {
					a.log.Warn("network ban", "network", n.String(), "err", err)
				}
			}
			return risk.Decision{Action: risk.Deny, Reason: "network_flood", Throttled: true}, nil
		case r.Flagged:
			return risk.Decision{Action: risk.Challenge, Reason: "network_busy", Flags: []string{"network_busy"}}, nil
		}
		return risk.Decision{Action: risk.Allow}, nil
	})
	p.checker, err = risk.NewChecker([]risk.Rule{network, p.blacklist, behaviour, devices}, risk.WithLogger(a.log), risk.WithObserver(p.obs))
	return err
}

// clientNetwork is the unit the network rule counts and bans: an IPv6
// address's /64 (a client picks any address of it), an IPv4 address.
func clientNetwork(ip netip.Addr) (netip.Prefix, bool) {
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32), true
	}
	n, err := ip.Prefix(64)
	return n, err == nil
}

// powCheck is checkout.Config.PoW: nil when the defence is off.
func (a *App) powCheck() func(ctx context.Context, p captcha.VerifyParams) error {
	if a.p.bots.pow == nil {
		return nil
	}
	return a.p.bots.pow.Verify
}

// globalAllow is checkout.Config.Global: the node's bucket, shared by the
// classes (botSteps) when the priority defence is on.
func (a *App) globalAllow() func() bool {
	if a.p.bots.prio != nil {
		return nil
	}
	return a.p.global.Allow
}

// botSteps inserts the priority step after risk when the defence is on.
func (a *App) botSteps(steps []checkout.Step) []checkout.Step {
	prio := a.p.bots.prio
	if prio == nil {
		return steps
	}
	i := slices.IndexFunc(steps, func(s checkout.Step) bool { return s.Name == checkout.StepRisk })
	st := checkout.Step{Name: stepPriority, Run: func(ctx context.Context, at *checkout.Attempt) checkout.Outcome {
		class := riskClass(at.Risk())
		if res, err := prio.AllowN(ctx, class, 1); err != nil || !res.Allowed {
			a.m.limited.WithLabelValues("priority_" + class).Inc()
			return checkout.Outcome{Kind: checkout.Refused, Reason: checkout.Limited, Message: "too many requests, retry shortly"}
		}
		return checkout.Outcome{}
	}}
	return slices.Insert(steps, i+1, st)
}

// riskClass is an attempt's priority class from risk's decision.
func riskClass(d risk.Decision) string {
	switch {
	case d.Action == risk.Challenge:
		return "suspect"
	case len(d.Flags) > 0:
		return "normal"
	}
	return "verified"
}

// handlePoW hands the caller a proof-of-work challenge bound to it (GET
// /api/pow; 404 without -bot-defence=pow): ALTCHA's challenge JSON.
func (a *App) handlePoW(w http.ResponseWriter, r *http.Request) {
	if a.p.bots.pow == nil {
		writeErr(w, http.StatusNotFound, "not_found", "proof of work is off (-bot-defence)")
		return
	}
	user, _ := userOf(r)
	ch, err := a.p.bots.pow.Generate(captcha.GenerateParams{User: user})
	if err != nil {
		a.fail(w, r, "pow", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(ch)
}
