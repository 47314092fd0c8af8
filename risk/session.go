package risk

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// SessionStore keeps login sessions in Redis: an opaque random token (256
// bits, base64url) maps to a user ID with a TTL. Only the SHA-256 of the
// token is used in the key, so a copy of the Redis data does not hand out
// valid tokens. It is an [Authenticator]: one GET per request (one GETEX
// with [SessionConfig.Sliding]). [SessionStore.Revoke] announces each
// revocation on a pub/sub channel, which an [AuthCache] hears through
// [AuthCacheConfig.Revocations].
//
// A SessionStore is safe for concurrent use.
type SessionStore struct {
	rdb Client
	o   options
}

// SessionConfig holds the settings of [NewSessionStore]; the zero value
// is the default.
type SessionConfig struct {
	// KeyPrefix prefixes every Redis key and the revocation channel
	// ("<prefix>risk:session:revoked"). Default "seckill:".
	KeyPrefix string
	// TTL is the lifetime of a session that [SessionStore.Create] starts
	// with ttl 0, and how far [SessionConfig.Sliding] pushes the expiry.
	// Default 24h.
	TTL time.Duration
	// Sliding makes every successful [SessionStore.Authenticate] push the
	// session's expiry to now + TTL (one GETEX instead of GET; Redis ≥
	// 6.2). Default off: a session dies at its creation time + TTL.
	Sliding bool
}

// NewSessionStore returns a SessionStore with the settings of cfg. A nil
// client or a TTL below 0 (or between 0 and 1ms) fails with
// [ErrInvalidConfig].
func NewSessionStore(rdb Client, cfg SessionConfig) (*SessionStore, error) {
	if rdb == nil {
		return nil, fmt.Errorf("risk: nil redis client: %w", ErrInvalidConfig)
	}
	o := defaultOptions()
	o.setCommon(cfg.KeyPrefix, nil, nil)
	if cfg.TTL < 0 || (cfg.TTL > 0 && cfg.TTL < time.Millisecond) {
		o.fail("session TTL must be >= 1ms")
	}
	o.sessionTTL = orDefault(cfg.TTL, o.sessionTTL)
	o.sliding = cfg.Sliding
	if o.err != nil {
		return nil, o.err
	}
	return &SessionStore{rdb: rdb, o: o}, nil
}

// Create starts a session of userID for ttl (0 = the store's
// [SessionConfig.TTL]) and returns its bearer token. A user ID that is not
// [ValidUserID] fails with [ErrInvalidArgument] and stores nothing.
func (s *SessionStore) Create(ctx context.Context, userID string, ttl time.Duration) (string, error) {
	if err := checkUserID(userID); err != nil {
		return "", err
	}
	if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) {
		return "", fmt.Errorf("risk: session ttl %v: %w", ttl, ErrInvalidArgument)
	}
	if ttl == 0 {
		ttl = s.o.sessionTTL
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("risk: session token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	ok, err := s.rdb.SetNX(ctx, sessionKey(s.o.prefix, hashToken(tok)), userID, ttl).Result()
	if err != nil {
		return "", fmt.Errorf("risk: session create: %w", err)
	}
	if !ok { // 2^-256: a broken random source, not bad luck
		return "", fmt.Errorf("risk: session create: token collision")
	}
	return tok, nil
}

// Authenticate returns the user of a live session, or an error wrapping
// [ErrInvalidToken] when the token is unknown, expired or revoked.
func (s *SessionStore) Authenticate(ctx context.Context, token string) (string, error) {
	if !validToken(token) {
		return "", fmt.Errorf("risk: session: %w", ErrInvalidToken)
	}
	key := sessionKey(s.o.prefix, hashToken(token))
	var cmd *redis.StringCmd
	if s.o.sliding {
		cmd = s.rdb.GetEx(ctx, key, s.o.sessionTTL)
	} else {
		cmd = s.rdb.Get(ctx, key)
	}
	user, err := cmd.Result()
	if errors.Is(err, redis.Nil) || (err == nil && user == "") {
		return "", fmt.Errorf("risk: session: %w", ErrInvalidToken)
	}
	if err != nil {
		return "", fmt.Errorf("risk: session lookup: %w", err)
	}
	return user, nil
}

// Revoke ends the session of token (logout). In the same atomic step (one
// script) it publishes the token's hash (never the token) on the store's
// revocation channel, "<prefix>risk:session:revoked", so that every
// [AuthCache] built with [AuthCacheConfig.Revocations] and running [AuthCache.Run]
// forgets the token at once, on every instance. Revoking an unknown or
// expired token deletes nothing (its hash is still published: a cache may
// hold a session that expired in Redis); a string that is not a well-formed
// token is a no-op.
func (s *SessionStore) Revoke(ctx context.Context, token string) error {
	if !validToken(token) {
		return nil
	}
	h := hashToken(token)
	err := revokeScript.Run(ctx, s.rdb, []string{sessionKey(s.o.prefix, h)}, revokedChannel(s.o.prefix), h).Err()
	if err != nil {
		return fmt.Errorf("risk: session revoke: %w", err)
	}
	return nil
}

// revokedChannel is the pub/sub channel of the session revocations of the
// stores with this key prefix (revoke.lua publishes, [AuthCache.Run]
// listens). Not a key: it is the same on every Cluster node.
func revokedChannel(prefix string) string { return prefix + "risk:session:revoked" }

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// tokenHashLen is the length of a [hashToken] result.
const tokenHashLen = 43

// validTokenHash reports whether h has the form of a [hashToken] result:
// the canonical unpadded base64url encoding of 32 bytes.
func validTokenHash(h string) bool {
	if len(h) != tokenHashLen {
		return false
	}
	var sum [sha256.Size]byte
	n, err := base64.RawURLEncoding.Strict().Decode(sum[:], []byte(h))
	return err == nil && n == sha256.Size
}
