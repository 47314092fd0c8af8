package captcha

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"github.com/seckillkit/seckill/internal/keyring"
)

// Limits of a payload [PoW.Verify] reads: the decoded JSON is at most 4 KiB,
// the base64 at most 5460 bytes; longer is refused unread. A solution of a
// challenge from [PoW.Generate] is under 1.2 KiB (its salt at most 842
// bytes), which leaves room for escapes such as Go's \u0026 for '&'.
const (
	powMaxJSON    = 4096
	powMaxEncoded = powMaxJSON / 3 * 4
)

// powScratch holds the buffers of one check; it lives in a sync.Pool so the
// check allocates nothing (the buffers go through hash.Hash and
// base64.Decode and would escape to the heap on every call otherwise).
type powScratch struct {
	enc [powMaxEncoded]byte
	raw [powMaxJSON]byte
	str [powMaxSaltLen]byte      // the salt, when it had JSON escapes
	in  [powMaxSaltLen + 20]byte // salt + decimal number
	sum [sha256.Size]byte
	hex [2 * sha256.Size]byte
	mac [sha256.Size]byte
}

// powPayload is a decoded solution; salt aliases the scratch buffers.
type powPayload struct {
	salt                 []byte
	number               uint64
	challenge, signature [sha256.Size]byte
}

// decodePayload decodes base64(JSON{algorithm, challenge, number, salt,
// signature, …}): standard base64 as btoa writes it (padding optional), one
// flat JSON object whose five fields appear once each, algorithm
// "SHA-256", challenge and signature 64 hex digits, number a non-negative
// integer; other members (took, test) must be scalars and are ignored.
func decodePayload(sc *powScratch, s string) (powPayload, error) {
	var pl powPayload
	if len(s) == 0 || len(s) > powMaxEncoded {
		return pl, errPoWMalformed
	}
	n := copy(sc.enc[:], s)
	enc := base64.StdEncoding
	if n%4 != 0 {
		enc = base64.RawStdEncoding
	}
	m, err := enc.Decode(sc.raw[:], sc.enc[:n])
	if err != nil {
		return pl, errPoWMalformed
	}
	j := jscan{b: sc.raw[:m]}
	if !j.byte('{') {
		return pl, errPoWMalformed
	}
	const (
		seenAlgorithm = 1 << iota
		seenChallenge
		seenNumber
		seenSalt
		seenSignature
		seenAll = 1<<iota - 1
	)
	seen := 0
	var kbuf, vbuf [16]byte
	for first := true; ; first = false {
		if first && j.byte('}') {
			break
		}
		key, ok := j.str(kbuf[:0])
		if !ok || !j.byte(':') {
			return pl, errPoWMalformed
		}
		bit := 0
		switch string(key) {
		case "algorithm":
			bit = seenAlgorithm
			v, ok := j.str(vbuf[:0])
			if !ok || string(v) != powAlgorithm {
				return pl, errPoWMalformed
			}
		case "challenge", "signature":
			dst := &pl.challenge
			bit = seenChallenge
			if key[0] == 's' {
				dst, bit = &pl.signature, seenSignature
			}
			v, ok := j.str(sc.hex[:0])
			if !ok || len(v) != 2*sha256.Size {
				return pl, errPoWMalformed
			}
			if _, err := hex.Decode(dst[:], v); err != nil {
				return pl, errPoWMalformed
			}
		case "number":
			bit = seenNumber
			if pl.number, ok = j.num(); !ok {
				return pl, errPoWMalformed
			}
		case "salt":
			bit = seenSalt
			if pl.salt, ok = j.str(sc.str[:0]); !ok {
				return pl, errPoWMalformed
			}
		default:
			if !j.skip() {
				return pl, errPoWMalformed
			}
		}
		if seen&bit != 0 {
			return pl, errPoWMalformed // a duplicate member is ambiguous
		}
		seen |= bit
		if j.byte(',') {
			continue
		}
		if j.byte('}') {
			break
		}
		return pl, errPoWMalformed
	}
	j.ws()
	if j.i != len(j.b) || seen != seenAll {
		return pl, errPoWMalformed
	}
	return pl, nil
}

// jscan reads the flat JSON object of a payload without allocating.
type jscan struct {
	b []byte
	i int
}

func (j *jscan) ws() {
	for j.i < len(j.b) {
		switch j.b[j.i] {
		case ' ', '\t', '\n', '\r':
			j.i++
		default:
			return
		}
	}
}

// byte consumes c after white space.
func (j *jscan) byte(c byte) bool {
	j.ws()
	if j.i < len(j.b) && j.b[j.i] == c {
		j.i++
		return true
	}
	return false
}

// str reads a string. Without escapes it returns a slice of the input;
// with escapes it writes the unescaped bytes to dst, failing rather than
// growing it. Only \uXXXX below 0x80 is accepted (no field of a payload
// holds anything else); raw control bytes are refused.
func (j *jscan) str(dst []byte) ([]byte, bool) {
	if !j.byte('"') {
		return nil, false
	}
	start, escaped := j.i, false
	for j.i < len(j.b) {
		c := j.b[j.i]
		switch {
		case c == '"':
			j.i++
			if !escaped {
				return j.b[start : j.i-1], true
			}
			return dst, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if !escaped {
				escaped = true
				if len(j.b[start:j.i]) > cap(dst) {
					return nil, false
				}
				dst = append(dst, j.b[start:j.i]...)
			}
			if j.i+1 >= len(j.b) {
				return nil, false
			}
			e := j.b[j.i+1]
			j.i += 2
			switch e {
			case '"', '\\', '/':
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			case 'u':
				if j.i+4 > len(j.b) {
					return nil, false
				}
				var u [2]byte
				if _, err := hex.Decode(u[:], j.b[j.i:j.i+4]); err != nil || u[0] != 0 || u[1] >= 0x80 {
					return nil, false
				}
				e = u[1]
				j.i += 4
			default:
				return nil, false
			}
			if len(dst) == cap(dst) {
				return nil, false
			}
			dst = append(dst, e)
		default:
			j.i++
			if escaped {
				if len(dst) == cap(dst) {
					return nil, false
				}
				dst = append(dst, c)
			}
		}
	}
	return nil, false
}

// num reads a non-negative JSON integer without leading zeros, at most 15
// digits (a number JavaScript holds exactly).
func (j *jscan) num() (uint64, bool) {
	j.ws()
	start := j.i
	var v uint64
	for j.i < len(j.b) && j.b[j.i] >= '0' && j.b[j.i] <= '9' {
		v = v*10 + uint64(j.b[j.i]-'0')
		j.i++
	}
	n := j.i - start
	if n == 0 || n > 15 || n > 1 && j.b[start] == '0' {
		return 0, false
	}
	if j.i < len(j.b) { // 12.0, 1e3: not an integer as the widget sends it
		if c := j.b[j.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	return v, true
}

// skip passes over a scalar value: a string, a number, true, false or null.
func (j *jscan) skip() bool {
	j.ws()
	if j.i >= len(j.b) {
		return false
	}
	switch c := j.b[j.i]; {
	case c == '"':
		for j.i++; j.i < len(j.b); j.i++ {
			switch d := j.b[j.i]; {
			case d == '"':
				j.i++
				return true
			case d == '\\':
				j.i++ // the escaped byte
			case d < 0x20:
				return false
			}
		}
		return false
	case c == '-' || c >= '0' && c <= '9':
		start := j.i
		for j.i < len(j.b) {
			switch c := j.b[j.i]; {
			case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
				j.i++
				continue
			}
			break
		}
		return j.i-start <= 32
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(j.b)-j.i >= len(lit) && string(j.b[j.i:j.i+len(lit)]) == lit {
			j.i += len(lit)
			return true
		}
	}
	return false
}

// powSalt is a parsed salt; slices alias it.
type powSalt struct {
	id, kid, user []byte // user is nil for an unbound challenge, else query-escaped
	expires       int64
}

// parseSalt reads the salt [PoW.Generate] writes and nothing else:
// "<22-byte ID>?expires=<unix>&k=<key ID>&" or
// "<ID>?expires=<unix>&k=<key ID>&u=<query-escaped user>&". The trailing
// '&' is ALTCHA's guard against splicing digits of the number into the
// salt: a salt that does not end in it is refused.
func parseSalt(b []byte) (powSalt, bool) {
	var s powSalt
	if len(b) < idLen+1 || len(b) > powMaxSaltLen || b[idLen] != '?' || !ValidID(string(b[:idLen])) {
		return s, false
	}
	s.id, b = b[:idLen], b[idLen+1:]
	v, b, ok := saltParam(b, "expires=")
	if !ok || len(v) > 18 || len(v) > 1 && v[0] == '0' {
		return s, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return s, false
		}
		s.expires = s.expires*10 + int64(c-'0')
	}
	if s.kid, b, ok = saltParam(b, "k="); !ok || len(s.kid) > powMaxKeyIDLen {
		return s, false
	}
	for _, c := range s.kid {
		if !keyring.IDByte(c) {
			return s, false
		}
	}
	if len(b) == 0 {
		return s, true
	}
	if s.user, b, ok = saltParam(b, "u="); !ok || len(b) != 0 || !validQueryEscaped(s.user) {
		return s, false
	}
	return s, true
}

// saltParam reads name, a non-empty value and '&' from the start of b.
func saltParam(b []byte, name string) (v, rest []byte, ok bool) {
	if len(b) < len(name) || string(b[:len(name)]) != name {
		return nil, nil, false
	}
	b = b[len(name):]
	for i, c := range b {
		if c == '&' {
			return b[:i], b[i+1:], i > 0
		}
	}
	return nil, nil, false
}

const upperHex = "0123456789ABCDEF"

// queryUnreserved are the bytes url.QueryEscape leaves as they are.
func queryUnreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~'
}

// appendQueryEscape appends url.QueryEscape(s) to dst.
func appendQueryEscape(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case queryUnreserved(c):
			dst = append(dst, c)
		case c == ' ':
			dst = append(dst, '+')
		default:
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return dst
}

// queryEscapedEqual reports whether esc == url.QueryEscape(s) without
// building the escaped string.
func queryEscapedEqual(esc []byte, s string) bool {
	j := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case queryUnreserved(c):
			if j >= len(esc) || esc[j] != c {
				return false
			}
			j++
		case c == ' ':
			if j >= len(esc) || esc[j] != '+' {
				return false
			}
			j++
		default:
			if j+3 > len(esc) || esc[j] != '%' || esc[j+1] != upperHex[c>>4] || esc[j+2] != upperHex[c&15] {
				return false
			}
			j += 3
		}
	}
	return j == len(esc)
}

// validQueryEscaped reports whether b could be written by appendQueryEscape.
func validQueryEscaped(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case queryUnreserved(c), c == '+':
		case c == '%' && i+2 < len(b) && isUpperHex(b[i+1]) && isUpperHex(b[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

func isUpperHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }
