package limiter

import (
	"context"
	"fmt"
	"math"
)

// PriorityClass is one class of a [Priority] limiter, given in order from
// the highest class to the lowest.
type PriorityClass struct {
	// Name is the class's key in [Priority.AllowN] ("verified", "normal",
	// "suspect": any names, chosen by the caller). Required, unique.
	Name string
	// Floor is the number of tokens the class must leave in the shared
	// bucket: it may take n tokens only while the bucket holds at least
	// Floor+n. The tokens below it are reserved for the classes above.
	// 0 for the top class (the default); each lower class has a larger
	// floor, below the bucket's burst.
	Floor int
}

// Priority shares one [TokenBucket] among ordered traffic classes so that
// under overload the lowest class is shed first and the higher classes keep
// their admitted rate (Sentinel's idea of protecting the traffic that
// matters, as one capacity with reserved floors). AllowN's key is the class
// name; a request's class is a function of the request (a risk score
// mapped to a class), so in [NewMiddleware] it is a [Rule] whose Key
// returns the class. It implements [Limiter] and [Refunder] and is safe
// for concurrent use (one compare-and-swap per decision, like the bucket).
//
// # What is guaranteed
//
// Let F(i) be the floor of class i (0 for the top class) and F(k) the
// bucket's burst, k being the number of classes. Then, whatever the
// classes send:
//
//   - Capacity: all classes together (and plain calls on the bucket, which
//     act as a class of floor 0) never admit more than burst + rate·t
//     events in any interval t: the bucket's own bound.
//   - Order: a request of class i is refused only when the bucket holds
//     fewer than F(i)+n tokens; at any level of the bucket that admits a
//     class, every class above it is admitted too: the lowest class is
//     shed first.
//   - Rate kept: if the requests of classes 0..i together fit a token bucket
//     of rate r <= rate and burst F(i+1) − F(i) (the width of class i's
//     band), none of them is ever refused, whatever the classes below
//     offer. In particular a top class paced at r <= rate with bursts up to
//     F(1) gets all of its requests admitted under any overload from below.
//     Under overload the classes below share what is left, rate − r, the
//     higher first.
//
// A bucket of rate [Inf] admits everything; a quota bucket (rate 0) applies
// the floors to the quota left. Classes are looked up by a linear scan:
// keep them a handful.
type Priority struct {
	b     *TokenBucket
	names []string
	g     []gcra // per class: the bucket's gcra with tau lowered by the floor
}

// NewPriority shares b among classes, given from the highest to the
// lowest. It returns an error wrapping [ErrInvalidConfig] for a nil b, no
// class, an empty or repeated name, a negative floor, floors that do not
// increase from one class to the next, or (for a finite rate) a floor that
// leaves the class no token (Floor >= burst).
func NewPriority(b *TokenBucket, classes ...PriorityClass) (*Priority, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: priority over a nil bucket", ErrInvalidConfig)
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("%w: priority needs at least one class", ErrInvalidConfig)
	}
	p := &Priority{b: b, names: make([]string, len(classes)), g: make([]gcra, len(classes))}
	for i, c := range classes {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%w: priority class %d has no name", ErrInvalidConfig, i)
		case p.index(c.Name) >= 0:
			return nil, fmt.Errorf("%w: priority class %q given twice", ErrInvalidConfig, c.Name)
		case c.Floor < 0:
			return nil, fmt.Errorf("%w: priority class %q has floor %d < 0", ErrInvalidConfig, c.Name, c.Floor)
		case i > 0 && c.Floor <= classes[i-1].Floor:
			return nil, fmt.Errorf("%w: priority class %q: floor %d must be above that of the class above (%d)",
				ErrInvalidConfig, c.Name, c.Floor, classes[i-1].Floor)
		case b.mode != modeUnlimited && c.Floor >= b.burst:
			return nil, fmt.Errorf("%w: priority class %q: floor %d leaves no token of burst %d",
				ErrInvalidConfig, c.Name, c.Floor, b.burst)
		}
		g := b.g
		g.burst -= c.Floor
		g.tau -= int64(c.Floor) * g.interval
		p.names[i], p.g[i] = c.Name, g
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

// AllowN implements [Limiter] with the class name as key: it takes n tokens
// from the shared bucket if at least Floor+n are there. The Result is the
// class's view: Limit is burst − Floor, Remaining the tokens above the
// floor, RetryAfter how long until the class could take n. An unknown
// class, n < 1 or n > burst − Floor is an error wrapping
// [ErrInvalidArgument] and spends nothing; ctx is unused (no I/O).
func (p *Priority) AllowN(_ context.Context, class string, n int) (Result, error) {
	i := p.index(class)
	if i < 0 {
		return Result{}, fmt.Errorf("%w: unknown priority class %q", ErrInvalidArgument, class)
	}
	g := &p.g[i]
	b := p.b
	switch b.mode {
	case modeUnlimited:
		if n < 1 {
			return Result{}, fmt.Errorf("%w: %d", ErrInvalidArgument, n)
		}
		return Result{Allowed: true, Limit: g.burst, Remaining: math.MaxInt32}, nil
	case modeQuota:
		return p.quota(g.burst, n)
	}
	if n < 1 || n > g.burst {
		return Result{Limit: g.burst}, fmt.Errorf("%w: %d (class %s: burst %d)", ErrInvalidArgument, n, class, g.burst)
	}
	now := b.clock.nanotime() << tickShift
	ok, tat, _ := g.take(&b.tat, now, n) // the bucket's word is never tatDead
	return g.result(now, tat, n, ok), nil
}

// quota decides in quota mode (rate 0): the class may use the quota down to
// its floor.
func (p *Priority) quota(limit, n int) (Result, error) {
	if n < 1 || n > limit {
		return Result{Limit: limit}, fmt.Errorf("%w: %d (quota %d)", ErrInvalidArgument, n, limit)
	}
	for {
		used := p.b.tat.Load()
		left := int64(limit) - used
		if int64(n) > left {
			return Result{Limit: limit, Remaining: int(max(left, 0))}, nil
		}
		if p.b.tat.CompareAndSwap(used, used+int64(n)) {
			return Result{Allowed: true, Limit: limit, Remaining: int(left) - n}, nil
		}
	}
}

// RefundN implements [Refunder]: it gives n tokens back to the shared
// bucket (never beyond full). An unknown class is an error wrapping
// [ErrInvalidArgument] and gives nothing back.
func (p *Priority) RefundN(_ context.Context, class string, n int) error {
	if p.index(class) < 0 {
		return fmt.Errorf("%w: unknown priority class %q", ErrInvalidArgument, class)
	}
	p.b.RefundN(n)
	return nil
}
