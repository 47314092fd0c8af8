package token

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/observe"
)

// PoolOption configures [NewPool]. The options that apply only to a Pool
// return a PoolOption, so passing one to [NewSigner] does not compile; the
// options shared with the Signer return an [Option]. A nil PoolOption is
// ignored.
type PoolOption interface{ applyPool(*options) }

// SignerOption configures [NewSigner]. The options that apply only to a
// Signer return a SignerOption, so passing one to [NewPool] does not
// compile; the options shared with the Pool return an [Option]. A nil
// SignerOption is ignored.
type SignerOption interface{ applySigner(*options) }

// Option is an option of both constructors: it is a [PoolOption] and a
// [SignerOption]. Only [WithKeyPrefix], [WithClock] and [WithObserver]
// return one. A nil Option is ignored.
type Option interface {
	PoolOption
	SignerOption
}

// sharedOption is the one implementation of [Option].
type sharedOption func(*options)

func (f sharedOption) applyPool(o *options)   { f(o) }
func (f sharedOption) applySigner(o *options) { f(o) }

// poolOption is an option of NewPool only.
type poolOption func(*options)

func (f poolOption) applyPool(o *options) { f(o) }

// signerOption is an option of NewSigner only.
type signerOption func(*options)

func (f signerOption) applySigner(o *options) { f(o) }

type options struct {
	prefix       string
	clock        Clock
	clockSet     bool
	multiplier   int64
	bindTTL      time.Duration
	reclaimBatch int64
	issueBatch   int

	lead     time.Duration
	validity time.Duration
	skew     time.Duration
	nodeSkew time.Duration
	nonces   NonceStore
	// nilNonces: WithReplayGuard(nil), a nil collaborator.
	nilNonces bool

	observer observe.Observer
}

func defaultOptions() options {
	return options{
		prefix:       defaultKeyPrefix,
		clock:        systemClock{},
		multiplier:   3,
		bindTTL:      5 * time.Minute,
		reclaimBatch: 16,
		issueBatch:   1000,
		lead:         time.Minute,
		validity:     10 * time.Minute,
		skew:         2 * time.Second,
		nodeSkew:     30 * time.Second,
	}
}

func (o *options) validate() error {
	if err := o.check(); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, err)
	}
	return nil
}

func (o *options) check() error {
	switch {
	case o.multiplier < 1:
		return fmt.Errorf("multiplier %d < 1", o.multiplier)
	case o.bindTTL < time.Millisecond:
		return fmt.Errorf("binding TTL %v < 1ms", o.bindTTL)
	case o.reclaimBatch < 0:
		return fmt.Errorf("reclaim batch %d < 0", o.reclaimBatch)
	case o.issueBatch < 1:
		return fmt.Errorf("issue batch %d < 1", o.issueBatch)
	case o.lead < 0:
		return fmt.Errorf("lead time %v < 0", o.lead)
	case o.validity <= 0:
		return fmt.Errorf("validity %v <= 0", o.validity)
	case o.skew < 0:
		return fmt.Errorf("skew %v < 0", o.skew)
	case o.nodeSkew < 0:
		return fmt.Errorf("max node skew %v < 0", o.nodeSkew)
	case o.clock == nil:
		return fmt.Errorf("nil clock")
	case o.nilNonces:
		return fmt.Errorf("nil replay guard store")
	}
	return nil
}

// WithKeyPrefix sets the prefix of every Redis key (Pool and the Signer's
// replay guard). Default "seckill:". An option of [NewPool] and
// [NewSigner].
func WithKeyPrefix(p string) Option { return sharedOption(func(o *options) { o.prefix = p }) }

// WithClock injects the clock. An option of [NewPool] and [NewSigner]; a
// nil clock fails either with [ErrInvalidConfig].
//
// Signer: "now" for release, not-before and expiry checks. Default: the
// system clock.
//
// Pool: by default the pool's scripts read Redis TIME, so every app server
// agrees on binding deadlines. With WithClock the pool passes the injected
// clock's time to the scripts instead (useful for tests against a real
// Redis, or when app clocks are tightly synchronised).
func WithClock(c Clock) Option {
	return sharedOption(func(o *options) { o.clock = c; o.clockSet = c != nil })
}

// WithMultiplier sets k, the number of pool tokens issued per unit of stock
// (Pool). Default 3: stock 100 issues 300 tokens.
func WithMultiplier(k int64) PoolOption { return poolOption(func(o *options) { o.multiplier = k }) }

// WithBindTTL sets how long a taken token stays bound to its user before it
// expires and may return to the pool (Pool). Default 5 minutes.
func WithBindTTL(d time.Duration) PoolOption { return poolOption(func(o *options) { o.bindTTL = d }) }

// WithReclaimBatch sets how many expired bindings [Pool.Take] returns to the
// pool lazily on each call, besides the caller's own (Pool). 0 disables lazy
// reclaim (then call [Pool.Reclaim] periodically). Default 16.
func WithReclaimBatch(n int64) PoolOption { return poolOption(func(o *options) { o.reclaimBatch = n }) }

// WithIssueBatch sets how many tokens [Pool.Issue] sends per script call
// (Pool). Default 1000.
func WithIssueBatch(n int) PoolOption { return poolOption(func(o *options) { o.issueBatch = n }) }

// WithLeadTime sets how long before the activity start [Signer.Sign] starts
// releasing URLs (Signer). Earlier calls get [ErrTooEarly]. Default 1 minute.
func WithLeadTime(d time.Duration) SignerOption { return signerOption(func(o *options) { o.lead = d }) }

// WithValidity sets how long after the activity start a signed URL stays
// valid when [SignParams.Expiry] is zero (Signer). Default 10 minutes.
func WithValidity(d time.Duration) SignerOption {
	return signerOption(func(o *options) { o.validity = d })
}

// WithSkew sets the clock-skew tolerance applied to not-before and expiry
// when verifying (Signer). Default 2 seconds.
func WithSkew(d time.Duration) SignerOption { return signerOption(func(o *options) { o.skew = d }) }

// WithReplayGuard makes [Signer.Verify] accept each signed URL at most once:
// after every other check passes it claims the URL's nonce in Redis with
// SET NX and a TTL that lasts until the URL is expired on every verifying
// server, see [WithMaxNodeSkew] (Signer). Default: off (a URL verifies any
// number of times until it expires). A nil store fails [NewSigner] with
// [ErrInvalidConfig] (leave the option out to run without the guard).
func WithReplayGuard(s NonceStore) SignerOption {
	return signerOption(func(o *options) { o.nonces, o.nilNonces = s, s == nil })
}

// WithMaxNodeSkew sets the largest difference between the clocks of any two
// servers that verify the same signed URLs with one replay guard (Signer;
// used only with [WithReplayGuard]). It must be >= 0; default 30s.
//
// A server accepts a URL while its own clock reads before expiry + skew
// ([WithSkew]), so a server whose clock is behind still accepts a URL that a
// server ahead already considers expired. The nonce's "used" record must
// outlive that: Verify sets its TTL to expiry + skew + d − now, read on the
// clock of the server that accepted the URL. Any two verifying clocks that
// differ by at most d then never see the record gone while one of them still
// considers the URL live, so a replay is refused on every server. Clocks
// further apart than d break that guarantee: keep servers on NTP and set d
// above the worst difference you alert on. A larger d costs only memory (each
// record lives d longer).
func WithMaxNodeSkew(d time.Duration) SignerOption {
	return signerOption(func(o *options) { o.nodeSkew = d })
}

// WithObserver reports every [Pool.Take], [Pool.Consume], [Pool.Restore]
// and [Signer.Verify] to o, synchronously, with the caller's ctx and the
// call's activity; see [StageTake] for the names. An option of [NewPool]
// and [NewSigner]. A nil o is ignored. Without an observer nothing is measured. Default: none.
func WithObserver(o observe.Observer) Option {
	return sharedOption(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// NonceStore is the one Redis command the replay guard needs. It is
// satisfied by *redis.Client, *redis.ClusterClient, *redis.Ring and any
// [redis.UniversalClient].
type NonceStore interface {
	SetNX(ctx context.Context, key string, value interface{}, expiration time.Duration) *redis.BoolCmd
}
