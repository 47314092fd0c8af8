package token

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/seckillkit/seckill/internal/fused"

	"github.com/redis/go-redis/v9"
)

// Status is the outcome of [Pool.Take].
type Status int

// Outcomes of [Pool.Take]. Only Granted and Held carry a token to use.
const (
	// Granted: a free token was bound to the user.
	Granted Status = iota
	// Empty: every issued token is bound or used; try again later (expired
	// bindings flow back) or answer "sold out".
	Empty
	// Held: the user already holds a live token; the same one is returned
	// with its original deadline.
	Held
	// Used: the user already consumed a token of this activity; the pool
	// hands out one token per user.
	Used
	// NotIssued: [Pool.Issue] was never called for the activity.
	NotIssued
)

var statusNames = [...]string{"granted", "empty", "held", "used", "not issued"}

// String returns a lower-case name such as "granted".
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Grant is the result of [Pool.Take].
type Grant struct {
	// Status says what happened; Token is set only for Granted and Held (and
	// Used, where it names the consumed token).
	Status Status
	// Token is the access token, 22 URL-safe characters.
	Token string
	// ExpiresAt is the binding deadline (Granted, Held); after it the token
	// no longer verifies and may return to the pool.
	ExpiresAt time.Time
	// Remaining is the number of free tokens left after the call (0 for
	// Empty and NotIssued).
	Remaining int64
}

// Stats are the counters of one activity's pool, read atomically. Free +
// Expired is how many tokens can still be taken (the expired bindings
// return to the pool at the next Take or Reclaim).
type Stats struct {
	Issued  int64 // tokens ever issued; -1 when never issued
	Free    int64 // tokens in the pool
	Bound   int64 // tokens bound to a user and not consumed (incl. Expired)
	Expired int64 // bound tokens past their deadline, not yet reclaimed
	Used    int64 // tokens consumed
}

// Pool is an access-token pool in Redis: [Pool.Issue] creates stock×k random
// tokens for an activity, [Pool.Take] binds one to a user, [Pool.Consume]
// spends it exactly once and [Pool.Restore] undoes a Consume whose purchase
// failed downstream. A Pool is safe for concurrent use and holds no
// state besides its configuration; any number of app servers may share the
// same keys.
type Pool struct {
	rdb  redis.Scripter
	opts options
}

// NewPool returns a Pool on a borrowed client (*redis.Client,
// *redis.ClusterClient, *redis.Ring or any UniversalClient). Options (each a
// [PoolOption]): [WithKeyPrefix], [WithClock], [WithObserver] (shared with
// [NewSigner]), [WithMultiplier], [WithBindTTL], [WithReclaimBatch],
// [WithIssueBatch]. A nil option is ignored. A nil client or an option out
// of range fails with [ErrInvalidConfig].
func NewPool(rdb redis.Scripter, opts ...PoolOption) (*Pool, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.applyPool(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Pool{rdb: rdb, opts: o}, nil
}

// now returns the ms timestamp passed to the scripts: 0 (Redis TIME) unless
// a clock was injected.
func (p *Pool) now() int64 {
	if !p.opts.clockSet {
		return 0
	}
	return p.opts.clock.Now().UnixMilli()
}

func (p *Pool) keys(activity string) ([]string, error) {
	if !validID(activity) {
		return nil, fmt.Errorf("%w: activity %q", ErrInvalidArgument, activity)
	}
	return newPoolKeys(p.opts.prefix, activity).all(), nil
}

// Issue raises the number of tokens ever issued for the activity to stock×k
// and returns that total. It is idempotent: issuing the same stock twice, or
// from several servers at once, never exceeds stock×k in total. A larger
// stock later tops the pool up by the difference; a smaller one changes
// nothing. Consumed and bound tokens count as issued.
func (p *Pool) Issue(ctx context.Context, activity string, stock int64) (int64, error) {
	keys, err := p.keys(activity)
	if err != nil {
		return 0, err
	}
	if stock < 0 || stock > (1<<40)/p.opts.multiplier {
		return 0, fmt.Errorf("%w: issue %s: stock %d out of range", ErrInvalidArgument, activity, stock)
	}
	target := stock * p.opts.multiplier
	args := make([]interface{}, 1, p.opts.issueBatch+1)
	args[0] = target
	issued, err := p.issue(ctx, keys, args)
	for err == nil && issued < target {
		n := min(int64(p.opts.issueBatch), target-issued)
		args = args[:1]
		for i := int64(0); i < n; i++ {
			args = append(args, newToken())
		}
		issued, err = p.issue(ctx, keys, args)
	}
	if err != nil {
		return 0, fmt.Errorf("token: issue %s: %w", activity, err)
	}
	return issued, nil
}

func (p *Pool) issue(ctx context.Context, keys []string, args []interface{}) (int64, error) {
	v, err := issueScript.Run(ctx, p.rdb, keys, args...).Result()
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: %T", ErrBadReply, v)
	}
	return n, nil
}

// Take binds a free token to the user with the binding TTL, atomically, and
// lazily returns expired bindings to the pool first. A user who holds a live
// token gets it back (Held); a user whose token expired unused loses it to
// the pool and takes a fresh one. An exhausted pool is a result (Empty), not
// an error: err is non-nil only for bad input or a Redis failure.
func (p *Pool) Take(ctx context.Context, activity, user string) (Grant, error) {
	if p.opts.observer == nil {
		return p.take(ctx, activity, user)
	}
	start := time.Now()
	g, err := p.take(ctx, activity, user)
	outcome := outcomeOf(err)
	if err == nil && g.Status >= 0 && int(g.Status) < len(statusOutcomes) {
		outcome = statusOutcomes[g.Status]
	}
	report(ctx, p.opts.observer, StageTake, outcome, activity, start, err)
	return g, err
}

func (p *Pool) take(ctx context.Context, activity, user string) (Grant, error) {
	keys, err := p.keys(activity)
	if err != nil {
		return Grant{}, err
	}
	if !validID(user) {
		return Grant{}, fmt.Errorf("%w: user %q", ErrInvalidArgument, user)
	}
	v, err := takeScript.Run(ctx, p.rdb, keys, user, p.opts.bindTTL.Milliseconds(), p.now(), p.opts.reclaimBatch).Result()
	if err != nil {
		return Grant{}, fmt.Errorf("token: take %s: %w", activity, err)
	}
	arr, ok := v.([]interface{})
	if !ok || len(arr) != 4 {
		return Grant{}, fmt.Errorf("token: take %s: %w: %T", activity, ErrBadReply, v)
	}
	st, ok1 := arr[0].(int64)
	tok, ok2 := arr[1].(string)
	dl, ok3 := arr[2].(int64)
	left, ok4 := arr[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || st < 0 || st > int64(NotIssued) {
		return Grant{}, fmt.Errorf("token: take %s: %w: %v", activity, ErrBadReply, arr)
	}
	g := Grant{Status: Status(st), Token: tok, Remaining: left}
	if dl > 0 {
		g.ExpiresAt = time.UnixMilli(dl)
	}
	return g, nil
}

// ConsumeParams name the token of [Pool.Consume] and [Pool.Restore]: a
// struct, so that the three strings cannot be swapped silently.
type ConsumeParams struct {
	Activity string // activity ID, 1..128 bytes without braces
	User     string // the authenticated user, 1..128 bytes without braces
	Token    string // the pool token the client presented
}

// tokenKeys checks the input of a call about one user's token, before any
// Redis round trip, and returns the activity's keys: a bad activity or user
// is [ErrInvalidArgument] (the caller's), a token of the wrong shape
// [ErrMalformed] (a refusal of the client's credential).
func (p *Pool) tokenKeys(c ConsumeParams) ([]string, error) {
	keys, err := p.keys(c.Activity)
	if err != nil {
		return nil, err
	}
	if !validID(c.User) {
		return nil, fmt.Errorf("%w: user %q", ErrInvalidArgument, c.User)
	}
	if !ValidPoolToken(c.Token) {
		return nil, fmt.Errorf("%w: pool token", ErrMalformed)
	}
	return keys, nil
}

// Consume verifies that c.Token is bound to c.User and live, and marks it
// used, in one atomic call: of any number of concurrent calls with the same
// token exactly one returns nil. Refusals are errors wrapping [ErrRefused]:
// [ErrMalformed], [ErrNotFound], [ErrWrongUser], [ErrUsed] and [ErrExpired]
// (the expired token returns to the pool in the same call; later calls for
// it then report ErrNotFound, or ErrWrongUser once another user takes it).
// A bad activity or user ID is [ErrInvalidArgument]; any other error is a
// Redis failure: not verified.
func (p *Pool) Consume(ctx context.Context, c ConsumeParams) error {
	if p.opts.observer == nil {
		return p.consume(ctx, c)
	}
	start := time.Now()
	err := p.consume(ctx, c)
	report(ctx, p.opts.observer, StageConsume, outcomeOf(err), c.Activity, start, err)
	return err
}

func (p *Pool) consume(ctx context.Context, c ConsumeParams) error {
	keys, err := p.tokenKeys(c)
	if err != nil {
		return err
	}
	v, err := consumeScript.Run(ctx, p.rdb, keys, c.User, c.Token, p.now()).Result()
	if err != nil {
		return fmt.Errorf("token: consume %s: %w", c.Activity, err)
	}
	return consumeReply(c, v)
}

// ConsumeCheck is [Pool.Consume] as a check a composer runs in one script
// with other blocks' checks (package fused): the same Lua, the same
// decisions, the same observer report. It passes when the token was
// consumed. Invalid parameters fail as Consume fails, before Redis.
func (p *Pool) ConsumeCheck(c ConsumeParams) (fused.Check[struct{}], error) {
	keys, err := p.tokenKeys(c)
	if err != nil {
		return fused.Check[struct{}]{}, err
	}
	start := time.Now()
	return fused.Check[struct{}]{Lua: libLua + consumeLua, Keys: keys, Args: []any{c.User, c.Token, p.now()}, Pass: "r == 0",
		Decode: func(ctx context.Context, v any) (struct{}, error) {
			err := consumeReply(c, v)
			if p.opts.observer != nil {
				report(ctx, p.opts.observer, StageConsume, outcomeOf(err), c.Activity, start, err)
			}
			return struct{}{}, err
		}}, nil
}

// consumeReply is consume.lua's reply as Consume returns it.
func consumeReply(c ConsumeParams, v any) error {
	code, ok := v.(int64)
	if !ok {
		return fmt.Errorf("token: consume %s: %w: %T", c.Activity, ErrBadReply, v)
	}
	switch code {
	case 0:
		return nil
	case 1:
		return ErrNotFound
	case 2:
		return ErrUsed
	case 3:
		return ErrWrongUser
	case 4:
		return ErrExpired
	}
	return fmt.Errorf("token: consume %s: %w: code %d", c.Activity, ErrBadReply, code)
}

// Restore undoes the [Pool.Consume] made with c, in one atomic call: the
// used token becomes bound to the user again with a fresh binding deadline
// (now + [WithBindTTL], whatever the old deadline was), the user→token
// ownership is kept and the Used counter of [Pool.Stats] drops by one. The
// user can then Consume the same token again (and [Pool.Take] answers Held
// with it).
//
// Call it only to undo your own Consume whose downstream step failed: the
// stock reservation failed for an infrastructure reason (Redis error,
// breaker open), or the order hand-off failed and the reservation was
// released. Without it the user's retry is refused with [ErrUsed] although
// nothing was bought. Never restore a token whose purchase went through: the
// user could then buy a second time as far as the token is concerned. The
// guard against a second order is the stock package's per-user cap
// (Activity.PerUserLimit, 1 by default), not the token.
//
// Restore is idempotent: a token already bound to the user and live is left
// as it is (nil), so a retried Restore is safe. Refusals are errors wrapping
// [ErrRefused]: [ErrMalformed] (checked before Redis, like Consume;
// [ErrInvalidArgument] for a bad activity or user ID), [ErrWrongUser] (the
// token is bound to or used by another user) and [ErrNotFound] (unknown,
// free or already returned to the pool; a binding of the user that expired
// is returned to the pool by this call and also reports ErrNotFound: there
// is nothing left to restore). A Redis failure is a wrapped error matching
// none of them.
func (p *Pool) Restore(ctx context.Context, c ConsumeParams) error {
	if p.opts.observer == nil {
		return p.restore(ctx, c)
	}
	start := time.Now()
	err := p.restore(ctx, c)
	report(ctx, p.opts.observer, StageRestore, outcomeOf(err), c.Activity, start, err)
	return err
}

func (p *Pool) restore(ctx context.Context, c ConsumeParams) error {
	keys, err := p.tokenKeys(c)
	if err != nil {
		return err
	}
	v, err := restoreScript.Run(ctx, p.rdb, keys, c.User, c.Token, p.opts.bindTTL.Milliseconds(), p.now()).Result()
	if err != nil {
		return fmt.Errorf("token: restore %s: %w", c.Activity, err)
	}
	code, ok := v.(int64)
	if !ok {
		return fmt.Errorf("token: restore %s: %w: %T", c.Activity, ErrBadReply, v)
	}
	switch code {
	case 0, 2: // restored; already bound and live
		return nil
	case 1, 4: // not found; expired binding returned to the pool
		return ErrNotFound
	case 3:
		return ErrWrongUser
	}
	return fmt.Errorf("token: restore %s: %w: code %d", c.Activity, ErrBadReply, code)
}

// Reclaim returns every expired bound-but-unused token of the activity to
// the pool and reports how many it returned. [Pool.Take] already reclaims
// lazily (see [WithReclaimBatch]); call Reclaim from a ticker when takes are
// rare but [Stats] must be exact.
func (p *Pool) Reclaim(ctx context.Context, activity string) (int64, error) {
	keys, err := p.keys(activity)
	if err != nil {
		return 0, err
	}
	const batch = 1000
	var total int64
	for {
		v, err := reclaimScript.Run(ctx, p.rdb, keys, p.now(), batch).Result()
		if err != nil {
			return total, fmt.Errorf("token: reclaim %s: %w", activity, err)
		}
		n, ok := v.(int64)
		if !ok {
			return total, fmt.Errorf("token: reclaim %s: %w: %T", activity, ErrBadReply, v)
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

// Stats reads the pool's counters in one atomic call.
func (p *Pool) Stats(ctx context.Context, activity string) (Stats, error) {
	keys, err := p.keys(activity)
	if err != nil {
		return Stats{}, err
	}
	v, err := statsScript.Run(ctx, p.rdb, keys, p.now()).Result()
	if err != nil {
		return Stats{}, fmt.Errorf("token: stats %s: %w", activity, err)
	}
	arr, ok := v.([]interface{})
	if !ok || len(arr) != 5 {
		return Stats{}, fmt.Errorf("token: stats %s: %w: %T", activity, ErrBadReply, v)
	}
	var n [5]int64
	for i, x := range arr {
		if n[i], ok = x.(int64); !ok {
			return Stats{}, fmt.Errorf("token: stats %s: %w: %v", activity, ErrBadReply, arr)
		}
	}
	return Stats{Issued: n[0], Free: n[1], Bound: n[2], Expired: n[3], Used: n[4]}, nil
}

// Drop deletes every key of the activity's pool (after the sale).
func (p *Pool) Drop(ctx context.Context, activity string) error {
	keys, err := p.keys(activity)
	if err != nil {
		return err
	}
	if err := dropScript.Run(ctx, p.rdb, keys).Err(); err != nil {
		return fmt.Errorf("token: drop %s: %w", activity, err)
	}
	return nil
}

// poolTokenLen is the length of a pool token: 16 random bytes, base64url.
const poolTokenLen = 22

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ValidPoolToken reports whether s has the shape of a pool token (22
// base64url characters encoding 16 bytes). [Pool.Consume] checks it before
// calling Redis, so garbage never reaches a script.
func ValidPoolToken(s string) bool {
	if len(s) != poolTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isB64URL(s[i]) {
			return false
		}
	}
	// The last character carries 4 padding bits that must be zero.
	return b64Index(s[poolTokenLen-1])&0x0f == 0
}

func isB64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func b64Index(c byte) byte {
	switch {
	case c >= 'A' && c <= 'Z':
		return c - 'A'
	case c >= 'a' && c <= 'z':
		return c - 'a' + 26
	case c >= '0' && c <= '9':
		return c - '0' + 52
	case c == '-':
		return 62
	}
	return 63
}
