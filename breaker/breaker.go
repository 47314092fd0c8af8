package breaker

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Breaker is a circuit breaker. Create one with [New]; the zero value is not
// usable. A Breaker is safe for concurrent use by multiple goroutines.
//
// In the Closed state a call costs a few atomic operations and no lock: the
// state, the run of consecutive failures and the window buckets are atomics,
// and a success reads no clock (with the default clock; see the package doc
// for the rolling window). An Open breaker refuses with two atomic loads and
// an add (plus a clock reading with an injected [Clock]). Transitions,
// half-open probes and bucket rotation take a mutex.
type Breaker struct {
	// Read by every call; written only on transitions (under mu).
	// word packs the generation (bits 2..63) and the State (bits 0..1); a
	// call remembers the word it was admitted under and its result counts
	// only if the word is unchanged when it finishes.
	word atomic.Uint64
	// consec packs the low 32 bits of the generation (high half) and the
	// run of consecutive failures in Closed (low half), so a result from an
	// older generation can never touch the current run.
	consec atomic.Uint64
	// openUntil is the end of the open period, in ns since base.
	openUntil atomic.Int64
	// expiredGen (default clock only) is the generation of the Open period
	// whose timeout a runtime timer has seen elapse; see openExpired.
	expiredGen atomic.Uint64
	// Default clock with a window only: the current bucket epoch as last
	// read from the clock, and whether a bucket boundary may have passed
	// since (set by a runtime timer at the boundary). See successBucket.
	epochCache atomic.Int64
	epochStale atomic.Bool
	_          [20]byte

	rejected atomic.Uint64
	_        [56]byte

	win window

	name          string
	maxConsec     uint32
	ratio         float64
	minRequests   uint64
	openTimeout   int64
	probeLimit    int
	successes     uint64
	classifier    func(error) Outcome
	onStateChange func(ctx context.Context, name string, from, to State)
	obs           observe.Observer // nil: nothing is measured
	clock         Clock            // nil: monotonic time.Since(base)
	base          time.Time

	mu sync.Mutex
	// Guarded by mu.
	probes     int // half-open probe calls in flight, of any generation
	hoSucc     uint64
	hoFail     uint64
	hoIgnored  uint64
	events     []transition
	delivering bool
}

// transition is a state change waiting to be delivered to the hook and the
// observer, with the context of the call that caused it (held only until
// it is delivered).
type transition struct {
	ctx      context.Context
	from, to State
}

// New returns a Closed breaker named name (the name is only passed to the
// state-change hook). It returns an error wrapping [ErrInvalidConfig] for any
// invalid option (a nil option is ignored); it never panics.
func New(name string, opts ...Option) (*Breaker, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil { // a nil option is ignored
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	b := &Breaker{
		name:          name,
		maxConsec:     uint32(o.consecutive),
		openTimeout:   int64(o.openTimeout),
		probeLimit:    o.probeLimit,
		successes:     uint64(o.successes),
		classifier:    o.classifier,
		onStateChange: o.onStateChange,
		obs:           o.observer,
		clock:         o.clock,
	}
	if o.ratioSet {
		b.ratio, b.minRequests = o.ratio, uint64(o.minRequests)
	}
	if o.ratioSet || o.windowSet {
		b.win = newWindow(int64(o.window/time.Duration(o.buckets)), o.buckets)
	} else {
		b.win = newWindow(0, 1)
	}
	if b.clock != nil {
		b.base = b.clock.Now()
	} else {
		b.base = time.Now()
	}
	b.epochStale.Store(true)
	if b.obs != nil {
		b.observeState(context.Background(), Closed)
	}
	return b, nil
}

// Name returns the name given to [New].
func (b *Breaker) Name() string { return b.name }

func stateOf(w uint64) State { return State(w & 3) }
func genOf(w uint64) uint64  { return w >> 2 }

// now returns the time since base in ns, never negative (a fake clock set
// before base reads as base).
func (b *Breaker) now() int64 {
	var d time.Duration
	if b.clock == nil {
		d = time.Since(b.base)
	} else {
		d = b.clock.Now().Sub(b.base)
	}
	if d < 0 {
		return 0
	}
	return int64(d)
}

// openExpired reports whether the open period of the Open word w is over.
// With an injected clock it compares the clock with the deadline; with the
// process clock it asks the timer armed when the breaker opened, which costs
// one atomic load instead of a clock reading (the period may end a timer
// latency late, never early).
func (b *Breaker) openExpired(w uint64) bool {
	if b.clock == nil {
		return b.expiredGen.Load() == genOf(w)
	}
	return b.now() >= b.openUntil.Load()
}

// classify maps a call's error to its Outcome.
func (b *Breaker) classify(err error) Outcome {
	if err == nil {
		return Success
	}
	o := b.classifier(err)
	if o > Ignore {
		return Failure
	}
	return o
}

// admit decides whether a call may run and returns the state word it runs
// under. Closed costs one atomic load (Execute and Do inline that case);
// Open a few more (see openExpired); HalfOpen takes the mutex.
func (b *Breaker) admit(ctx context.Context) (uint64, error) {
	if w := b.word.Load(); stateOf(w) == Closed {
		return w, nil
	}
	return b.admitSlow(ctx)
}

func (b *Breaker) admitSlow(ctx context.Context) (uint64, error) {
	w := b.word.Load()
	switch stateOf(w) {
	case Closed:
		return w, nil
	case Open:
		if !b.openExpired(w) {
			b.rejected.Add(1)
			return 0, ErrOpen
		}
	}
	b.mu.Lock()
	w = b.word.Load()
	switch stateOf(w) {
	case Closed:
		b.mu.Unlock()
		return w, nil
	case Open:
		if !b.openExpired(w) {
			b.mu.Unlock()
			b.rejected.Add(1)
			return 0, ErrOpen
		}
		w = b.setStateLocked(ctx, w, HalfOpen)
	}
	var err error
	if b.probes >= b.probeLimit {
		err = ErrTooManyProbes
	} else {
		b.probes++
	}
	b.unlockAndDeliver()
	if err != nil {
		b.rejected.Add(1)
		return 0, err
	}
	return w, nil
}

// finish records the outcome of a call admitted under word w. It must be
// called exactly once per admitted call.
func (b *Breaker) finish(ctx context.Context, w uint64, o Outcome) {
	if o == Success {
		b.succeed(ctx, w)
		return
	}
	if stateOf(w) == HalfOpen {
		b.finishProbe(ctx, w, o)
		return
	}
	// Closed. A result from an older generation (the breaker tripped, or
	// tripped and closed again, while the call ran) is dropped.
	if b.word.Load() != w {
		return
	}
	e, bk := b.bucketNow()
	if o != Failure {
		if bk != nil {
			bk.ignored.Add(1)
		}
		return
	}
	if bk != nil {
		bk.failures.Add(1)
	}
	gen := uint32(genOf(w))
	var run uint32
	for {
		c := b.consec.Load()
		if uint32(c>>32) != gen {
			return
		}
		if uint32(c) == ^uint32(0) { // saturate
			run = uint32(c)
			break
		}
		if b.consec.CompareAndSwap(c, c+1) {
			run = uint32(c) + 1
			break
		}
	}
	if b.maxConsec != 0 && run >= b.maxConsec {
		b.trip(ctx, w)
		return
	}
	if b.minRequests != 0 {
		s, f, _ := b.win.sum(e)
		if n := s + f; n >= b.minRequests && float64(f) >= b.ratio*float64(n) {
			b.trip(ctx, w)
		}
	}
}

// succeed records a success: the hot path of a closed breaker. It is kept
// small (no lock, one atomic add, no clock without a window).
func (b *Breaker) succeed(ctx context.Context, w uint64) {
	if stateOf(w) != Closed {
		b.finishProbe(ctx, w, Success)
		return
	}
	if b.word.Load() != w {
		return // older generation
	}
	bk := &b.win.buckets[0]
	if b.win.width != 0 {
		bk = b.successBucket()
	}
	if bk != nil {
		bk.successes.Add(1)
	}
	// Reset the run. Loading first keeps the cache line shared while calls
	// succeed; the CAS loop runs only after a failure.
	if c := b.consec.Load(); uint32(c) != 0 {
		b.resetRun(uint32(genOf(w)))
	}
}

func (b *Breaker) resetRun(gen uint32) {
	for {
		c := b.consec.Load()
		if uint32(c) == 0 || uint32(c>>32) != gen {
			return
		}
		if b.consec.CompareAndSwap(c, uint64(gen)<<32) {
			return
		}
	}
}

// successBucket returns the bucket a success is counted in. With an injected
// clock, or when a bucket boundary may have passed, it reads the clock like
// bucketNow. Otherwise (default clock) it uses the cached epoch, which a
// runtime timer invalidates at the next boundary: a success then costs no
// clock reading. A success recorded between a boundary and the timer firing
// (a timer latency) counts in the previous bucket and so leaves the window
// one bucket early; failures and Counts always read the clock.
func (b *Breaker) successBucket() *bucket {
	if b.clock == nil && !b.epochStale.Load() {
		if bk := b.win.at(b.epochCache.Load(), &b.mu); bk != nil {
			return bk
		}
	}
	now := b.now()
	e := b.win.epoch(now)
	if b.clock == nil {
		b.refreshEpoch(e, now)
	}
	return b.win.at(e, &b.mu)
}

// refreshEpoch raises the cached epoch to e (read at now) and, if the cache
// was stale, arms a timer for the next bucket boundary. While calls keep
// coming there is one timer per bucket width; an idle breaker has none.
func (b *Breaker) refreshEpoch(e, now int64) {
	for {
		c := b.epochCache.Load()
		if c >= e || b.epochCache.CompareAndSwap(c, e) {
			break
		}
	}
	if b.epochStale.CompareAndSwap(true, false) {
		next := (e+1)*b.win.width - now
		time.AfterFunc(time.Duration(next), func() { b.epochStale.Store(true) })
	}
}

// bucketNow returns the current epoch and its bucket (nil if the result is
// outside the window, see window.at). Without a rolling window it reads no
// clock: the single bucket is re-tagged to epoch 0 when the breaker closes.
func (b *Breaker) bucketNow() (int64, *bucket) {
	if b.win.width == 0 {
		return 0, &b.win.buckets[0]
	}
	e := b.win.epoch(b.now())
	return e, b.win.at(e, &b.mu)
}

// trip opens a breaker that is still in the closed generation w.
func (b *Breaker) trip(ctx context.Context, w uint64) {
	b.mu.Lock()
	if b.word.Load() == w {
		b.setStateLocked(ctx, w, Open)
	}
	b.unlockAndDeliver()
}

func (b *Breaker) finishProbe(ctx context.Context, w uint64, o Outcome) {
	b.mu.Lock()
	b.probes-- // the slot is given back whatever happened meanwhile
	if b.word.Load() == w {
		switch o {
		case Success:
			b.hoSucc++
			if b.hoSucc >= b.successes {
				b.setStateLocked(ctx, w, Closed)
			}
		case Failure:
			b.hoFail++
			b.setStateLocked(ctx, w, Open)
		default:
			b.hoIgnored++
		}
	}
	b.unlockAndDeliver()
}

// setStateLocked moves from the state word w to state to, starting a new
// generation, and queues the hook. Counters of the new state are reset before
// the new word is published, so a lock-free reader that sees the new word
// sees them reset. Returns the new word.
func (b *Breaker) setStateLocked(ctx context.Context, w uint64, to State) uint64 {
	from := stateOf(w)
	gen := genOf(w) + 1
	nw := gen<<2 | uint64(to)
	switch to {
	case Open:
		until := b.now() + b.openTimeout
		if until < 0 { // saturate: a timeout of centuries must not wrap around
			until = math.MaxInt64
		}
		b.openUntil.Store(until)
		if b.clock == nil {
			// With the process clock, a runtime timer (no goroutine until it
			// fires, then one store) marks the end of the open period, so
			// refusing a call reads no clock. Timers never fire early.
			time.AfterFunc(time.Duration(b.openTimeout), func() { b.expiredGen.Store(gen) })
		}
	case HalfOpen:
		b.hoSucc, b.hoFail, b.hoIgnored = 0, 0, 0
	case Closed:
		b.win.reset()
		b.consec.Store(uint64(uint32(gen)) << 32)
	}
	b.word.Store(nw)
	if b.onStateChange != nil || b.obs != nil {
		b.events = append(b.events, transition{ctx, from, to})
	}
	return nw
}

// unlockAndDeliver releases mu and then runs queued hooks, outside the lock,
// one goroutine at a time, in order. A hook that calls back into the breaker
// and causes a transition only queues it; the loop below delivers it next.
func (b *Breaker) unlockAndDeliver() {
	if len(b.events) == 0 || b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	completed := false
	defer func() {
		// Runs with mu unlocked only if a hook panicked: let the next
		// caller deliver what is still queued.
		if !completed {
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for len(b.events) > 0 {
		evs := b.events
		b.events = nil
		b.mu.Unlock()
		for _, ev := range evs {
			if b.onStateChange != nil {
				b.onStateChange(ev.ctx, b.name, ev.from, ev.to)
			}
			if b.obs != nil {
				b.observeState(ev.ctx, ev.to)
			}
		}
		b.mu.Lock()
	}
	b.delivering = false
	completed = true
	b.mu.Unlock()
}

// State returns the current state. An Open breaker whose timeout has passed
// becomes HalfOpen here (as it would on the next call), firing the hook.
func (b *Breaker) State() State {
	w := b.word.Load()
	if stateOf(w) != Open || !b.openExpired(w) {
		return stateOf(w)
	}
	b.mu.Lock()
	w = b.word.Load()
	if stateOf(w) == Open && b.openExpired(w) {
		w = b.setStateLocked(context.Background(), w, HalfOpen)
	}
	b.unlockAndDeliver()
	return stateOf(w)
}

// Counts returns a snapshot of the counters (see [Counts]). Like [Breaker.State]
// it first moves an expired Open breaker to HalfOpen.
func (b *Breaker) Counts() Counts {
	b.State()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	c := Counts{State: stateOf(w), Probes: b.probes, Rejected: b.rejected.Load()}
	switch c.State {
	case Closed:
		var e int64
		if b.win.width != 0 {
			e = b.win.epoch(b.now())
		}
		c.Successes, c.Failures, c.Ignored = b.win.sum(e)
		if cc := b.consec.Load(); uint32(cc>>32) == uint32(genOf(w)) {
			c.ConsecutiveFailures = uint32(cc)
		}
	case HalfOpen:
		c.Successes, c.Failures, c.Ignored = b.hoSucc, b.hoFail, b.hoIgnored
	}
	return c
}

// Execute runs fn(ctx) if the breaker admits the call and returns fn's error;
// otherwise it returns [ErrOpen] or [ErrTooManyProbes] without calling fn.
// A nil fn is an error wrapping [ErrInvalidArgument].
// The error is classified (see [WithClassifier]) and counted. If fn panics,
// the call counts as a failure, a half-open probe slot is given back, and the
// panic continues up the stack unchanged (it is not recovered, so the
// original stack trace is kept). The same holds for runtime.Goexit.
//
// ctx is only passed to fn; Execute itself never blocks.
func (b *Breaker) Execute(ctx context.Context, fn func(context.Context) error) error {
	if fn == nil {
		return errNilFunc
	}
	if b.obs != nil {
		return b.executeObserved(ctx, fn)
	}
	w := b.word.Load()
	if stateOf(w) != Closed {
		var err error
		if w, err = b.admitSlow(ctx); err != nil {
			return err
		}
	}
	finished := false
	defer func() {
		if !finished {
			b.finish(ctx, w, Failure)
		}
	}()
	err := fn(ctx)
	finished = true
	if err == nil {
		b.succeed(ctx, w)
	} else {
		b.finish(ctx, w, b.classify(err))
	}
	return err
}

// executeObserved is Execute with an observer: the same steps, timed and
// reported (kept apart so that the unobserved path stays as it was).
func (b *Breaker) executeObserved(ctx context.Context, fn func(context.Context) error) error {
	start := b.now()
	w, err := b.admit(ctx)
	if err != nil {
		b.observeCall(ctx, outcomeRejected, start)
		return err
	}
	finished := false
	defer func() {
		if !finished {
			b.finish(ctx, w, Failure)
			b.observeCall(ctx, outcomeFailure, start)
		}
	}()
	err = fn(ctx)
	finished = true
	o := b.classify(err)
	b.finish(ctx, w, o)
	b.observeCall(ctx, callOutcome(o), start)
	return err
}

// Do is [Breaker.Execute] for a function that returns a value. When the call
// is refused it returns the zero T and [ErrOpen] or [ErrTooManyProbes].
func Do[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error)) (T, error) {
	if fn == nil {
		var zero T
		return zero, errNilFunc
	}
	if b.obs != nil {
		return doObserved(ctx, b, fn)
	}
	w := b.word.Load()
	if stateOf(w) != Closed {
		var err error
		if w, err = b.admitSlow(ctx); err != nil {
			var zero T
			return zero, err
		}
	}
	finished := false
	defer func() {
		if !finished {
			b.finish(ctx, w, Failure)
		}
	}()
	v, err := fn(ctx)
	finished = true
	if err == nil {
		b.succeed(ctx, w)
	} else {
		b.finish(ctx, w, b.classify(err))
	}
	return v, err
}

// doObserved is Do with an observer (see executeObserved).
func doObserved[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error)) (T, error) {
	start := b.now()
	w, err := b.admit(ctx)
	if err != nil {
		b.observeCall(ctx, outcomeRejected, start)
		var zero T
		return zero, err
	}
	finished := false
	defer func() {
		if !finished {
			b.finish(ctx, w, Failure)
			b.observeCall(ctx, outcomeFailure, start)
		}
	}()
	v, err := fn(ctx)
	finished = true
	o := b.classify(err)
	b.finish(ctx, w, o)
	b.observeCall(ctx, callOutcome(o), start)
	return v, err
}

// Allow is the two-step form of [Breaker.Execute] for callers that cannot
// wrap the protected work in a function (streams, callbacks, work split
// across goroutines). If the call is admitted, run it and then call
// done(err) with its error; err is classified as by Execute. If it is
// refused, err is [ErrOpen] or [ErrTooManyProbes] and done is a no-op.
//
// Call done exactly once, also on panics (defer it). Calling done again is
// safe and does nothing: only the first call counts. A half-open permit
// whose done is never called holds its probe slot until the permit is
// garbage collected, when the slot is given back and the call is ignored;
// do not rely on that.
//
// Allow allocates (the permit); Execute and Do do not.
func (b *Breaker) Allow() (done func(err error), err error) {
	var start int64
	if b.obs != nil {
		start = b.now()
	}
	w, err := b.admit(context.Background())
	if err != nil {
		if b.obs != nil {
			b.observeCall(context.Background(), outcomeRejected, start)
		}
		return noop, err
	}
	if b.obs != nil {
		op := &observedPermit{permit: permit{b: b, w: w}, start: start}
		if stateOf(w) == HalfOpen {
			op.slot = &probeSlot{b: b, w: w}
			runtime.AddCleanup(op, (*probeSlot).abandon, op.slot)
		}
		return op.done, nil
	}
	p := &permit{b: b, w: w}
	if stateOf(w) == HalfOpen {
		s := &probeSlot{b: b, w: w}
		p.slot = s
		runtime.AddCleanup(p, (*probeSlot).abandon, s)
	}
	return p.done, nil
}

func noop(error) {}

type permit struct {
	b    *Breaker
	w    uint64
	used atomic.Bool
	slot *probeSlot // half-open only
}

func (p *permit) done(err error) { p.record(err) }

// record counts the first call of done and reports whether it was the
// first, with the outcome.
func (p *permit) record(err error) (Outcome, bool) {
	if !p.used.CompareAndSwap(false, true) {
		return 0, false
	}
	o := p.b.classify(err)
	if p.slot != nil {
		if p.slot.released.CompareAndSwap(false, true) {
			p.b.finish(context.Background(), p.w, o)
		}
		return o, true
	}
	p.b.finish(context.Background(), p.w, o)
	return o, true
}

// observedPermit is the permit of a breaker with an observer (a separate
// type so that an unobserved permit stays as small as it was).
type observedPermit struct {
	permit
	start int64 // b.now() at Allow
}

func (p *observedPermit) done(err error) {
	if o, ok := p.record(err); ok {
		p.b.observeCall(context.Background(), callOutcome(o), p.start)
	}
}

// probeSlot is the part of a half-open permit that outlives it, so that a
// cleanup can give the slot back if done is never called.
type probeSlot struct {
	b        *Breaker
	w        uint64
	released atomic.Bool
}

func (s *probeSlot) abandon() {
	if s.released.CompareAndSwap(false, true) {
		s.b.finish(context.Background(), s.w, Ignore)
	}
}
