package captcha

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/seckillkit/seckill/internal/fused"

	"github.com/redis/go-redis/v9"
)

// Challenge is what the client receives: never the answer.
type Challenge struct {
	ID        string    `json:"id"`                 // pass back to [Store.Verify]
	Question  string    `json:"question,omitempty"` // text, may be ""
	Image     string    `json:"image,omitempty"`    // data URL, may be ""
	ExpiresAt time.Time `json:"expires_at"`         // by the injected clock
}

// VerifyParams are the arguments of one [Store.Verify] call: a struct, so
// that the three strings cannot be swapped silently.
type VerifyParams struct {
	ID     string // the challenge ID the client answers, [Challenge.ID]
	Answer string // the client's answer, compared trimmed and case-insensitively
	// User is the caller on whose behalf the answer is checked ("" for an
	// anonymous caller); a challenge bound to another user refuses it with
	// [ErrWrongUser].
	User string
}

// GenerateParams are the options of one [Store.Generate] call.
type GenerateParams struct {
	// User binds the challenge to a user: [Store.Verify] from anyone else
	// fails with [ErrWrongUser]. "" leaves it unbound.
	User string
	// MaxNumber is the cost of one [PoW.Generate] challenge (0: the
	// [PoWConfig.MaxNumber]). [Store.Generate] has no cost and refuses a
	// non-zero value with [ErrInvalidArgument].
	MaxNumber int64
}

// Store keeps challenges in Redis: one hash per challenge, expiring by TTL,
// checked and deleted by one Lua script so a challenge passes at most once
// even under concurrent verification. A Store is safe for concurrent use.
type Store struct {
	rdb  redis.Scripter
	gen  Generator
	opts options
}

// New returns a Store on a borrowed client (*redis.Client,
// *redis.ClusterClient, *redis.Ring, any UniversalClient) and a
// [Generator] such as [Letters] or [Arithmetic]. Options: [WithKeyPrefix],
// [WithTTL], [WithMaxAttempts], [WithClock], [WithObserver]; a nil option is
// ignored. A nil client, a nil generator or an option out of range fails
// with [ErrInvalidConfig].
func New(rdb redis.Scripter, gen Generator, opts ...Option) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	if gen == nil {
		return nil, fmt.Errorf("%w: nil generator", ErrInvalidConfig)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, gen: gen, opts: o}, nil
}

// Generate makes a new challenge, stores its normalised answer with the
// TTL and returns what the client may see.
func (s *Store) Generate(ctx context.Context, p GenerateParams) (Challenge, error) {
	if s.opts.observer == nil {
		return s.generate(ctx, p)
	}
	start := time.Now()
	c, err := s.generate(ctx, p)
	s.report(ctx, StageCreate, start, err)
	return c, err
}

func (s *Store) generate(ctx context.Context, p GenerateParams) (Challenge, error) {
	if len(p.User) > 256 {
		return Challenge{}, fmt.Errorf("%w: user ID longer than 256 bytes", ErrInvalidArgument)
	}
	if p.MaxNumber != 0 {
		return Challenge{}, fmt.Errorf("%w: MaxNumber is a proof-of-work cost", ErrInvalidArgument)
	}
	for range 3 { // a random 128-bit ID collides only if crypto/rand is broken
		id := newID()
		pz, err := s.gen.Generate(ctx, Request{ID: id, User: p.User})
		if err != nil {
			return Challenge{}, fmt.Errorf("%w: %w", ErrGenerator, err)
		}
		answer := normalizeAnswer(pz.Answer)
		if answer == "" || len(answer) > maxAnswerLen {
			return Challenge{}, fmt.Errorf("%w: answer empty or longer than %d bytes", ErrGenerator, maxAnswerLen)
		}
		now := s.opts.clock.Now()
		v, err := createScript.Run(ctx, s.rdb, []string{challengeKey(s.opts.prefix, id)},
			answer, p.User, s.opts.ttl.Milliseconds()).Result()
		if err != nil {
			return Challenge{}, fmt.Errorf("captcha: generate: %w", err)
		}
		switch v {
		case int64(1):
			return Challenge{ID: id, Question: pz.Question, Image: pz.Image, ExpiresAt: now.Add(s.opts.ttl)}, nil
		case int64(0):
			continue
		default:
			return Challenge{}, fmt.Errorf("captcha: generate: %w: %v", ErrBadReply, v)
		}
	}
	return Challenge{}, fmt.Errorf("captcha: generate: ID collisions")
}

// Verify checks p.Answer (normalised: trimmed, case-insensitive) for the
// challenge p.ID on behalf of p.User ("" for an anonymous caller). It
// returns nil exactly once per challenge, then the challenge is gone.
// Refusals wrap [ErrRefused]: [ErrNotFound] (also for an ID of the wrong
// shape, checked before Redis), [ErrWrongUser], [ErrWrongAnswer] (as
// [*AttemptsError]) and [ErrTooManyAttempts]; any other error is a Redis
// failure or a cancelled context and must be treated as "not verified".
func (s *Store) Verify(ctx context.Context, p VerifyParams) error {
	if s.opts.observer == nil {
		return s.verify(ctx, p)
	}
	start := time.Now()
	err := s.verify(ctx, p)
	s.report(ctx, StageVerify, start, err)
	return err
}

func (s *Store) verify(ctx context.Context, p VerifyParams) error {
	id, user := p.ID, p.User
	if !ValidID(id) {
		return ErrNotFound
	}
	a := normalizeAnswer(p.Answer)
	if len(a) > maxAnswerLen {
		a = "" // never matches a stored answer but still counts as an attempt
	}
	v, err := verifyScript.Run(ctx, s.rdb, []string{challengeKey(s.opts.prefix, id)},
		a, user, s.opts.maxAttempts).Result()
	if err != nil {
		return fmt.Errorf("captcha: verify: %w", err)
	}
	return verifyReply(v)
}

// VerifyCheck is [Store.Verify] as a check a composer runs in one script
// with other blocks' checks (package fused): the same Lua, the same
// decisions, the same observer report. It passes when the answer solved
// the challenge. An ID that cannot exist fails as Verify fails, before
// Redis.
func (s *Store) VerifyCheck(p VerifyParams) (fused.Check[struct{}], error) {
	if !ValidID(p.ID) {
		return fused.Check[struct{}]{}, ErrNotFound
	}
	a := normalizeAnswer(p.Answer)
	if len(a) > maxAnswerLen {
		a = ""
	}
	start := time.Now()
	return fused.Check[struct{}]{Lua: verifyLua, Keys: []string{challengeKey(s.opts.prefix, p.ID)},
		Args: []any{a, p.User, s.opts.maxAttempts}, Pass: "r[1] == 0",
		Decode: func(ctx context.Context, v any) (struct{}, error) {
			err := verifyReply(v)
			if s.opts.observer != nil {
				s.report(ctx, StageVerify, start, err)
			}
			return struct{}{}, err
		}}, nil
}

// verifyReply is verify.lua's reply as Verify returns it.
func verifyReply(v any) error {
	arr, ok := v.([]interface{})
	if !ok || len(arr) != 2 {
		return fmt.Errorf("captcha: verify: %w: %T", ErrBadReply, v)
	}
	code, ok1 := arr[0].(int64)
	left, ok2 := arr[1].(int64)
	if !ok1 || !ok2 {
		return fmt.Errorf("captcha: verify: %w: %v", ErrBadReply, arr)
	}
	switch code {
	case 0:
		return nil
	case 1:
		return ErrNotFound
	case 2:
		return &AttemptsError{Remaining: int(left)}
	case 3:
		return ErrWrongUser
	case 4:
		return ErrTooManyAttempts
	}
	return fmt.Errorf("captcha: verify: %w: code %d", ErrBadReply, code)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}
