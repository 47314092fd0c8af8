package stock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Coalescing (WithCoalescing).
//
// Concurrent Reserve calls of one activity join a batch: the first opens it
// and arms a timer of one window; the batch is sealed when it holds
// maxBatch requests (the caller that fills it sends it, on its own
// goroutine) or when the window has passed (the timer sends it). Sealing
// takes it out of the open batches under the lock, so a request that comes
// later opens the next batch: none is lost, none is added to a batch already
// on its way. A batch holds requests of one ledger only (one activity, or
// one shard of a sharded activity), so its one reserve_many.lua call
// touches one hash tag: one Cluster slot.
//
// The life of a request in a batch. It leaves callWaiting exactly once, by
// one compare-and-swap, and whoever wins decides its fate:
//
//	callWaiting → callAbandoned  the caller's context ended first: the
//	                             request is never sent, and the caller
//	                             returns the context's error
//	callWaiting → callSent       the sender took it into the script call:
//	                             it is decided, and the caller waits for
//	                             its real outcome whatever its context does
//
// So a caller told that its context ended before anything happened never
// sees its request decided later, and a request that was decided is never
// reported as not sent.

// Request states in a batch.
const (
	callWaiting int32 = iota
	callAbandoned
	callSent
)

// maxCoalesceBatch is the largest maxBatch [WithCoalescing] accepts.
const maxCoalesceBatch = 1024

// Defaults of [WithCoalescing] when given zero.
const (
	defaultCoalesceWindow   = 500 * time.Microsecond
	defaultCoalesceMaxBatch = 64
)

// coalescer gathers the concurrent Reserve calls of each ledger into
// batches. open holds the batch still accepting requests, per ledger; it
// never holds more entries than ledgers with a batch forming right now.
type coalescer struct {
	d      *Deductor
	window time.Duration
	max    int

	mu   sync.Mutex
	open map[unit]*batch
}

// batch is one reserve_many.lua call in the making. calls is appended to
// under the coalescer's lock until the batch is sealed, and only read after
// that; it never holds more than max calls.
type batch struct {
	u      unit
	keys   []string        // the ledger's KEYS
	ctx    context.Context // the opener's, without its cancellation: values for client hooks
	calls  []*call
	sealed bool // under the coalescer's lock
	timer  *time.Timer
	done   chan struct{} // closed when every sent call has its outcome
}

type call struct {
	req      Request
	deadline time.Time // zero: the caller's context has none
	state    atomic.Int32
	// The outcome, written by the sender before done is closed.
	r   unitReply
	v   verdict
	err error
}

func newCoalescer(d *Deductor, window time.Duration, maxBatch int) *coalescer {
	return &coalescer{d: d, window: window, max: maxBatch, open: map[unit]*batch{}}
}

// reserve adds req to the open batch of ledger u (whose KEYS are k) and
// returns its outcome once the batch was decided, or the context's error if
// the context ends before the batch is sent (the request is then never
// sent).
func (c *coalescer) reserve(ctx context.Context, u unit, k []string, req Request) (unitReply, error) {
	if err := ctx.Err(); err != nil {
		return unitReply{}, classify("reserve", err)
	}
	c.mu.Lock()
	b := c.open[u]
	if b == nil {
		b = &batch{u: u, keys: k, ctx: context.WithoutCancel(ctx), calls: make([]*call, 0, min(c.max, 16)), done: make(chan struct{})}
		c.open[u] = b
		b.timer = time.AfterFunc(c.window, func() { c.flush(b) })
	}
	cl := &call{req: req}
	cl.deadline, _ = ctx.Deadline()
	b.calls = append(b.calls, cl)
	full := len(b.calls) == c.max
	if full {
		c.seal(b)
	}
	c.mu.Unlock()
	if full {
		b.timer.Stop()
		c.send(b)
	}

	select {
	case <-b.done:
	case <-ctx.Done():
		if cl.state.CompareAndSwap(callWaiting, callAbandoned) {
			return unitReply{}, classify("reserve", ctx.Err())
		}
		b.wait() // sent before the caller gave up: its outcome is on its way
	}
	c.d.act(ctx, u, cl.v)
	return cl.r, cl.err
}

// wait blocks until the batch has been decided.
func (b *batch) wait() { <-b.done }

// seal takes b out of the open batches; the caller holds c.mu.
func (c *coalescer) seal(b *batch) {
	b.sealed = true
	if c.open[b.u] == b {
		delete(c.open, b.u)
	}
}

// flush seals b, if nobody did yet, and sends it (the timer's path).
func (c *coalescer) flush(b *batch) {
	c.mu.Lock()
	if b.sealed {
		c.mu.Unlock()
		return
	}
	c.seal(b)
	c.mu.Unlock()
	c.send(b)
}

// send decides the requests of a sealed batch whose callers have not given
// up, and wakes every caller.
func (c *coalescer) send(b *batch) {
	defer close(b.done)
	sent := make([]*call, 0, len(b.calls))
	var deadline time.Time
	unbounded := false
	for _, cl := range b.calls {
		if !cl.state.CompareAndSwap(callWaiting, callSent) {
			continue // abandoned: never sent
		}
		sent = append(sent, cl)
		switch {
		case cl.deadline.IsZero():
			unbounded = true
		case cl.deadline.After(deadline):
			deadline = cl.deadline
		}
	}
	if len(sent) == 0 {
		return
	}
	// The call runs for all its callers: none of them can cut it short, and
	// it may run until the latest of their deadlines (none if one has none).
	ctx := b.ctx
	if !unbounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	c.d.reserveBatch(ctx, b.u, b.keys, sent)
}

// reserveBatch runs reserve_many.lua for calls (one ledger, whose KEYS are
// k, at most maxCoalesceBatch) and stores each call's outcome, judged as
// reserve judges a single reply. The knowledge of the ledger is taken once,
// when the batch is sent: every decision in it ran after that.
func (d *Deductor) reserveBatch(ctx context.Context, u unit, k []string, calls []*call) {
	st, sn := d.snapOf(u)
	n := len(calls)
	args := make([]any, 1+3*n)
	args[0] = n
	for i, cl := range calls {
		args[1+i] = cl.req.ReservationID
		args[1+n+i] = cl.req.User
		args[1+2*n+i] = cl.req.Qty
	}
	vals, err := reserveManyScript.Run(ctx, d.rdb, k, args...).Slice()
	if err == nil && len(vals) != n {
		err = badReply("reserve", "%d decisions for %d requests", len(vals), n)
	} else if err != nil {
		err = classify("reserve", err)
	}
	if err != nil {
		// Nothing was decided, or (a timeout) the outcome is unknown: the
		// same answer for every request, as each single call would get.
		for _, cl := range calls {
			cl.err = err
		}
		return
	}
	lost := false
	for i, cl := range calls {
		one, ok := vals[i].([]any)
		if !ok {
			cl.err = badReply("reserve", "decision %d of type %T", i, vals[i])
			continue
		}
		cl.r, cl.v, cl.err = d.judge(cl.req, u, &st, sn, one)
		lost = lost || cl.v.frozen
	}
	if !lost {
		return
	}
	// The decisions of one batch ran on one copy of the data, in one atomic
	// step: if one of them shows that copy lost or rolled back, none of
	// them is answered from it (each single call would be judged alone,
	// and one sent among the last could pass).
	for _, cl := range calls {
		cl.v.frozen = true
		if cl.err == nil && cl.r.dir == 0 && cl.r.res.Status != Frozen {
			cl.r.res = frozenResult(cl.r.res)
			cl.r.goneAt = 0
		}
	}
}

// validCoalescing checks the arguments of WithCoalescing (zero means the
// default).
func validCoalescing(window time.Duration, maxBatch int) (time.Duration, int, error) {
	if window == 0 {
		window = defaultCoalesceWindow
	}
	if maxBatch == 0 {
		maxBatch = defaultCoalesceMaxBatch
	}
	switch {
	case window < 0:
		return 0, 0, fmt.Errorf("%w: coalescing window %v must be >= 0", ErrInvalidConfig, window)
	case maxBatch < 0 || maxBatch > maxCoalesceBatch:
		return 0, 0, fmt.Errorf("%w: coalescing max batch %d must be in [0, %d]", ErrInvalidConfig, maxBatch, maxCoalesceBatch)
	}
	return window, maxBatch, nil
}
