package limiter

import (
	"math"
	"sync/atomic"
	"time"
)

// gcra is the arithmetic of a token bucket in its GCRA form, shared by
// [TokenBucket] and [Keyed]. Time is in ticks (1/16 ns); the state is the
// theoretical arrival time (tat): the bucket is full when tat <= now, and a
// request of n fits when max(tat, now) + n*interval - now <= tau.
type gcra struct {
	interval int64 // ticks per token
	tau      int64 // burst * interval
	burst    int
}

// tatFull is the initial state: a bucket that is full at any time.
const tatFull = math.MinInt64 >> 2

// tatDead marks an entry removed from a [Keyed] map.
const tatDead = math.MaxInt64

// take spends n tokens at now if they fit. It returns whether they did, the
// state after the decision, and dead if the entry was evicted (caller must
// look the key up again).
func (g *gcra) take(p *atomic.Int64, now int64, n int) (ok bool, tat int64, dead bool) {
	inc := int64(n) * g.interval
	for {
		old := p.Load()
		if old == tatDead {
			return false, 0, true
		}
		t := max(old, now)
		nt := t + inc
		if nt-now > g.tau {
			return false, t, false
		}
		if p.CompareAndSwap(old, nt) {
			return true, nt, false
		}
	}
}

// give returns n tokens at now, never beyond full.
func (g *gcra) give(p *atomic.Int64, now int64, n int) {
	dec := int64(n) * g.interval
	for {
		old := p.Load()
		if old <= now || old == tatDead {
			return
		}
		if p.CompareAndSwap(old, max(old-dec, now)) {
			return
		}
	}
}

// result describes the state tat (after the decision) at now.
func (g *gcra) result(now, tat int64, n int, allowed bool) Result {
	tat = max(tat, now)
	r := Result{Allowed: allowed, Limit: g.burst}
	r.Remaining = max(int((g.tau-(tat-now))/g.interval), 0)
	r.ResetAfter = ticksToDuration(tat - now)
	if !allowed {
		r.RetryAfter = ticksToDuration(tat + int64(n)*g.interval - g.tau - now)
	}
	return r
}

func ticksToDuration(t int64) time.Duration {
	if t <= 0 {
		return 0
	}
	return time.Duration((t + 1<<tickShift - 1) >> tickShift)
}
