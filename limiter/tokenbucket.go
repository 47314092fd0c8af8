package limiter

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Limit is a rate of events per second.
type Limit float64

// Inf is the infinite rate: every request is allowed, burst is ignored.
var Inf = Limit(math.Inf(1))

// Every converts the minimum interval between events to a Limit
// (Every(100*time.Millisecond) == 10). A non-positive interval gives [Inf].
func Every(interval time.Duration) Limit {
	if interval <= 0 {
		return Inf
	}
	return Limit(float64(time.Second) / float64(interval))
}

// Per returns n events per period as a Limit (Per(100, time.Minute)).
func Per(n int, period time.Duration) Limit {
	if period <= 0 {
		return Inf
	}
	return Limit(float64(n) * float64(time.Second) / float64(period))
}

// tickShift: bucket time is kept in 1/16 ns ticks so that the emission
// interval of high rates is not rounded to whole nanoseconds.
const tickShift = 4

type bucketMode uint8

const (
	modeRate      bucketMode = iota // GCRA on tat
	modeUnlimited                   // Inf: allow everything
	modeQuota                       // rate 0: burst events in total, never refilled
)

// TokenBucket is an in-process token bucket: it holds up to burst tokens,
// refilled at rate tokens per second, and each event spends one. It starts
// full.
//
// It is implemented as GCRA (the "virtual scheduling" form of a token
// bucket): the whole state is one int64, the theoretical arrival time, and
// every decision is a single atomic compare-and-swap, so it is safe for
// concurrent use, never blocks in Allow, and allocates nothing. The
// compare-and-swap stays because, measured against the same arithmetic and
// clock under a mutex, it was as fast or faster serially and in parallel,
// and about three times faster with a [CoarseClock].
//
// # Special rates
//
//   - rate == [Inf]: unlimited; every Allow is true, Wait never waits, burst
//     is ignored (may be 0).
//   - rate == 0: a fixed quota: burst events in total, never refilled.
//     NewTokenBucket(0, 0) refuses everything; Wait returns an error at once
//     when the quota cannot cover n (it never hangs).
//   - rate < 0 or NaN: [ErrInvalidConfig]. A positive finite rate needs
//     burst >= 1 ([ErrInvalidConfig] otherwise: a bucket that can never
//     hold a token would refuse every event, the classic x/time/rate trap).
//
// # Clock
//
// The default clock reads only the runtime's monotonic clock. [WithClock]
// injects another (a fake in tests, or a [CoarseClock] to make Allow
// cheaper still).
type TokenBucket struct {
	tat atomic.Int64 // theoretical arrival time in ticks (modeRate) or events used (modeQuota)
	_   [56]byte     // keep the hot word on its own cache line

	clock nanoClock
	wall  Clock
	mode  bucketMode
	g     gcra
	limit Limit
	burst int
}

// NewTokenBucket returns a full bucket of burst tokens refilled at rate per
// second. Options read: [WithClock].
func NewTokenBucket(rate Limit, burst int, opts ...TokenBucketOption) (*TokenBucket, error) {
	o := buildOptions(opts, TokenBucketOption.applyTokenBucket)
	if err := o.checkCollaborators(); err != nil {
		return nil, err
	}
	return newTokenBucket(rate, burst, toNanoClock(o.clock), o.clock)
}

func newTokenBucket(rate Limit, burst int, nc nanoClock, wall Clock) (*TokenBucket, error) {
	g, mode, err := newGCRA(rate, burst)
	if err != nil {
		return nil, err
	}
	b := &TokenBucket{clock: nc, wall: wall, limit: rate, burst: burst, g: g, mode: mode}
	b.tat.Store(tatFull)
	if mode == modeQuota {
		b.tat.Store(0)
	}
	return b, nil
}

func newGCRA(rate Limit, burst int) (gcra, bucketMode, error) {
	r := float64(rate)
	switch {
	case math.IsNaN(r) || r < 0:
		return gcra{}, 0, fmt.Errorf("%w: rate %v must be >= 0", ErrInvalidConfig, r)
	case burst < 0:
		return gcra{}, 0, fmt.Errorf("%w: burst %d must be >= 0", ErrInvalidConfig, burst)
	}
	g := gcra{burst: burst}
	var mode bucketMode
	switch {
	case math.IsInf(r, 1):
		mode = modeUnlimited
	case r == 0:
		mode = modeQuota
	default:
		if burst < 1 {
			return gcra{}, 0, fmt.Errorf("%w: burst must be >= 1 for a positive rate (got %d)", ErrInvalidConfig, burst)
		}
		t := float64(time.Second<<tickShift) / r
		if t*float64(burst) > float64(math.MaxInt64>>3) {
			return gcra{}, 0, fmt.Errorf("%w: rate %v with burst %d spans too long a time", ErrInvalidConfig, r, burst)
		}
		g.interval = max(int64(math.Round(t)), 1)
		g.tau = g.interval * int64(burst)
	}
	return g, mode, nil
}

// Limit returns the rate.
func (b *TokenBucket) Limit() Limit { return b.limit }

// Burst returns the bucket size.
func (b *TokenBucket) Burst() int { return b.burst }

// Allow reports whether one event may happen now, and spends it if so.
func (b *TokenBucket) Allow() bool { return b.allowN(b.clock.nanotime()<<tickShift, 1) }

// AllowN reports whether n events may happen now, and spends them if so.
// It is false when n > burst (never possible) or n < 1.
func (b *TokenBucket) AllowN(n int) bool { return b.allowN(b.clock.nanotime()<<tickShift, n) }

func (b *TokenBucket) allowN(now int64, n int) bool {
	switch b.mode {
	case modeRate:
		if n < 1 || n > b.burst {
			return false
		}
		ok, _, _ := b.g.take(&b.tat, now, n)
		return ok
	case modeUnlimited:
		return n >= 1
	default:
		return n >= 1 && b.takeQuota(n)
	}
}

func (b *TokenBucket) takeQuota(n int) bool {
	for {
		used := b.tat.Load()
		if used+int64(n) > int64(b.burst) {
			return false
		}
		if b.tat.CompareAndSwap(used, used+int64(n)) {
			return true
		}
	}
}

// Tokens returns the number of tokens available now (may be fractional).
func (b *TokenBucket) Tokens() float64 {
	switch b.mode {
	case modeUnlimited:
		return math.Inf(1)
	case modeQuota:
		return float64(int64(b.burst) - b.tat.Load())
	}
	now := b.clock.nanotime() << tickShift
	tat := max(b.tat.Load(), now)
	return float64(b.g.tau-(tat-now)) / float64(b.g.interval)
}

// RefundN gives back n tokens (for events allowed but not performed). The
// bucket never exceeds burst. In quota mode the quota is restored by n.
func (b *TokenBucket) RefundN(n int) { b.refund(b.clock.nanotime()<<tickShift, n) }

func (b *TokenBucket) refund(now int64, n int) {
	if n < 1 {
		return
	}
	switch b.mode {
	case modeRate:
		b.g.give(&b.tat, now, n)
	case modeQuota:
		for {
			used := b.tat.Load()
			nu := max(used-int64(n), 0)
			if b.tat.CompareAndSwap(used, nu) {
				return
			}
		}
	}
}

// Reservation is a claim on tokens returned by [TokenBucket.ReserveN]. The
// zero value is a refused reservation.
type Reservation struct {
	b     *TokenBucket
	ok    bool
	n     int
	actAt int64 // ticks
	made  int64 // ticks
}

// OK reports whether the reservation was granted. A refused reservation
// spent nothing.
func (r Reservation) OK() bool { return r.ok }

// Delay is how long the caller must wait, measured from when the
// reservation was made, before acting.
func (r Reservation) Delay() time.Duration {
	if !r.ok {
		return 0
	}
	return ticksToDuration(r.actAt - r.made)
}

// Cancel gives the reserved tokens back, as if the reservation had not been
// made (later reservations keep their place). Call it only if you will not
// act; calling it twice refunds twice.
func (r Reservation) Cancel() {
	if r.ok && r.b != nil {
		r.b.refund(r.b.clock.nanotime()<<tickShift, r.n)
	}
}

// ReserveN reserves n tokens now and says how long to wait before acting.
// It is refused (OK false, nothing spent) when n < 1, n > burst, or in quota
// mode when the quota cannot cover n.
func (b *TokenBucket) ReserveN(n int) Reservation {
	return b.reserve(b.clock.nanotime()<<tickShift, n, math.MaxInt64)
}

func (b *TokenBucket) reserve(now int64, n int, maxWait int64) Reservation {
	if n < 1 {
		return Reservation{}
	}
	switch b.mode {
	case modeUnlimited:
		return Reservation{b: b, ok: true, n: n, actAt: now, made: now}
	case modeQuota:
		if !b.takeQuota(n) {
			return Reservation{}
		}
		return Reservation{b: b, ok: true, n: n, actAt: now, made: now}
	}
	if n > b.burst {
		return Reservation{}
	}
	inc := int64(n) * b.g.interval
	for {
		old := b.tat.Load()
		tat := max(old, now)
		nt := tat + inc
		wait := max(nt-now-b.g.tau, 0)
		if wait > maxWait {
			return Reservation{made: now, actAt: now + wait}
		}
		if b.tat.CompareAndSwap(old, nt) {
			return Reservation{b: b, ok: true, n: n, actAt: now + wait, made: now}
		}
	}
}

// Wait is WaitN(ctx, 1).
func (b *TokenBucket) Wait(ctx context.Context) error { return b.WaitN(ctx, 1) }

// WaitN blocks until n tokens are available and spends them, or fails
// without spending anything:
//   - ctx already done: ctx.Err();
//   - n < 1 or n > burst (never satisfiable): [ErrInvalidArgument];
//   - quota mode (rate 0) without enough quota left: [ErrRefused];
//   - the wait would end after ctx's deadline: [ErrWouldExceedDeadline]
//     (also matching [context.DeadlineExceeded]), returned at once.
//
// If ctx ends during the wait, the tokens are given back and ctx.Err() is
// returned. The wait uses a real timer unless the injected clock has an
// After(time.Duration) <-chan time.Time method (fake clocks in tests).
func (b *TokenBucket) WaitN(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n < 1 || (b.mode == modeRate && n > b.burst) {
		return fmt.Errorf("%w: %d (burst %d)", ErrInvalidArgument, n, b.burst)
	}
	now := b.clock.nanotime() << tickShift
	maxWait := int64(math.MaxInt64)
	if dl, ok := ctx.Deadline(); ok {
		left := dl.Sub(b.wallNow())
		if left < 0 {
			left = 0
		}
		maxWait = int64(left) << tickShift
		if int64(left) > math.MaxInt64>>tickShift {
			maxWait = math.MaxInt64
		}
	}
	r := b.reserve(now, n, maxWait)
	if !r.ok {
		if b.mode == modeQuota {
			return fmt.Errorf("%w: quota exhausted (rate 0, burst %d)", ErrRefused, b.burst)
		}
		return fmt.Errorf("%w (needs %v): %w", ErrWouldExceedDeadline, ticksToDuration(r.actAt-r.made), context.DeadlineExceeded)
	}
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	var ch <-chan time.Time
	if ac, ok := b.wall.(afterClock); ok {
		ch = ac.After(d)
	} else {
		t := time.NewTimer(d)
		defer t.Stop()
		ch = t.C
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

func (b *TokenBucket) wallNow() time.Time {
	if b.wall != nil {
		return b.wall.Now()
	}
	return b.clock.origin().Add(time.Duration(b.clock.nanotime()))
}
