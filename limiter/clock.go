package limiter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time. Inject a fake one with [WithClock] in tests.
type Clock interface {
	Now() time.Time
}

// afterClock is optionally implemented by a Clock whose timers follow it
// (a fake clock in tests). [TokenBucket.Wait] sleeps through After when the
// injected clock has it and through a real timer otherwise.
type afterClock interface {
	After(d time.Duration) <-chan time.Time
}

// nanoClock is the internal fast path: nanoseconds since a fixed origin,
// monotonic.
type nanoClock interface {
	nanotime() int64
	origin() time.Time
}

// monoClock is the default clock of the in-process limiters. It reads only
// the runtime's monotonic clock (time.Since of a monotonic origin does not
// read the wall clock), which is about half the cost of time.Now.
type monoClock struct{ start time.Time }

func newMonoClock() *monoClock { return &monoClock{start: time.Now()} }

func (c *monoClock) Now() time.Time    { return c.start.Add(time.Since(c.start)) }
func (c *monoClock) nanotime() int64   { return int64(time.Since(c.start)) }
func (c *monoClock) origin() time.Time { return c.start }

// wrapClock turns any Clock into a nanoClock relative to its first reading.
type wrapClock struct {
	c     Clock
	start time.Time
}

func (w *wrapClock) nanotime() int64   { return int64(w.c.Now().Sub(w.start)) }
func (w *wrapClock) origin() time.Time { return w.start }

func toNanoClock(c Clock) nanoClock {
	switch c := c.(type) {
	case nil:
		return newMonoClock()
	case nanoClock:
		return c
	default:
		return &wrapClock{c: c, start: c.Now()}
	}
}

// CoarseClock is a monotonic [Clock] that is read with one atomic load: a
// background loop (started with [CoarseClock.Run]) stores the monotonic time
// every resolution. Readings lag the true time by at most one resolution
// plus scheduling delay, so a token bucket driven by it sees refills
// slightly late: it may refuse a request up to one resolution early, and
// never allows more than its rate. (At the instants Run starts or stops,
// a reading may step back by less than a resolution; the limiters in this
// package treat time as max(last, now) and are unaffected.)
//
// While the loop is not running (before Run, after Close) every reading
// falls back to the exact monotonic clock, so a CoarseClock is always
// correct, only faster when running. It is safe for concurrent use.
type CoarseClock struct {
	start   time.Time
	res     time.Duration
	now     atomic.Int64
	running atomic.Bool

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// NewCoarseClock returns a coarse clock of the given resolution (1 ms if
// d <= 0). Start it with Run.
func NewCoarseClock(d time.Duration) *CoarseClock {
	if d <= 0 {
		d = time.Millisecond
	}
	c := &CoarseClock{start: time.Now(), res: d}
	return c
}

// Run updates the clock every resolution until ctx is done or Close is
// called, then returns nil. It returns at once an error wrapping
// [ErrRunning] if the clock is already running, or [ErrClosed] if it was
// closed (Close is final, even if called before Run starts).
func (c *CoarseClock) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("limiter: coarse clock: %w", ErrClosed)
	}
	if c.cancel != nil {
		c.mu.Unlock()
		return fmt.Errorf("limiter: coarse clock: %w", ErrRunning)
	}
	ctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.done = make(chan struct{})
	done := c.done
	c.mu.Unlock()
	defer func() {
		c.running.Store(false)
		close(done)
		c.mu.Lock()
		c.cancel = nil
		c.mu.Unlock()
		cancel()
	}()

	t := time.NewTicker(c.res)
	defer t.Stop()
	c.now.Store(int64(time.Since(c.start)))
	c.running.Store(true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.now.Store(int64(time.Since(c.start)))
		}
	}
}

// Close stops a running loop and waits for it to return; a later Run
// returns [ErrClosed] at once. Readings stay valid (exact) after Close. It is
// safe to call more than once.
func (c *CoarseClock) Close() error {
	c.mu.Lock()
	c.closed = true
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

func (c *CoarseClock) nanotime() int64 {
	if c.running.Load() {
		return c.now.Load()
	}
	return int64(time.Since(c.start))
}

func (c *CoarseClock) origin() time.Time { return c.start }

// Now returns the coarse time.
func (c *CoarseClock) Now() time.Time { return c.start.Add(time.Duration(c.nanotime())) }
