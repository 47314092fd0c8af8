package waitroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/seckillkit/seckill/internal/keyring"
)

// Key is one HMAC-SHA256 key of a [Room], for its tickets and passes.
type Key struct {
	// ID names the key inside every credential it signs: 1..16 bytes of
	// [A-Za-z0-9._-]. IDs must be unique within a key set.
	ID string
	// Secret is the HMAC key, at least 16 bytes (32 random bytes advised).
	Secret []byte
}

// credRing signs and verifies a room's credentials with its key set
// (internal/keyring: the first key signs, every key verifies).
type credRing struct{ *keyring.Ring }

// Credential kinds: the first byte after the version, so a ticket never
// passes as a pass.
const (
	kindTicket = 't'
	kindPass   = 'p'
)

// Layout of a v1 credential: version, kind, key ID, sale, user (each with
// a length byte), expiry (unix ms, 8 bytes big-endian), HMAC-SHA256 over
// everything before it.
const (
	version1    = 1
	maxKeyIDLen = keyring.MaxIDLen
	macLen      = sha256.Size
	maxRawLen   = 1 + 1 + 1 + maxKeyIDLen + 1 + maxIDLen + 1 + maxIDLen + 8 + macLen
	maxEncLen   = (maxRawLen*8 + 5) / 6
)

func newKeyring(keys []Key) (*credRing, error) {
	ks := make([]keyring.Key, len(keys))
	for i, k := range keys {
		ks[i] = keyring.Key{ID: k.ID, Secret: k.Secret}
	}
	r, err := keyring.New(ks)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return &credRing{r}, nil
}

// sign returns the credential of kind for (sale, user), valid until exp.
// sale and user are valid IDs (checked by the caller).
func (r *credRing) sign(kind byte, sale, user string, exp time.Time) string {
	k := r.Signer()
	b := make([]byte, 0, maxRawLen)
	b = append(b, version1, kind, byte(len(k.ID())))
	b = append(b, k.ID()...)
	b = append(b, byte(len(sale)))
	b = append(b, sale...)
	b = append(b, byte(len(user)))
	b = append(b, user...)
	b = binary.BigEndian.AppendUint64(b, uint64(exp.UnixMilli()))
	b = k.MAC(b, b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// credential is a decoded credential; byte slices alias the decode buffer.
type credential struct {
	kind            byte
	kid, sale, user []byte
	exp             int64
	msg, mac        []byte
}

// decode splits tok into fields; it checks shape only, not the signature.
func decode(tok string) (credential, error) {
	var c credential
	if len(tok) == 0 || len(tok) > maxEncLen {
		return c, ErrMalformed
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil || len(b) < 3 || b[0] != version1 {
		return c, ErrMalformed
	}
	c.kind = b[1]
	i := 2
	field := func(max int) []byte {
		if i >= len(b) {
			return nil
		}
		l := int(b[i])
		if l == 0 || l > max || i+1+l > len(b) {
			return nil
		}
		f := b[i+1 : i+1+l]
		i += 1 + l
		return f
	}
	if c.kid = field(maxKeyIDLen); c.kid == nil {
		return c, ErrMalformed
	}
	if c.sale = field(maxIDLen); c.sale == nil {
		return c, ErrMalformed
	}
	if c.user = field(maxIDLen); c.user == nil {
		return c, ErrMalformed
	}
	if len(b)-i != 8+macLen {
		return c, ErrMalformed
	}
	c.exp = int64(binary.BigEndian.Uint64(b[i:]))
	c.msg = b[:len(b)-macLen]
	c.mac = b[len(b)-macLen:]
	return c, nil
}

// verify checks tok as a credential of kind for (sale, user) at now, in
// this order: shape and kind, key and HMAC (constant-time), sale and user,
// expiry. It returns the expiry.
func (r *credRing) verify(kind byte, tok, sale, user string, now time.Time) (time.Time, error) {
	c, err := decode(tok)
	if err != nil {
		return time.Time{}, err
	}
	if c.kind != kind {
		return time.Time{}, ErrMalformed
	}
	k := r.Key(string(c.kid))
	if k == nil || !hmac.Equal(k.MAC(nil, c.msg), c.mac) {
		return time.Time{}, ErrInvalidSignature
	}
	if string(c.sale) != sale || string(c.user) != user {
		return time.Time{}, ErrWrongUser
	}
	exp := time.UnixMilli(c.exp)
	if !now.Before(exp) {
		return time.Time{}, ErrExpired
	}
	return exp, nil
}
