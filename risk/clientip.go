package risk

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// IPResolver finds the client IP of a request behind reverse proxies.
//
// The TCP peer (Request.RemoteAddr) is the only address nobody can forge.
// When the peer is a trusted proxy, X-Forwarded-For is read from the right
// (the end appended by your own proxies) towards the left, skipping trusted
// proxy addresses; the first untrusted hop is the client. Everything left
// of it was written by the client and is ignored, so a spoofed header
// cannot choose the IP. When the peer is not trusted, the headers are
// ignored entirely.
//
// Addresses may carry ports ("1.2.3.4:80", "[2001:db8::1]:443"), zones and
// surrounding spaces; IPv4-mapped IPv6 addresses are unmapped. A garbage hop
// stops the walk: the resolver then answers the last address it could
// verify (the left-most trusted hop seen), because whatever lies beyond is
// unreliable. The resolver never panics and [IPResolver.ClientIP] does not
// allocate.
//
// An IPResolver is immutable and safe for concurrent use.
type IPResolver struct {
	trusted []netip.Prefix
	realIP  bool
}

// IPResolverConfig holds the settings of [NewIPResolver]; the zero value
// trusts no proxy (only the TCP peer counts).
type IPResolverConfig struct {
	// TrustedProxies lists the proxies whose forwarding headers are
	// believed, each a CIDR ("10.0.0.0/8", "2001:db8::/32") or a single
	// address ("10.0.0.7").
	TrustedProxies []string
	// RealIP makes the resolver believe the X-Real-IP header when the peer
	// is a trusted proxy, ahead of X-Forwarded-For. Default off.
	RealIP bool
}

// NewIPResolver returns a resolver with the settings of cfg. A trusted
// proxy that is neither an address nor a CIDR fails with
// [ErrInvalidConfig].
func NewIPResolver(cfg IPResolverConfig) (*IPResolver, error) {
	var err error
	r := &IPResolver{realIP: cfg.RealIP}
	for _, s := range cfg.TrustedProxies {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(s)
			if err == nil {
				a = a.WithZone("")
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("risk: trusted proxy %q: %w", s, ErrInvalidConfig)
		}
		p = p.Masked()
		if p.Addr().Is4In6() {
			// ::ffff:10.0.0.0/104 → 10.0.0.0/8, to match unmapped addresses.
			if p.Bits() < 96 {
				return nil, fmt.Errorf("risk: trusted proxy %q: %w", s, ErrInvalidConfig)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		r.trusted = append(r.trusted, p)
	}
	return r, nil
}

// trustedAddr reports whether a is a trusted proxy address.
func (r *IPResolver) trustedAddr(a netip.Addr) bool {
	if r == nil {
		return false
	}
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns the client address of req; the zero Addr (IsValid
// false) only when RemoteAddr itself is unparseable. A nil resolver returns
// the peer address.
func (r *IPResolver) ClientIP(req *http.Request) netip.Addr {
	peer, ok := parseHop(req.RemoteAddr)
	if !ok {
		return netip.Addr{}
	}
	if !r.trustedAddr(peer) {
		return peer
	}
	if r.realIP {
		if vs := req.Header.Values("X-Real-Ip"); len(vs) == 1 {
			if a, ok := parseHop(vs[0]); ok {
				return a
			}
		}
	}
	return r.fromXFF(req.Header.Values("X-Forwarded-For"), peer)
}

// fromXFF walks the X-Forwarded-For lines from the right. last is the
// left-most verified trusted address so far (starting with the peer).
func (r *IPResolver) fromXFF(lines []string, last netip.Addr) netip.Addr {
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for {
			j := strings.LastIndexByte(s, ',')
			hop := s[j+1:] // the whole rest when j == -1
			// Empty elements ("a,,b", a trailing comma) are skipped.
			if strings.TrimSpace(hop) != "" {
				a, ok := parseHop(hop)
				if !ok {
					return last
				}
				if !r.trustedAddr(a) {
					return a
				}
				last = a
			}
			if j < 0 {
				break
			}
			s = s[:j]
		}
	}
	return last
}

// parseHop parses one forwarding hop or a RemoteAddr: an IPv4 or IPv6
// address, optionally with a port ("1.2.3.4:5", "[::1]:5"), brackets, a
// zone (dropped) and surrounding spaces or quotes. IPv4-mapped IPv6
// addresses are unmapped. It reports false for anything else, including
// "unknown" and obfuscated identifiers.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if s == "" || len(s) > 64 {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		rest := s[end+1:]
		if rest != "" && !validPort(rest) {
			return netip.Addr{}, false
		}
		s = s[1:end]
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		return a.WithZone("").Unmap(), true
	}
	if c := strings.IndexByte(s, ':'); c >= 0 && strings.IndexByte(s[c+1:], ':') < 0 {
		// Exactly one colon: IPv4 with a port.
		if !validPort(s[c:]) {
			return netip.Addr{}, false
		}
		s = s[:c]
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
		return a, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// validPort accepts ":" followed by 1–5 digits.
func validPort(s string) bool {
	if len(s) < 2 || len(s) > 6 || s[0] != ':' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
