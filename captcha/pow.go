package captcha

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/keyring"
	"github.com/seckillkit/seckill/internal/observe"
)

// PoWKey is one HMAC-SHA256 key of a [PoW]: the same shape as token.Key.
type PoWKey struct {
	// ID names the key inside every challenge it signs (the salt's k=
	// parameter): 1..16 bytes of [A-Za-z0-9._-], unique within a key set.
	ID string
	// Secret is the HMAC key, at least 16 bytes (32 random bytes advised).
	Secret []byte
}

// PoWConfig holds the plain settings of [NewPoW]; its zero value is the
// default of every field.
type PoWConfig struct {
	// KeyPrefix prefixes the one-time record of every solved challenge.
	// Default "seckill:".
	KeyPrefix string
	// MaxNumber is the cost: the secret number is drawn uniformly from
	// 0..MaxNumber, so a solver computes MaxNumber/2 SHA-256 hashes on
	// average and MaxNumber+1 at most. 1..1e9; default 100000 (ALTCHA's
	// own default is 1e6). [GenerateParams.MaxNumber] overrides it per
	// challenge.
	MaxNumber int64
	// TTL is how long a challenge can be solved and redeemed, rounded up
	// to whole seconds (the signed expiry is a Unix second). Default 2
	// minutes; at least 1 second.
	TTL time.Duration
	// MaxNodeSkew is how far the clocks of the servers that share the
	// one-time records may differ: a record lives until the challenge has
	// expired on every such server. Default 1 second; not negative.
	MaxNodeSkew time.Duration
	// Clock tells the time of the signed expiry and of the expiry check.
	// Nil is the system clock.
	Clock Clock
	// Observer, when set, receives every [PoW.Verify] as [StageVerify]
	// with Name "pow", synchronously, with the caller's ctx. Default none.
	Observer observe.Observer
}

// PoW issues and verifies proof-of-work challenges in ALTCHA's open v1
// format, so ALTCHA's browser widget solves them and posts the payload
// [PoW.Verify] checks. Each challenge is HMAC-signed, expires and passes
// once; see the package documentation, "Proof of work".
//
// Keys rotate without downtime like token.Signer's: the first key of the
// set signs, every key verifies; see [PoW.SetKeys]. A PoW is safe for
// concurrent use.
type PoW struct {
	rdb     redis.Scripter
	ring    atomic.Pointer[keyring.Ring]
	cfg     PoWConfig
	scratch sync.Pool // of *powScratch: keeps the check free of allocations
}

// Layout limits of a PoW challenge.
const (
	powAlgorithm     = "SHA-256"
	powMaxKeyIDLen   = keyring.MaxIDLen
	powMaxNumber     = 1_000_000_000
	powDefaultNumber = 100_000
	powMaxUserLen    = 256
	// id ? expires=<≤20> & k=<≤16> & u=<≤3×256> &
	powMaxSaltLen = idLen + 1 + 8 + 20 + 1 + 2 + powMaxKeyIDLen + 1 + 2 + 3*powMaxUserLen + 1
)

// NewPoW returns a PoW that signs with keys[0] and keeps its one-time
// records in rdb (a borrowed *redis.Client, *redis.ClusterClient,
// *redis.Ring or any UniversalClient). A nil client, a bad key set (see
// [PoW.SetKeys]) or a field of cfg out of range fails with
// [ErrInvalidConfig].
func NewPoW(rdb redis.Scripter, keys []PoWKey, cfg PoWConfig) (*PoW, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = defaultKeyPrefix
	}
	if cfg.MaxNumber == 0 {
		cfg.MaxNumber = powDefaultNumber
	}
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Minute
	}
	if cfg.MaxNodeSkew == 0 {
		cfg.MaxNodeSkew = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	switch {
	case cfg.MaxNumber < 1 || cfg.MaxNumber > powMaxNumber:
		return nil, fmt.Errorf("%w: pow max number %d not in 1..%d", ErrInvalidConfig, cfg.MaxNumber, powMaxNumber)
	case cfg.TTL < time.Second:
		return nil, fmt.Errorf("%w: pow TTL %v < 1s", ErrInvalidConfig, cfg.TTL)
	case cfg.MaxNodeSkew < 0:
		return nil, fmt.Errorf("%w: pow max node skew %v < 0", ErrInvalidConfig, cfg.MaxNodeSkew)
	}
	p := &PoW{rdb: rdb, cfg: cfg}
	p.scratch.New = func() any { return new(powScratch) }
	if err := p.SetKeys(keys); err != nil {
		return nil, err
	}
	return p, nil
}

// SetKeys atomically replaces the key set; keys[0] signs from now on and
// every key verifies. To rotate: (1) add the new key after the current one
// on every server, (2) move it first, (3) once every challenge signed by
// the old key has expired (the TTL), drop it: its challenges are then
// refused with [ErrNotFound]. A bad key set (no key, a secret shorter than
// 16 bytes, a key ID that is empty, longer than 16 bytes, outside
// [A-Za-z0-9._-] or repeated) fails with [ErrInvalidConfig] and leaves the
// current keys in place.
func (p *PoW) SetKeys(keys []PoWKey) error {
	ks := make([]keyring.Key, len(keys))
	for i, k := range keys {
		ks[i] = keyring.Key{ID: k.ID, Secret: k.Secret}
	}
	r, err := keyring.New(ks)
	if err != nil {
		return fmt.Errorf("%w: pow %v", ErrInvalidConfig, err)
	}
	p.ring.Store(r)
	return nil
}

// Generate returns a new challenge as the JSON object ALTCHA's widget
// fetches from its challenge URL:
//
//	{"algorithm":"SHA-256","challenge":hex(SHA-256(salt+number)),
//	 "maxnumber":N,"salt":"<id>?expires=<unix>&k=<key ID>[&u=<user>]&",
//	 "signature":hex(HMAC-SHA256(key, challenge))}
//
// p.User binds it to a user ([PoW.Verify] from anyone else fails with
// [ErrWrongUser]); p.MaxNumber sets its cost (0: [PoWConfig.MaxNumber]).
// A user longer than 256 bytes or a cost outside 0..1e9 fails with
// [ErrInvalidArgument]. Nothing is stored: the challenge carries its own
// state, signed.
func (p *PoW) Generate(g GenerateParams) ([]byte, error) {
	if len(g.User) > powMaxUserLen {
		return nil, fmt.Errorf("%w: user ID longer than %d bytes", ErrInvalidArgument, powMaxUserLen)
	}
	maxN := g.MaxNumber
	if maxN == 0 {
		maxN = p.cfg.MaxNumber
	}
	if maxN < 1 || maxN > powMaxNumber {
		return nil, fmt.Errorf("%w: pow max number %d not in 1..%d", ErrInvalidArgument, maxN, powMaxNumber)
	}
	k := p.ring.Load().Signer()
	exp := p.cfg.Clock.Now().Add(p.cfg.TTL + time.Second - 1).Unix() // TTL rounded up to a second
	salt := make([]byte, 0, powMaxSaltLen)
	salt = append(salt, newID()...)
	salt = append(salt, "?expires="...)
	salt = strconv.AppendInt(salt, exp, 10)
	salt = append(salt, "&k="...)
	salt = append(salt, k.ID()...)
	if g.User != "" {
		salt = append(salt, "&u="...)
		salt = appendQueryEscape(salt, g.User)
	}
	salt = append(salt, '&') // ALTCHA's delimiter against parameter splicing
	number := randInt64(maxN + 1)
	in := strconv.AppendInt(append([]byte(nil), salt...), number, 10)
	sum := sha256.Sum256(in)
	challenge := hex.AppendEncode(nil, sum[:])

	out := make([]byte, 0, 160+len(salt))
	out = append(out, `{"algorithm":"SHA-256","challenge":"`...)
	out = append(out, challenge...)
	out = append(out, `","maxnumber":`...)
	out = strconv.AppendInt(out, maxN, 10)
	out = append(out, `,"salt":"`...)
	out = append(out, salt...) // no byte of it needs a JSON escape
	out = append(out, `","signature":"`...)
	var mac [sha256.Size]byte
	out = hex.AppendEncode(out, k.MAC(mac[:0], challenge))
	out = append(out, `"}`...)
	return out, nil
}

// Verify checks the payload ALTCHA's widget posts, base64(JSON{algorithm,
// challenge, number, salt, signature[, took]}), given as p.Answer, on
// behalf of p.User ("" for an anonymous caller). p.ID is optional: when
// set, it must be the challenge's ID (its salt up to '?'). Verify returns
// nil exactly once per challenge: the first success records the challenge
// in Redis (SET NX, until it has expired on every server) and every later
// one is refused.
//
// Refusals wrap [ErrRefused] and say why; the checks run in this order,
// the one Redis round trip last, so a refused payload never burns a
// challenge: a malformed payload ([ErrWrongAnswer]), another ID than p.ID
// or a key no longer held ([ErrNotFound]), a number that does not solve
// the challenge or a signature that does not verify ([ErrWrongAnswer]),
// an expired challenge ([ErrNotFound]), a challenge bound to another user
// ([ErrWrongUser]), a challenge already redeemed ([ErrNotFound]). A user
// longer than 256 bytes is an [ErrInvalidArgument]; any other error is a
// Redis failure or a cancelled context and must be treated as "not
// verified".
//
// The checks before Redis cost two SHA-256 computations and one HMAC,
// whatever the cost of the challenge, and allocate nothing.
func (p *PoW) Verify(ctx context.Context, v VerifyParams) error {
	if p.cfg.Observer == nil {
		return p.verify(ctx, &v)
	}
	start := time.Now()
	err := p.verify(ctx, &v)
	e := observe.Event{Stage: StageVerify, Name: "pow", Outcome: outcomeOf(err), Duration: time.Since(start)}
	if e.Outcome == observe.Error {
		e.Err = err
	}
	p.cfg.Observer.Observe(ctx, e)
	return err
}

func (p *PoW) verify(ctx context.Context, v *VerifyParams) error {
	if len(v.User) > powMaxUserLen {
		return fmt.Errorf("%w: user ID longer than %d bytes", ErrInvalidArgument, powMaxUserLen)
	}
	sc := p.scratch.Get().(*powScratch)
	exp, err := p.check(sc, v)
	var key string
	if err == nil {
		key = powKeyOf(p.cfg.KeyPrefix, sc.sum[:])
	}
	p.scratch.Put(sc)
	if err != nil {
		return err
	}
	ttl := powClaimTTL(p.cfg.Clock.Now(), exp, p.cfg.MaxNodeSkew)
	r, err := claimScript.Run(ctx, p.rdb, []string{key}, ttl.Milliseconds()).Result()
	if err != nil {
		return fmt.Errorf("captcha: pow verify: %w", err)
	}
	switch r {
	case int64(1):
		return nil
	case int64(0):
		return errPoWRedeemed
	}
	return fmt.Errorf("captcha: pow verify: %w: %v", ErrBadReply, r)
}

// check runs every stateless check of a payload; on success sc.sum holds
// the challenge's SHA-256 and exp its expiry (Unix seconds). It does not
// allocate.
func (p *PoW) check(sc *powScratch, v *VerifyParams) (int64, error) {
	pl, err := decodePayload(sc, v.Answer)
	if err != nil {
		return 0, err
	}
	s, ok := parseSalt(pl.salt)
	if !ok {
		return 0, errPoWMalformed
	}
	if v.ID != "" && v.ID != string(s.id) {
		return 0, errPoWOtherID
	}
	k := p.ring.Load().Key(string(s.kid))
	if k == nil {
		return 0, errPoWUnknownKey
	}
	// The number must solve the challenge: SHA-256(salt + number).
	in := append(sc.in[:0], pl.salt...)
	in = strconv.AppendUint(in, pl.number, 10)
	sc.sum = sha256.Sum256(in)
	if !hmac.Equal(sc.sum[:], pl.challenge[:]) {
		return 0, errPoWUnsolved
	}
	// The challenge must be ours: HMAC(key, hex(challenge)).
	hexSum := hex.AppendEncode(sc.hex[:0], sc.sum[:])
	if !hmac.Equal(k.MAC(sc.mac[:0], hexSum), pl.signature[:]) {
		return 0, errPoWForged
	}
	if p.cfg.Clock.Now().Unix() > s.expires { // ALTCHA: expired once now > expires
		return 0, errPoWExpired
	}
	if s.user != nil && !queryEscapedEqual(s.user, v.User) {
		return 0, ErrWrongUser
	}
	return s.expires, nil
}

// powClaimTTL is how long the one-time record of a challenge redeemed at
// now (this server's clock) lives: until the challenge is expired on every
// server whose clock is at most nodeSkew behind this one, i.e. (exp+1)s +
// nodeSkew − now (Verify accepts up to the end of second exp), rounded up
// to a whole millisecond and never below one second.
func powClaimTTL(now time.Time, exp int64, nodeSkew time.Duration) time.Duration {
	ttl := time.Unix(exp+1, 0).Add(nodeSkew).Sub(now)
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	return max(ttl, time.Second)
}

// randInt64 returns a uniform number in 0..n-1 (n ≥ 1) from crypto/rand.
func randInt64(n int64) int64 {
	limit := ^uint64(0) - ^uint64(0)%uint64(n) // reject the biased tail
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails on supported platforms
		if v := binary.BigEndian.Uint64(b[:]); v < limit {
			return int64(v % uint64(n))
		}
	}
}
