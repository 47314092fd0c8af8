package limiter

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// RemoteAddrKey keys by the address of r.RemoteAddr, the peer of the TCP
// connection: it is the default key and cannot be spoofed by headers;
// behind a reverse proxy it is the proxy's address (see [ForwardedForKey]).
// An IP address is canonicalised: its port, brackets and zone are dropped,
// an IPv4-mapped IPv6 address is unmapped and IPv6 is written in lower
// case, so "1.2.3.4", "1.2.3.4:5678" and "[::ffff:1.2.3.4]:80" are one key.
// A RemoteAddr that is not an IP address (a unix socket's name) is used as
// it is, without a port; an empty one is an error.
func RemoteAddrKey(r *http.Request) (string, error) {
	if a, ok := parseHop(r.RemoteAddr); ok {
		return a.String(), nil
	}
	if r.RemoteAddr == "" {
		return "", errors.New("empty RemoteAddr")
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return r.RemoteAddr, nil
	}
	if a, ok := parseHop(host); ok { // an address with an odd port
		return a.String(), nil
	}
	return host, nil
}

// ForwardedForKey returns a key function for servers behind reverse
// proxies: it keys by the client address that trusted proxies recorded in
// X-Forwarded-For. trustedProxies lists those proxies, each a CIDR
// ("10.0.0.0/8", "2001:db8::/32") or a single address ("10.0.0.7").
//
// The header is believed only when the direct peer (RemoteAddr) is a
// trusted proxy. It is then read from the right — the end appended by your
// own proxies — skipping trusted proxy addresses; the first untrusted
// address is the key. Entries further left were written by the client and
// are ignored, so a spoofed header cannot choose the key. An entry that is
// not an IP address stops the walk, and the key is the last address that
// could be verified (the left-most trusted hop): garbage never becomes a
// key. With every entry trusted, that is the left-most one.
//
// The key is canonical as with [RemoteAddrKey]: "1.2.3.4", "::ffff:1.2.3.4"
// and "1.2.3.4:5678" are one key. With no trusted proxy (nil) the header is
// ignored and the key is [RemoteAddrKey]'s. An entry of trustedProxies that
// does not parse is an error wrapping [ErrInvalidConfig].
func ForwardedForKey(trustedProxies []string) (KeyFunc, error) {
	trusted := make([]netip.Prefix, 0, len(trustedProxies))
	for _, s := range trustedProxies {
		p, err := parseTrustedProxy(s)
		if err != nil {
			return nil, fmt.Errorf("%w: trusted proxy %q: %w", ErrInvalidConfig, s, err)
		}
		trusted = append(trusted, p)
	}
	if len(trusted) == 0 {
		return RemoteAddrKey, nil
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		peer, ok := parseHop(r.RemoteAddr)
		if !ok || !isTrusted(peer) {
			return RemoteAddrKey(r)
		}
		return clientFromXFF(r.Header.Values("X-Forwarded-For"), peer, isTrusted).String(), nil
	}, nil
}

// clientFromXFF walks the X-Forwarded-For lines from the right. last is the
// left-most verified trusted address so far (starting with the peer).
func clientFromXFF(lines []string, last netip.Addr, isTrusted func(netip.Addr) bool) netip.Addr {
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for {
			j := strings.LastIndexByte(s, ',')
			hop := s[j+1:] // the whole rest when j == -1
			// Empty entries ("a,,b", a trailing comma) are skipped.
			if strings.TrimSpace(hop) != "" {
				a, ok := parseHop(hop)
				if !ok {
					return last
				}
				if !isTrusted(a) {
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

// parseTrustedProxy parses a CIDR or a single address into a prefix that
// matches the canonical (unmapped, zoneless) addresses parseHop returns.
func parseTrustedProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		a = a.WithZone("")
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = p.Masked()
	if p.Addr().Is4In6() {
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8, to match unmapped addresses.
		if p.Bits() < 96 {
			return netip.Prefix{}, errors.New("an IPv4-mapped prefix needs at least 96 bits")
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p, nil
}

// parseHop parses one X-Forwarded-For entry or a RemoteAddr: an IPv4 or
// IPv6 address, optionally with a port ("1.2.3.4:5", "[::1]:5"), brackets,
// a zone (dropped) and surrounding spaces or quotes. IPv4-mapped IPv6
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
		if rest := s[end+1:]; rest != "" && !validPort(rest) {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
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
		a, err := netip.ParseAddr(s[:c])
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
