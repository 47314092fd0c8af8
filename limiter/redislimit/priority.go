package redislimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/seckillkit/seckill/limiter"
)

// Priority shares one key of a [Bucket] (a cluster-wide budget) among
// ordered traffic classes, exactly as [limiter.Priority] shares an
// in-process bucket: class i may take n tokens only while the key holds at
// least its Floor+n, so under overload the lowest class is shed first and
// the higher classes keep their admitted rate; [limiter.Priority] states
// the guarantees, which hold here across every app server (Redis decides
// on Redis TIME). AllowN's key is the class name. It implements
// [limiter.Limiter] and [limiter.Refunder] and is safe for concurrent use.
//
// A decision is the [Bucket]'s script on the same key with the class's
// burst (the bucket's minus the floor): one EVALSHA, batched like the
// bucket's, reported to the bucket's observer under its name. Plain
// AllowN calls on the bucket for the same key act as a class of floor 0.
//
// When Redis fails, the bucket's failure policy decides. Under
// [limiter.FallbackLocal] with the default fallback, an in-process
// [limiter.Priority] with the bucket's rate and burst decides, so the
// classes hold while Redis is down (per process: N instances admit up to N
// times the budget); with the bucket's own [WithFallback] limiter, that
// limiter decides for the bucket key, without classes.
type Priority struct {
	b           *Bucket
	key         string
	redisKey    string
	argInterval any
	names       []string
	argBurst    []any // per class: burst − floor
	limits      []int
	local       *limiter.Priority // validates the classes; the default fallback
}

// NewPriority shares b's key key among classes, given from the highest to
// the lowest. The classes follow [limiter.NewPriority]'s rules (names
// unique and not empty, floors increasing from 0 up, each below the
// bucket's burst, or the key's own under [WithException]); a nil b or a
// bad class is an error wrapping [limiter.ErrInvalidConfig].
func NewPriority(b *Bucket, key string, classes ...limiter.PriorityClass) (*Priority, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: priority over a nil bucket", limiter.ErrInvalidConfig)
	}
	burst, argInterval, _ := b.args(key) // the key's own burst under WithException
	tb, err := limiter.NewTokenBucket(b.rate*limiter.Limit(burst)/limiter.Limit(b.limit), burst)
	if err != nil {
		return nil, err
	}
	local, err := limiter.NewPriority(tb, classes...)
	if err != nil {
		return nil, err
	}
	p := &Priority{b: b, key: key, redisKey: bucketKey(b.o.prefix, b.o.name, key), argInterval: argInterval, local: local}
	for _, c := range classes {
		p.names = append(p.names, c.Name)
		p.limits = append(p.limits, burst-c.Floor)
		p.argBurst = append(p.argBurst, strconv.Itoa(burst-c.Floor))
	}
	return p, nil
}

func (p *Priority) index(class string) int {
	for i, n := range p.names {
		if n == class {
			return i
		}
	}
	return -1
}

// AllowN implements [limiter.Limiter] with the class name as key: it takes
// n tokens from the shared key if at least Floor+n are there. The Result is
// the class's view (Limit = burst − Floor, Remaining above the floor). An
// unknown class, n < 1 or n > burst − Floor is an error wrapping
// [limiter.ErrInvalidArgument] and spends nothing.
func (p *Priority) AllowN(ctx context.Context, class string, n int) (limiter.Result, error) {
	if p.b.obs == nil {
		return p.allowN(ctx, class, n)
	}
	start := time.Now()
	r, err := p.allowN(ctx, class, n)
	p.b.observeAllow(ctx, start, r, err)
	return r, err
}

func (p *Priority) allowN(ctx context.Context, class string, n int) (limiter.Result, error) {
	i := p.index(class)
	if i < 0 {
		return limiter.Result{}, fmt.Errorf("%w: unknown priority class %q", limiter.ErrInvalidArgument, class)
	}
	limit := p.limits[i]
	if n < 1 || n > limit {
		return limiter.Result{Limit: limit}, fmt.Errorf("%w: %d (class %s: burst %d)", limiter.ErrInvalidArgument, n, class, limit)
	}
	argN := argOne
	if n != 1 {
		argN = strconv.Itoa(n)
	}
	v, err := p.b.allow.run(ctx, p.redisKey, p.argInterval, p.argBurst[i], argN)
	r, err := parseDecision(v, err, limit)
	if err != nil {
		fb, fbKey := p.b.fallback, p.key
		if !p.b.o.fallbackSet {
			fb, fbKey = p.local, class
		}
		return p.b.failedTo(ctx, p.key, n, err, fb, fbKey)
	}
	return r, nil
}

// RefundN implements [limiter.Refunder]: it gives n tokens back to the
// shared key (never beyond full), as [Bucket.RefundN]. An unknown class is
// an error wrapping [limiter.ErrInvalidArgument] and gives nothing back.
func (p *Priority) RefundN(ctx context.Context, class string, n int) error {
	if p.index(class) < 0 {
		return fmt.Errorf("%w: unknown priority class %q", limiter.ErrInvalidArgument, class)
	}
	return p.b.RefundN(ctx, p.key, n)
}
