package token

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckillkit/seckill/internal/keyring"
)

// Key is one HMAC-SHA256 key of a [Signer].
type Key struct {
	// ID names the key inside every URL it signs: 1..16 bytes of
	// [A-Za-z0-9._-]. IDs must be unique within a key set.
	ID string
	// Secret is the HMAC key, at least 16 bytes (32 random bytes advised).
	Secret []byte
}

// VerifyParams name what [Signer.Verify] checks: a struct, so that the
// three strings cannot be swapped silently.
type VerifyParams struct {
	Token    string // the signed URL token the client presented
	Activity string // the activity the request is for
	User     string // the authenticated user
}

// SignParams describes the URL to sign.
type SignParams struct {
	Activity string    // activity ID, 1..128 bytes without braces
	User     string    // user ID the URL is bound to, 1..128 bytes
	Start    time.Time // activity start: the URL's not-before
	// Expiry is the end of the URL's validity. Zero means Start plus the
	// validity set with [WithValidity].
	Expiry time.Time
}

// Claims are the verified content of a signed URL.
type Claims struct {
	Activity  string
	User      string
	KeyID     string    // ID of the key that signed it
	NotBefore time.Time // second precision
	Expiry    time.Time // second precision
	Nonce     [nonceLen]byte
}

// Signer signs and verifies seckill URL tokens: HMAC-SHA256 over (version,
// key ID, activity, user, not-before, expiry, nonce), encoded as one
// URL-safe base64 string that fits a path segment or a query value.
//
// Keys rotate without downtime: the first key of the set signs, every key
// verifies; see [Signer.SetKeys]. A Signer is safe for concurrent use.
type Signer struct {
	ring    atomic.Pointer[keyring.Ring]
	opts    options
	scratch sync.Pool // of *scratch: keeps Verify free of allocations
}

// scratch holds Verify's buffers; they go through hash.Hash (an interface)
// and would escape to the heap on every call if they lived on the stack.
type scratch struct {
	raw [maxRawLen]byte
	sum [macLen]byte
}

// Layout limits of the v1 token.
const (
	version1    = 1
	maxKeyIDLen = keyring.MaxIDLen
	nonceLen    = 12
	macLen      = sha256.Size
	// 1 version + 1+16 kid + 1+128 activity + 1+128 user + 8 nbf + 8 exp + nonce + mac
	maxRawLen     = 1 + 1 + maxKeyIDLen + 1 + maxIDLen + 1 + maxIDLen + 8 + 8 + nonceLen + macLen
	maxEncodedLen = (maxRawLen*8 + 5) / 6
)

// NewSigner returns a Signer holding keys; keys[0] signs. Options (each a
// [SignerOption]): [WithKeyPrefix], [WithClock], [WithObserver] (shared
// with [NewPool]), [WithLeadTime], [WithValidity], [WithSkew],
// [WithReplayGuard], [WithMaxNodeSkew]. A nil option is ignored. An option
// out of range or a bad key set (see [Signer.SetKeys]) fails with
// [ErrInvalidConfig].
func NewSigner(keys []Key, opts ...SignerOption) (*Signer, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.applySigner(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Signer{opts: o}
	s.scratch.New = func() any { return new(scratch) }
	if err := s.SetKeys(keys); err != nil {
		return nil, err
	}
	return s, nil
}

// SetKeys atomically replaces the key set; keys[0] signs from now on and
// every key verifies. To rotate: (1) add the new key after the current one
// on every server, (2) move it first, (3) once every URL signed by the old
// key has expired, drop the old key: its URLs then fail with
// [ErrUnknownKey]. A bad key set (no key, a secret shorter than 16 bytes,
// a key ID that is empty, longer than 16 bytes or repeated) fails with
// [ErrInvalidConfig] and leaves the current keys in place.
func (s *Signer) SetKeys(keys []Key) error {
	ks := make([]keyring.Key, len(keys))
	for i, k := range keys {
		ks[i] = keyring.Key{ID: k.ID, Secret: k.Secret}
	}
	r, err := keyring.New(ks)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	s.ring.Store(r)
	return nil
}

// Sign returns the URL token for p. It refuses with [ErrTooEarly] before
// p.Start minus the lead time ([WithLeadTime]), and with [ErrExpired] once
// the expiry has passed, so links cannot be harvested ahead of the sale.
func (s *Signer) Sign(p SignParams) (string, error) {
	if !validID(p.Activity) || !validID(p.User) {
		return "", fmt.Errorf("%w: sign: activity %q user %q", ErrInvalidArgument, p.Activity, p.User)
	}
	if p.Start.IsZero() {
		return "", fmt.Errorf("%w: sign: zero start time", ErrInvalidArgument)
	}
	exp := p.Expiry
	if exp.IsZero() {
		exp = p.Start.Add(s.opts.validity)
	}
	if !exp.After(p.Start) {
		return "", fmt.Errorf("%w: sign: expiry %v not after start %v", ErrInvalidArgument, exp, p.Start)
	}
	now := s.opts.clock.Now()
	if now.Before(p.Start.Add(-s.opts.lead)) {
		return "", ErrTooEarly
	}
	if !now.Before(exp) {
		return "", ErrExpired
	}
	k := s.ring.Load().Signer()
	var buf [maxRawLen]byte
	b := buf[:0]
	b = append(b, version1, byte(len(k.ID())))
	b = append(b, k.ID()...)
	b = append(b, byte(len(p.Activity)))
	b = append(b, p.Activity...)
	b = append(b, byte(len(p.User)))
	b = append(b, p.User...)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Start.Unix()))
	b = binary.BigEndian.AppendUint64(b, uint64(exp.Unix()))
	var nonce [nonceLen]byte
	_, _ = rand.Read(nonce[:])
	b = append(b, nonce[:]...)
	b = k.MAC(b, b)
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decoded is a parsed token; byte slices alias the caller's buffer.
type decoded struct {
	kid, activity, user []byte
	nbf, exp            int64
	nonce               []byte
	msg, mac            []byte
}

// parse decodes tok into raw (which must hold maxRawLen bytes) and splits
// it into fields. It checks shape only, not the signature.
func parse(tok string, raw *[maxRawLen]byte) (decoded, error) {
	var d decoded
	if len(tok) == 0 || len(tok) > maxEncodedLen {
		return d, ErrMalformed
	}
	var src [maxEncodedLen]byte
	n := copy(src[:], tok)
	m, err := base64.RawURLEncoding.Strict().Decode(raw[:], src[:n])
	if err != nil {
		return d, ErrMalformed
	}
	b := raw[:m]
	if len(b) < 2 || b[0] != version1 {
		return d, ErrMalformed
	}
	i := 1
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
	if d.kid = field(maxKeyIDLen); d.kid == nil {
		return d, ErrMalformed
	}
	if d.activity = field(maxIDLen); d.activity == nil {
		return d, ErrMalformed
	}
	if d.user = field(maxIDLen); d.user == nil {
		return d, ErrMalformed
	}
	if len(b)-i != 8+8+nonceLen+macLen {
		return d, ErrMalformed
	}
	d.nbf = int64(binary.BigEndian.Uint64(b[i:]))
	d.exp = int64(binary.BigEndian.Uint64(b[i+8:]))
	d.nonce = b[i+16 : i+16+nonceLen]
	d.msg = b[:len(b)-macLen]
	d.mac = b[len(b)-macLen:]
	if d.exp <= d.nbf {
		return d, ErrMalformed
	}
	return d, nil
}

// checked is what Verify keeps of a token once its buffers are released.
type checked struct {
	kid      string
	nbf, exp int64
	nonce    [nonceLen]byte
}

// check runs the stateless checks that need the decoded bytes: shape, key,
// signature, activity and user.
func (s *Signer) check(sc *scratch, p *VerifyParams) (checked, error) {
	d, err := parse(p.Token, &sc.raw)
	if err != nil {
		return checked{}, err
	}
	k := s.ring.Load().Key(string(d.kid))
	if k == nil {
		return checked{}, ErrUnknownKey
	}
	if !hmac.Equal(k.MAC(sc.sum[:0], d.msg), d.mac) {
		return checked{}, ErrInvalidSignature
	}
	if string(d.activity) != p.Activity {
		return checked{}, ErrWrongActivity
	}
	if string(d.user) != p.User {
		return checked{}, ErrWrongUser
	}
	c := checked{kid: k.ID(), nbf: d.nbf, exp: d.exp}
	copy(c.nonce[:], d.nonce)
	return c, nil
}

// Verify checks the URL token p.Token for p.Activity and the authenticated
// p.User, in this order: shape ([ErrMalformed]), key ID ([ErrUnknownKey]),
// HMAC with a constant-time compare ([ErrInvalidSignature]), activity
// ([ErrWrongActivity]), user ([ErrWrongUser]), not-before and expiry with
// the skew tolerance ([ErrNotYetValid], [ErrExpired]) and, last, the
// one-time nonce when [WithReplayGuard] is set ([ErrReplayed]), so a
// refused request never burns a nonce. Every refusal wraps [ErrRefused].
// Any other error is a Redis failure
// of the replay guard; the URL must then be treated as not verified. The
// guard refuses a replay on every server that shares its Redis as long as
// their clocks differ by at most [WithMaxNodeSkew].
//
// Without the replay guard Verify does no I/O and does not allocate.
func (s *Signer) Verify(ctx context.Context, p VerifyParams) (Claims, error) {
	if s.opts.observer == nil {
		return s.verify(ctx, &p)
	}
	start := time.Now()
	c, err := s.verify(ctx, &p)
	report(ctx, s.opts.observer, StageVerify, outcomeOf(err), p.Activity, start, err)
	return c, err
}

func (s *Signer) verify(ctx context.Context, p *VerifyParams) (Claims, error) {
	activity, user := p.Activity, p.User
	sc := s.scratch.Get().(*scratch)
	d, err := s.check(sc, p)
	s.scratch.Put(sc)
	if err != nil {
		return Claims{}, err
	}
	now := s.opts.clock.Now()
	nbf, exp := time.Unix(d.nbf, 0), time.Unix(d.exp, 0)
	if now.Before(nbf.Add(-s.opts.skew)) {
		return Claims{}, ErrNotYetValid
	}
	if !now.Before(exp.Add(s.opts.skew)) {
		return Claims{}, ErrExpired
	}
	c := Claims{Activity: activity, User: user, KeyID: d.kid, NotBefore: nbf, Expiry: exp, Nonce: d.nonce}
	if s.opts.nonces != nil {
		ttl := nonceTTL(now, exp, s.opts.skew, s.opts.nodeSkew)
		key := nonceKey(s.opts.prefix, activity, base64.RawURLEncoding.EncodeToString(d.nonce[:]))
		ok, err := s.opts.nonces.SetNX(ctx, key, 1, ttl).Result()
		if err != nil {
			return Claims{}, fmt.Errorf("token: replay guard: %w", err)
		}
		if !ok {
			return Claims{}, ErrReplayed
		}
	}
	return c, nil
}

// nonceTTL is how long the replay guard keeps a nonce claimed at now (the
// accepting server's clock): until the URL is expired on every server whose
// clock is at most nodeSkew behind this one, i.e. exp + skew + nodeSkew − now,
// rounded up to a whole millisecond (Redis counts PX in whole milliseconds;
// rounding down would end the record up to 1 ms early) and never below one
// second.
func nonceTTL(now, exp time.Time, skew, nodeSkew time.Duration) time.Duration {
	ttl := exp.Add(skew + nodeSkew).Sub(now)
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	return max(ttl, time.Second)
}
