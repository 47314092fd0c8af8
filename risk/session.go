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
// with [WithSlidingTTL]).
//
// A SessionStore is safe for concurrent use.
type SessionStore struct {
	rdb Client
	o   options
}

// NewSessionStore returns a SessionStore. Options (each a
// [SessionOption]): [WithKeyPrefix], [WithSessionTTL], [WithSlidingTTL]; a
// nil option is ignored. A nil client or an invalid option fails with
// [ErrInvalidArgument].
func NewSessionStore(rdb Client, opts ...SessionOption) (*SessionStore, error) {
	if rdb == nil {
		return nil, fmt.Errorf("risk: nil redis client: %w", ErrInvalidArgument)
	}
	o, err := buildOptions(opts, SessionOption.applySession)
	if err != nil {
		return nil, err
	}
	return &SessionStore{rdb: rdb, o: o}, nil
}

// Create starts a session of userID for ttl (0 = the store's session TTL,
// see [WithSessionTTL]) and returns its bearer token. A user ID that is not
// [ValidUserID] fails with [ErrInvalidID] and stores nothing.
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

// Revoke ends the session of token (logout). Revoking an unknown token is
// a no-op. Instances that cache sessions ([AuthCache]) may accept the token
// until their cache entry expires.
func (s *SessionStore) Revoke(ctx context.Context, token string) error {
	if !validToken(token) {
		return nil
	}
	if err := s.rdb.Del(ctx, sessionKey(s.o.prefix, hashToken(token))).Err(); err != nil {
		return fmt.Errorf("risk: session revoke: %w", err)
	}
	return nil
}

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
