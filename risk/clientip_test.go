package risk

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHop(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want string // "" = invalid
	}{
		{"1.2.3.4", "1.2.3.4"},
		{" 1.2.3.4 ", "1.2.3.4"},
		{"1.2.3.4:8080", "1.2.3.4"},
		{`"1.2.3.4"`, "1.2.3.4"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"fe80::1%eth0", "fe80::1"},
		{"[fe80::1%eth0]:80", "fe80::1"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
		{"[::ffff:10.0.0.1]:1", "10.0.0.1"},
		{"", ""},
		{"unknown", ""},
		{"_hidden", ""},
		{"1.2.3", ""},
		{"1.2.3.4:", ""},
		{"1.2.3.4:port", ""},
		{"1.2.3.4:1234567", ""},
		{"[2001:db8::1", ""},
		{"[2001:db8::1]x", ""},
		{"[1.2.3.4]:80", ""},
		{"2001:db8::1:80:zz", ""},
		{"1.2.3.4.5", ""},
		{"300.1.1.1", ""},
		{"01.2.3.4", ""},
		{"for=1.2.3.4", ""},
		{"[]", ""},
		{`"`, ""},
	}
	for _, c := range cases {
		a, ok := parseHop(c.in)
		if c.want == "" {
			assert.False(t, ok, "%q parsed as %v", c.in, a)
			continue
		}
		if assert.True(t, ok, "%q", c.in) {
			assert.Equal(t, c.want, a.String(), "%q", c.in)
		}
	}
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	trusted := []string{"10.0.0.0/8", "192.168.1.1", "2001:db8:ffff::/48"}
	cases := []struct {
		name    string
		trusted []string
		realIP  bool
		remote  string
		xff     []string
		xRealIP string
		want    string
	}{
		{name: "no proxy trusted: peer, headers ignored", remote: "203.0.113.9:5000", xff: []string{"1.1.1.1"}, want: "203.0.113.9"},
		{name: "spoofed XFF from untrusted peer ignored", trusted: trusted, remote: "203.0.113.9:5000", xff: []string{"10.0.0.1, 1.1.1.1"}, want: "203.0.113.9"},
		{name: "spoofed X-Real-IP from untrusted peer ignored", trusted: trusted, realIP: true, remote: "203.0.113.9:5000", xRealIP: "1.1.1.1", want: "203.0.113.9"},
		{name: "trusted peer, single hop", trusted: trusted, remote: "10.0.0.2:1", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "right-most untrusted chosen over client-written left part", trusted: trusted, remote: "10.0.0.2:1",
			xff: []string{"6.6.6.6, 7.7.7.7, 198.51.100.7, 10.1.1.1, 192.168.1.1"}, want: "198.51.100.7"},
		{name: "multiple header lines read right to left", trusted: trusted, remote: "10.0.0.2:1",
			xff: []string{"6.6.6.6, 198.51.100.7", "10.3.3.3"}, want: "198.51.100.7"},
		{name: "all hops trusted: left-most", trusted: trusted, remote: "10.0.0.2:1", xff: []string{"10.9.9.9, 10.8.8.8"}, want: "10.9.9.9"},
		{name: "trusted peer without XFF: peer", trusted: trusted, remote: "10.0.0.2:1", want: "10.0.0.2"},
		{name: "garbage hop stops walk at last verified", trusted: trusted, remote: "10.0.0.2:1", xff: []string{"1.1.1.1, garbage, 10.5.5.5"}, want: "10.5.5.5"},
		{name: "garbage right next to peer: peer", trusted: trusted, remote: "10.0.0.2:1", xff: []string{"1.1.1.1, garbage"}, want: "10.0.0.2"},
		{name: "empty elements skipped", trusted: trusted, remote: "10.0.0.2:1", xff: []string{"198.51.100.7,, ,10.1.1.1,"}, want: "198.51.100.7"},
		{name: "hop with port", trusted: trusted, remote: "10.0.0.2:1", xff: []string{"198.51.100.7:4711"}, want: "198.51.100.7"},
		{name: "IPv6 peer and hops", trusted: trusted, remote: "[2001:db8:ffff::5]:443", xff: []string{"2001:db8:1::9, 2001:db8:ffff::7"}, want: "2001:db8:1::9"},
		{name: "IPv6 bracketed hop with port", trusted: trusted, remote: "[2001:db8:ffff::5]:443", xff: []string{"[2001:db8:1::9]:1234"}, want: "2001:db8:1::9"},
		{name: "mapped IPv4 peer is trusted", trusted: trusted, remote: "[::ffff:10.0.0.2]:1", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "mapped trusted prefix", trusted: []string{"::ffff:10.0.0.0/104"}, remote: "10.0.0.2:1", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "X-Real-IP opt-in from trusted peer", trusted: trusted, realIP: true, remote: "10.0.0.2:1", xRealIP: "198.51.100.8", xff: []string{"198.51.100.7"}, want: "198.51.100.8"},
		{name: "X-Real-IP off by default", trusted: trusted, remote: "10.0.0.2:1", xRealIP: "198.51.100.8", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "garbage X-Real-IP falls back to XFF", trusted: trusted, realIP: true, remote: "10.0.0.2:1", xRealIP: "nope", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "bare RemoteAddr", remote: "203.0.113.9", want: "203.0.113.9"},
		{name: "garbage RemoteAddr", remote: "pipe", want: "invalid IP"},
		{name: "empty RemoteAddr", remote: "", want: "invalid IP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := NewIPResolver(IPResolverConfig{TrustedProxies: c.trusted, RealIP: c.realIP})
			require.NoError(t, err)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = c.remote
			for _, x := range c.xff {
				req.Header.Add("X-Forwarded-For", x)
			}
			if c.xRealIP != "" {
				req.Header.Set("X-Real-IP", c.xRealIP)
			}
			assert.Equal(t, c.want, r.ClientIP(req).String())
		})
	}
}

func TestNewIPResolverErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "10.0.0.0/33", "nope", "10.0.0.0/8/8"} {
		_, err := NewIPResolver(IPResolverConfig{TrustedProxies: []string{bad}})
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
	}
	r, err := NewIPResolver(IPResolverConfig{TrustedProxies: []string{" 10.0.0.7 ", "10.1.2.3/8"}})
	require.NoError(t, err)
	assert.True(t, r.trustedAddr(netip.MustParseAddr("10.0.0.7")))
	assert.True(t, r.trustedAddr(netip.MustParseAddr("10.200.0.1")), "prefix is masked")
	var nilR *IPResolver
	assert.False(t, nilR.trustedAddr(netip.MustParseAddr("10.0.0.7")))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "198.51.100.1:80"
	req.Header.Set("X-Forwarded-For", "1.1.1.1")
	assert.Equal(t, "198.51.100.1", nilR.ClientIP(req).String())
}

func TestClientIPNoAllocs(t *testing.T) {
	r, err := NewIPResolver(IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.2:1"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.1.1.1")
	allocs := testing.AllocsPerRun(100, func() { _ = r.ClientIP(req) })
	assert.Zero(t, allocs)
}

// TestIPResolverKeyString: the client IP's String is a rate-limiter key
// (the removed IPResolver.Key returned it), and an unparseable RemoteAddr
// gives the zero Addr.
func TestIPResolverKeyString(t *testing.T) {
	t.Parallel()
	r, err := NewIPResolver(IPResolverConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.2:1"
	req.Header.Set("X-Forwarded-For", "[2001:db8::5]:99")
	assert.Equal(t, "2001:db8::5", r.ClientIP(req).String())
	req.RemoteAddr = "@"
	assert.False(t, r.ClientIP(req).IsValid())
}
