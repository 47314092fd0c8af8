package breaker

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// noEpoch tags a bucket that holds no counts of the current closed period.
const noEpoch = -1

// bucket counts the results of one slice of the rolling window. epoch is the
// slice's number (elapsed time / bucket width) and tags which slice the
// counts belong to. epoch is read by every call but written once per bucket
// width, the counters are written by every call: they sit on separate cache
// lines so that the epoch check stays a local cache hit on every core.
type bucket struct {
	epoch     atomic.Int64
	_         [56]byte
	successes atomic.Uint64
	failures  atomic.Uint64
	ignored   atomic.Uint64
	_         [40]byte
}

// window is a ring of buckets. Writers pick the bucket of the current epoch
// without a lock; only when the bucket still holds an older epoch do they take
// the breaker's mutex to clear and re-tag it (once per bucket width). With
// width == 0 there is one bucket that is never rotated: it counts everything
// since the breaker last closed and needs no clock.
type window struct {
	width   int64  // bucket width in ns; 0: no rolling window
	recip   uint64 // floor((2^64-1) / width), to divide by multiplying
	buckets []bucket
}

func newWindow(width int64, n int) window {
	w := window{width: width, buckets: make([]bucket, n)}
	if width > 0 {
		w.recip = ^uint64(0) / uint64(width)
	}
	w.reset()
	return w
}

// epoch returns the bucket number of the instant now (ns since the breaker's
// base, never negative).
func (w *window) epoch(now int64) int64 {
	if w.width == 0 {
		return 0
	}
	// floor(now/width) without a division (a 64-bit divide is the largest
	// cost of the closed path after the clock read): for 0 <= now < 2^63 the
	// high word of now*recip is the quotient or one less; fix it up.
	hi, _ := bits.Mul64(uint64(now), w.recip)
	if (hi+1)*uint64(w.width) <= uint64(now) {
		hi++
	}
	return int64(hi)
}

// index maps an epoch to its slot in the ring, avoiding the division in the
// common cases (a single bucket, a power-of-two count).
func (w *window) index(e int64) int {
	n := len(w.buckets)
	if n == 1 {
		return 0
	}
	if n&(n-1) == 0 {
		return int(e) & (n - 1)
	}
	return int(uint64(e) % uint64(n))
}

// at returns the bucket for epoch e, rotating it if it still holds an older
// epoch, or nil when e is older than the bucket's epoch, that is more than a
// whole window in the past (the result is then outside the window and not
// counted).
func (w *window) at(e int64, mu *sync.Mutex) *bucket {
	bk := &w.buckets[w.index(e)]
	if t := bk.epoch.Load(); t != e {
		if t > e {
			return nil
		}
		mu.Lock()
		t = bk.epoch.Load()
		if t < e {
			bk.successes.Store(0)
			bk.failures.Store(0)
			bk.ignored.Store(0)
			bk.epoch.Store(e)
		}
		mu.Unlock()
		if t > e {
			return nil
		}
	}
	return bk
}

// sum adds the buckets that belong to the window ending with epoch e.
func (w *window) sum(e int64) (successes, failures, ignored uint64) {
	oldest := e - int64(len(w.buckets)) // exclusive
	for i := range w.buckets {
		bk := &w.buckets[i]
		if t := bk.epoch.Load(); t > oldest && t <= e {
			successes += bk.successes.Load()
			failures += bk.failures.Load()
			ignored += bk.ignored.Load()
		}
	}
	return successes, failures, ignored
}

// reset forgets every count. Called with the breaker's mutex held, when the
// breaker closes. The tag goes first so that a concurrent writer either sees
// the old tag (and its stale add is cleared with the bucket's next rotation,
// since no epoch matches noEpoch) or waits on the mutex.
func (w *window) reset() {
	for i := range w.buckets {
		bk := &w.buckets[i]
		bk.epoch.Store(noEpoch)
		bk.successes.Store(0)
		bk.failures.Store(0)
		bk.ignored.Store(0)
	}
	if w.width == 0 {
		// No rolling window: the one bucket is always current (epoch 0), and
		// writers use it without checking the tag.
		w.buckets[0].epoch.Store(0)
	}
}
