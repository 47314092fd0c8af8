package risk

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Seed corpora live in testdata/fuzz/<Target>/ as well (run by plain
// go test); f.Add keeps the essential cases next to the properties.

func FuzzParseHop(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4:80", "[2001:db8::1]:443", "fe80::1%eth0", "::ffff:10.0.0.1",
		"unknown", "", "[", "[]:", "1.2.3.4:", `"1.2.3.4"`, "[::ffff:1.2.3.4]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseHop(s)
		if !ok {
			if a.IsValid() {
				t.Fatalf("%q: not ok but valid %v", s, a)
			}
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("%q: bad result %v", s, a)
		}
		b, ok := parseHop(a.String())
		if !ok || b != a {
			t.Fatalf("%q: %v does not round-trip (%v %v)", s, a, b, ok)
		}
	})
}

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.2:1", "6.6.6.6, 198.51.100.7, 10.1.1.1", "", "198.51.100.8")
	f.Add("203.0.113.9:5000", "10.0.0.1, 1.1.1.1", "x", "1.1.1.1")
	f.Add("[2001:db8:ffff::5]:443", "[2001:db8:1::9]:1234", "", "")
	f.Add("10.0.0.2:1", "1.1.1.1, garbage, 10.5.5.5", "a,b", "")
	f.Add("pipe", ",,,", "", "")
	trusted, err := NewIPResolver(IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48"}, RealIP: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, remote, xff1, xff2, realIP string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = remote
		req.Header["X-Forwarded-For"] = []string{xff1, xff2}
		req.Header["X-Real-Ip"] = []string{realIP}
		got := trusted.ClientIP(req)
		peer, ok := parseHop(remote)
		if got.IsValid() != ok {
			t.Fatalf("valid result %v for remote %q (peer ok %v)", got, remote, ok)
		}
		if ok && !trusted.trustedAddr(peer) && got != peer {
			t.Fatalf("untrusted peer %v but answered %v", peer, got)
		}
		if ok && got != peer {
			// The answer must come from the headers.
			all := xff1 + "," + xff2 + "," + realIP
			found := false
			for _, h := range strings.Split(all, ",") {
				if a, ok := parseHop(h); ok && a == got {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("answer %v appears nowhere in the headers", got)
			}
		}
	})
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a-b.c_d~e+f/g==", "Basic Zm9v", "Bearer", "Bearer  x", "Bearer ==",
		"Bearer a=b", "Bearer \x00", "BEARER Zm9v=", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := ParseBearer(h)
		if err != nil {
			if tok != "" {
				t.Fatalf("%q: error with token %q", h, tok)
			}
			return
		}
		if tok == "" || len(tok) > maxTokenLen || !strings.HasSuffix(h, tok) || !validToken(tok) {
			t.Fatalf("%q: bad token %q", h, tok)
		}
		for i := 0; i < len(tok); i++ {
			if tok[i] <= ' ' || tok[i] >= 0x7f {
				t.Fatalf("%q: token has byte %#x", h, tok[i])
			}
		}
		again, err := ParseBearer("Bearer " + tok)
		if err != nil || again != tok {
			t.Fatalf("%q: token %q does not round-trip", h, tok)
		}
	})
}
