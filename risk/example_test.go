package risk_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/risk"
)

func ExampleIPResolver_ClientIP() {
	ipr, _ := risk.NewIPResolver(risk.IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8"}}) // your load balancers

	// Behind the trusted load balancer: the right-most untrusted hop wins;
	// "6.6.6.6" was typed by the client and is ignored.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:51000"
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.3.4")
	fmt.Println(ipr.ClientIP(r))

	// Straight from the internet: forwarding headers are ignored.
	r.RemoteAddr = "198.51.100.9:40000"
	fmt.Println(ipr.ClientIP(r))
	// Output:
	// 203.0.113.7
	// 198.51.100.9
}

func ExampleNewAuth() {
	mr := miniredis.NewMiniRedis()
	_ = mr.Start()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	sessions, _ := risk.NewSessionStore(rdb, risk.SessionConfig{})
	token, _ := sessions.Create(ctx, "user-42", time.Hour) // at login
	auth, _ := risk.NewAuth(sessions)
	h := auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _ := risk.UserFrom(r.Context())
		fmt.Fprintf(w, "hello %s\n", user)
	}))

	for _, header := range []string{"Bearer " + token, "Bearer forged", ""} {
		r := httptest.NewRequest(http.MethodPost, "/buy", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	// Output:
	// 200 hello user-42
	// 401 {"error":"unauthorized","reason":"invalid_token"}
	// 401 {"error":"unauthorized","reason":"missing_token"}
}

func ExampleBlacklist_Add() {
	mr := miniredis.NewMiniRedis()
	_ = mr.Start()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	bl, _ := risk.NewBlacklist(rdb, risk.BlacklistConfig{BanBase: time.Minute, BanMax: 10 * time.Minute, BanFactor: 2})
	for i := 0; i < 5; i++ {
		ban, _ := bl.Add(ctx, risk.KindUser, "scalper", "too_frequent")
		fmt.Printf("offence %d: banned for %v\n", ban.Offence, ban.Duration)
	}
	d, _ := bl.Check(ctx, risk.Subject{UserID: "scalper"})
	fmt.Println(d.Action, d.Reason)
	// Output:
	// offence 1: banned for 1m0s
	// offence 2: banned for 2m0s
	// offence 3: banned for 4m0s
	// offence 4: banned for 8m0s
	// offence 5: banned for 10m0s
	// deny user_blacklisted
}

func ExampleDeviceBinder_Bind() {
	mr := miniredis.NewMiniRedis()
	_ = mr.Start()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	devices, _ := risk.NewDeviceBinder(rdb, risk.DeviceBinderConfig{BindTTL: 24 * time.Hour})
	for _, user := range []string{"alice", "alice", "bob"} {
		b, _ := devices.Bind(ctx, "phone-1", user)
		fmt.Printf("%s: owner=%s new=%v conflict=%v\n", user, b.Owner, b.New, b.Conflict)
	}
	// Output:
	// alice: owner=alice new=true conflict=false
	// alice: owner=alice new=false conflict=false
	// bob: owner=alice new=false conflict=true
}

func ExampleNewMiddleware() {
	mr := miniredis.NewMiniRedis()
	_ = mr.Start()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	bl, _ := risk.NewBlacklist(rdb, risk.BlacklistConfig{})
	// More than 2 requests a minute: captcha; more than 3: 429 and a ban.
	beh, _ := risk.NewBehaviour(rdb, risk.BehaviourConfig{Window: time.Minute, FlagAt: 2, DenyAt: 3, AutoBlacklist: bl})
	dev, _ := risk.NewDeviceBinder(rdb, risk.DeviceBinderConfig{})
	checker, _ := risk.NewChecker([]risk.Rule{bl, beh, dev}, risk.WithFailurePolicy(risk.FailClosed))
	mw, _ := risk.NewMiddleware(checker)

	buy := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, `{"status":"queued"}`)
	}))
	// In production the risk.NewAuth middleware sits in front and sets the user.
	asUser := func(user, device string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/buy", nil)
		r.Header.Set("X-Device-ID", device)
		return r.WithContext(risk.WithUser(r.Context(), user))
	}
	for i := 0; i < 5; i++ {
		w := httptest.NewRecorder()
		buy.ServeHTTP(w, asUser("u1", "phone-1"))
		fmt.Print(w.Code, " ", strings.TrimSpace(w.Body.String()), "\n")
	}
	w := httptest.NewRecorder()
	buy.ServeHTTP(w, asUser("u2", "phone-1"))
	fmt.Print(w.Code, " ", w.Body.String())
	// Output:
	// 202 {"status":"queued"}
	// 202 {"status":"queued"}
	// 403 {"error":"challenge","reason":"suspicious_rate"}
	// 429 {"error":"too_many_requests","reason":"too_frequent"}
	// 403 {"error":"forbidden","reason":"user_blacklisted"}
	// 403 {"error":"forbidden","reason":"device_other_user"}
}

func ExampleChecker_dryRun() {
	deny := risk.NewRule("new-rule", func(ctx context.Context, s risk.Subject) (risk.Decision, error) {
		return risk.Decision{Action: risk.Deny, Reason: "experimental"}, nil
	})
	checker, _ := risk.NewChecker([]risk.Rule{deny}, risk.WithDryRun(true),
		risk.WithOnDecision(func(ctx context.Context, s risk.Subject, d risk.Decision) {
			fmt.Printf("would %s %s (%s)\n", d.DryRunAction, s.UserID, d.Reason)
		}))
	d, _ := checker.Check(context.Background(), risk.Subject{UserID: "u1"})
	fmt.Println("enforced:", d.Action)
	// Output:
	// would deny u1 (experimental)
	// enforced: allow
}
