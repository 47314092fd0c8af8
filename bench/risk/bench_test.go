// Package risk_test holds the in-process benchmarks of
// github.com/seckillkit/seckill/risk (ClientIP, ParseBearer, Checker, the
// middleware's overhead), run side by side with their anchor, x/time/rate
// Allow, in the same `go test -bench` run:
//
//	cd bench && flock /tmp/seckill-bench.lock go test -run '^$' -bench . -benchmem -count 3 ./risk/
//
// The Redis-bound benchmarks of risk, whose anchor is a plain go-redis GET,
// stay in the package.
package risk_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"golang.org/x/time/rate"

	"github.com/seckillkit/seckill/risk"
)

// BenchmarkAnchorRateAllow is the in-process anchor (x/time/rate Allow,
// ≈72 ns serial, ≈100 ns parallel on a quiet 2-vCPU machine), measured in
// the same run.
func BenchmarkAnchorRateAllow(b *testing.B) {
	l := rate.NewLimiter(rate.Inf, 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = l.Allow()
		}
	})
}

func BenchmarkClientIP(b *testing.B) {
	ipr, err := risk.NewIPResolver(risk.IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8", "172.16.0.0/12", "2001:db8:ffff::/48"}})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name, remote, xff string
	}{
		{"untrusted-peer", "198.51.100.9:4000", "6.6.6.6"},
		{"xff-1-hop", "10.0.0.2:4000", "203.0.113.7"},
		{"xff-3-hops", "10.0.0.2:4000", "6.6.6.6, 203.0.113.7, 10.0.3.4, 172.16.0.9"},
		{"ipv6", "[2001:db8:ffff::2]:443", "[2001:db8:1::7]:1234, 2001:db8:ffff::3"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = c.remote
			r.Header.Set("X-Forwarded-For", c.xff)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = ipr.ClientIP(r)
				}
			})
		})
	}
}

func BenchmarkParseBearer(b *testing.B) {
	h := "Bearer " + "dGhpcyBpcyBhIDI1Ni1iaXQgcmFuZG9tIHRva2VuIQ"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = risk.ParseBearer(h)
		}
	})
}

// BenchmarkChecker measures the in-process part of a decision: composing
// three in-memory rules (allow, flag, allow), hooks on.
func BenchmarkChecker(b *testing.B) {
	allow := risk.NewRule("a", func(context.Context, risk.Subject) (risk.Decision, error) { return risk.Decision{}, nil })
	chal := risk.NewRule("c", func(context.Context, risk.Subject) (risk.Decision, error) {
		return risk.Decision{Action: risk.Challenge, Reason: risk.ReasonSuspicious}, nil
	})
	var n atomic.Int64
	hook := risk.WithOnDecision(func(context.Context, risk.Subject, risk.Decision) { n.Add(1) })
	s := risk.Subject{UserID: "u1", IP: netip.MustParseAddr("203.0.113.7"), DeviceID: "d"}
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		rules []risk.Rule
	}{
		{"3-allow", []risk.Rule{allow, allow, allow}},
		{"challenge", []risk.Rule{allow, chal, allow}},
	} {
		b.Run(c.name, func(b *testing.B) {
			chk, err := risk.NewChecker(c.rules, hook)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = chk.Check(ctx, s)
				}
			})
		})
	}
}

// BenchmarkMiddlewareInProcess is the HTTP overhead of Middleware + Auth
// with in-memory rules and authenticator (no Redis).
func BenchmarkMiddlewareInProcess(b *testing.B) {
	allow := risk.NewRule("a", func(context.Context, risk.Subject) (risk.Decision, error) { return risk.Decision{}, nil })
	chk, err := risk.NewChecker([]risk.Rule{allow, allow, allow})
	if err != nil {
		b.Fatal(err)
	}
	ipr, err := risk.NewIPResolver(risk.IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := risk.NewMiddleware(chk, risk.WithIPResolver(ipr))
	if err != nil {
		b.Fatal(err)
	}
	auth, err := risk.NewAuth(risk.AuthenticatorFunc(func(context.Context, string) (string, error) { return "u1", nil }))
	if err != nil {
		b.Fatal(err)
	}
	h := auth(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest(http.MethodPost, "/buy", nil)
		r.RemoteAddr = "10.0.0.2:1"
		r.Header.Set("X-Forwarded-For", "203.0.113.7")
		r.Header.Set("Authorization", "Bearer abc")
		r.Header.Set("X-Device-ID", "d1")
		w := discardWriter{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, r)
		}
	})
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}
