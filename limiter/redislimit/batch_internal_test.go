package redislimit

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
)

// gateHook holds the first script command and the first script pipeline
// sent by a client until the test opens their gates, so that a test can
// stand the batcher still at a chosen point.
type gateHook struct {
	cmdHeld, pipeHeld atomic.Bool
	cmdIn, pipeIn     chan struct{} // closed when the held command / pipeline arrives
	cmdGo, pipeGo     chan struct{} // closed by the test to let it through
}

func newGateHook() *gateHook {
	return &gateHook{
		cmdIn: make(chan struct{}), pipeIn: make(chan struct{}),
		cmdGo: make(chan struct{}), pipeGo: make(chan struct{}),
	}
}

func isScript(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" }

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) && h.cmdHeld.CompareAndSwap(false, true) {
			close(h.cmdIn)
			<-h.cmdGo
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && isScript(cmds[0]) && h.pipeHeld.CompareAndSwap(false, true) {
			close(h.pipeIn)
			<-h.pipeGo
		}
		return next(ctx, cmds)
	}
}

// queued waits until the batcher's queue holds n calls and returns the
// last. It yields instead of sleeping: the goroutines it waits for only
// need to be scheduled.
func queued(b *batcher, n int) *scriptCall {
	for {
		b.mu.Lock()
		if len(b.queue) == n {
			c := b.queue[n-1]
			b.mu.Unlock()
			return c
		}
		b.mu.Unlock()
		runtime.Gosched()
	}
}

type outcome struct {
	r   limiter.Result
	err error
}

// batchRig is a SlidingWindow with one pipeline in flight (WithBatching(1))
// whose first script command is held by a gate: the first caller takes the
// slot and stands still in Redis, so the next callers queue behind it.
type batchRig struct {
	t    *testing.T
	rdb  *redis.Client
	gate *gateHook
	sw   *SlidingWindow
}

func newBatchRig(t *testing.T) *batchRig {
	c, m := testenv.Miniredis(t)
	m.SetTime(testenv.Epoch()) // miniredis TIME and TTLs are both fake
	gate := newGateHook()
	c.AddHook(gate)
	require.NoError(t, slidingWindowScript.Load(context.Background(), c).Err())
	sw, err := NewSlidingWindow(c, 10, time.Hour, WithBatching(1), WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	return &batchRig{t: t, rdb: c, gate: gate, sw: sw}
}

func (g *batchRig) allow(ctx context.Context, key string) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := g.sw.AllowN(ctx, key, 1)
		ch <- outcome{r, err}
	}()
	return ch
}

// spent reads the number of events recorded for key in Redis.
func (g *batchRig) spent(key string) int64 {
	n, err := g.rdb.ZCard(context.Background(), windowKey(g.sw.o.prefix, g.sw.o.name, key)).Result()
	require.NoError(g.t, err)
	return n
}

// TestBatcherNothingSpentMeansNeverSent: a caller told "nothing spent" (its
// context error) must never see its call executed later, and a call that
// was executed must be reported with its real reply.
func TestBatcherNothingSpentMeansNeverSent(t *testing.T) {
	t.Parallel()

	t.Run("cancelled after its pipeline was taken", func(t *testing.T) {
		t.Parallel()
		g := newBatchRig(t)
		a := g.allow(context.Background(), "a")
		<-g.gate.cmdIn // a holds the only slot, stopped in Redis
		b := g.allow(context.Background(), "b")
		queued(g.sw.allow, 1)
		ctxC, cancelC := context.WithCancel(context.Background())
		defer cancelC()
		c := g.allow(ctxC, "c")
		callC := queued(g.sw.allow, 2)

		close(g.gate.cmdGo) // a finishes and hands the slot to b, which takes c
		<-g.gate.pipeIn     // the pipeline {b, c} is on its way to Redis
		cancelC()
		for callC.state.Load() == callWaiting { // c has seen its cancel, or could not act on it
			runtime.Gosched()
		}
		close(g.gate.pipeGo)

		for _, o := range []outcome{<-a, <-b} {
			require.NoError(t, o.err)
			require.True(t, o.r.Allowed)
		}
		oc := <-c
		require.NoError(t, oc.err, "c was sent: it must get its reply, not a claim that nothing was spent")
		assert.True(t, oc.r.Allowed)
		assert.Equal(t, 9, oc.r.Remaining)
		assert.Equal(t, int64(1), g.spent("c"))
	})

	t.Run("cancelled while queued", func(t *testing.T) {
		t.Parallel()
		g := newBatchRig(t)
		a := g.allow(context.Background(), "a")
		<-g.gate.cmdIn
		b := g.allow(context.Background(), "b")
		queued(g.sw.allow, 1)
		ctxC, cancelC := context.WithCancel(context.Background())
		c := g.allow(ctxC, "c")
		queued(g.sw.allow, 2)
		cancelC()
		oc := <-c
		require.ErrorIs(t, oc.err, context.Canceled)
		assert.False(t, oc.r.Allowed)

		close(g.gate.cmdGo)
		close(g.gate.pipeGo)
		for _, o := range []outcome{<-a, <-b} {
			require.NoError(t, o.err)
			require.True(t, o.r.Allowed)
		}
		assert.Zero(t, g.spent("c"), "the abandoned call was never sent")
		assert.Equal(t, int64(1), g.spent("b"))
	})

	t.Run("handed the slot after giving up", func(t *testing.T) {
		t.Parallel()
		g := newBatchRig(t)
		a := g.allow(context.Background(), "a")
		<-g.gate.cmdIn
		ctxB := &endedCtx{Context: context.Background()}
		b := g.allow(ctxB, "b")
		queued(g.sw.allow, 1)
		c := g.allow(context.Background(), "c")
		queued(g.sw.allow, 2)
		ctxB.end(context.Canceled) // b's Done never fires: it wakes only when handed the slot

		close(g.gate.cmdGo) // a hands the slot to b
		close(g.gate.pipeGo)
		require.NoError(t, (<-a).err)
		ob := <-b
		require.ErrorIs(t, ob.err, context.Canceled)
		assert.False(t, ob.r.Allowed)
		oc := <-c
		require.NoError(t, oc.err, "b led the queue behind it before returning")
		assert.True(t, oc.r.Allowed)
		assert.Zero(t, g.spent("b"), "b reported nothing spent, so it was not sent")
		assert.Equal(t, int64(1), g.spent("c"))
	})
}

// endedCtx is a context whose Err reports an end that its Done channel
// never signals: it pins down the instant at which a waiting caller is
// woken by the hand-off of the slot while its context has already ended
// (a select that found both ready may pick either).
type endedCtx struct {
	context.Context
	err atomic.Pointer[error]
}

func (c *endedCtx) end(err error) { c.err.Store(&err) }

func (c *endedCtx) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}
