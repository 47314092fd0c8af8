package admin

import (
	"fmt"
	"net/netip"
	"strings"
)

// MaxIDLen is the longest activity, user, reservation or device ID (and ban
// reason) the handler accepts.
const MaxIDLen = 64

// ValidID reports whether s is 1..MaxIDLen bytes of [A-Za-z0-9._@+-], the
// alphabet of every ID the API takes.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '@' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// validActivity reports whether s is an activity's ID ([ValidID]) or a
// size's of a sale in sizes, "<activity>/<variant>" (both ValidID, at most
// MaxIDLen bytes together): what the variant routes hand the Backend.
func validActivity(s string) bool {
	if a, v, ok := strings.Cut(s, "/"); ok {
		return len(s) <= MaxIDLen && ValidID(a) && ValidID(v)
	}
	return ValidID(s)
}

func checkID(what, s string) error {
	if !ValidID(s) {
		return fmt.Errorf("%w: %s must be 1..%d bytes of [A-Za-z0-9._@+-]", ErrInvalidArgument, what, MaxIDLen)
	}
	return nil
}

// banSubject validates a ban's kind and ID and returns the ID as stored: an
// IP in its canonical form (an IPv4-mapped IPv6 address as IPv4).
func banSubject(kind BanKind, id string) (string, error) {
	switch kind {
	case BanUser, BanDevice:
		return id, checkID("id", id)
	case BanIP:
		const shape = "%w: id must be an IP address or a network (CIDR: 203.0.113.0/24, 2001:db8::/64)"
		if len(id) > 64 {
			return "", fmt.Errorf(shape, ErrInvalidArgument)
		}
		if strings.Contains(id, "/") {
			p, err := netip.ParsePrefix(id)
			if err != nil || p.Addr().Zone() != "" {
				return "", fmt.Errorf(shape, ErrInvalidArgument)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			p = p.Masked()
			if p.IsSingleIP() {
				return p.Addr().String(), nil
			}
			return p.String(), nil
		}
		a, err := netip.ParseAddr(id)
		if err != nil || a.Zone() != "" {
			return "", fmt.Errorf(shape, ErrInvalidArgument)
		}
		return a.Unmap().String(), nil
	}
	return "", fmt.Errorf("%w: kind must be user, ip or device", ErrInvalidArgument)
}
