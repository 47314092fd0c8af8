package redislimit

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// pipeliner is implemented by go-redis clients that can pipeline
// (*redis.Client, *redis.ClusterClient, *redis.Ring, UniversalClient).
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

const maxBatch = 128

// The life of a queued call. It leaves callWaiting exactly once, by one
// compare-and-swap, and whoever wins decides its fate:
//
//	callWaiting → callAbandoned  the caller gave up: it is never sent, and the
//	                             caller reports that nothing was spent
//	callWaiting → callSent       a leader took it into a pipeline: it runs, and
//	                             the caller waits for its real reply
//	callWaiting → callLeader     the slot is handed to it: the caller sends it
//	                             (or, if its ctx has ended, gives up unsent)
//
// So a call that was reported as "nothing spent" is never executed, and a
// call that was executed is never reported as "nothing spent".
const (
	callWaiting int32 = iota
	callAbandoned
	callSent
	callLeader
)

type scriptCall struct {
	key   string
	args  []any
	v     any
	err   error
	state atomic.Int32
	done  chan struct{}
}

// batcher runs one script for many concurrent callers, coalescing the
// calls that arrive while up to max pipelines are in flight into the next
// pipeline ("group commit"). A caller that finds a free slot sends its call
// at once (no added latency when idle); callers that queue behind a busy
// slot are sent together in one round trip. Each call is still one
// EVALSHA of its own script on its own key: batching changes the transport,
// not the atomicity or the result.
type batcher struct {
	sc     redis.Scripter
	pl     pipeliner // nil: no batching
	script *redis.Script
	max    int

	mu      sync.Mutex
	queue   []*scriptCall
	running int
}

func newBatcher(sc redis.Scripter, script *redis.Script, maxInflight int) *batcher {
	b := &batcher{sc: sc, script: script, max: maxInflight}
	if p, ok := sc.(pipeliner); ok && maxInflight > 0 {
		b.pl = p
	}
	return b
}

func (b *batcher) run(ctx context.Context, key string, args ...any) (any, error) {
	if b.pl == nil {
		return b.script.Run(ctx, b.sc, []string{key}, args...).Result()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &scriptCall{key: key, args: args, done: make(chan struct{}, 1)}
	b.mu.Lock()
	if b.running < b.max {
		b.running++
		b.mu.Unlock()
		c.state.Store(callSent) // never queued: nobody else sees it
		b.lead(ctx, c)
		return c.v, c.err
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callWaiting, callAbandoned) {
			return nil, ctx.Err() // never sent, never will be: nothing spent
		}
		<-c.done // taken into a pipeline or handed the slot first
	}
	if c.state.Load() == callLeader {
		if err := ctx.Err(); err != nil {
			// Handed the slot after giving up: send the others, not this call.
			b.lead(ctx, nil)
			return nil, err
		}
		b.lead(ctx, c)
	}
	return c.v, c.err
}

// lead sends mine (nil: none) plus the calls queued behind it as one
// pipeline, then hands the slot to the next waiting caller (or frees it).
// A queued call is taken only by winning its callWaiting → callSent swap, so
// a caller that already abandoned it is skipped, and one that has not yet
// can no longer do so.
func (b *batcher) lead(ctx context.Context, mine *scriptCall) {
	b.mu.Lock()
	batch := make([]*scriptCall, 0, min(len(b.queue)+1, maxBatch))
	if mine != nil {
		batch = append(batch, mine)
	}
	taken := 0
	for taken < len(b.queue) && len(batch) < maxBatch {
		c := b.queue[taken]
		taken++
		if c.state.CompareAndSwap(callWaiting, callSent) {
			batch = append(batch, c)
		}
		// else abandoned before being sent: drop it
	}
	rest := copy(b.queue, b.queue[taken:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.mu.Unlock()

	if len(batch) > 0 {
		b.exec(context.WithoutCancel(ctx), batch)
		for _, c := range batch {
			if c != mine {
				c.done <- struct{}{}
			}
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.queue) > 0 {
		c := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		if c.state.CompareAndSwap(callWaiting, callLeader) {
			c.done <- struct{}{}
			return
		}
		// abandoned before being sent: drop it
	}
	b.running--
}

// exec runs batch and stores each call's reply in it.
func (b *batcher) exec(ctx context.Context, batch []*scriptCall) {
	if len(batch) == 1 {
		c := batch[0]
		c.v, c.err = b.script.Run(ctx, b.sc, []string{c.key}, c.args...).Result()
		return
	}
	pipe := b.pl.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	sha := b.script.Hash()
	for i, c := range batch {
		cmds[i] = pipe.EvalSha(ctx, sha, []string{c.key}, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range batch {
		c.v, c.err = cmds[i].Result()
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
			// script cache flushed: Run loads it (EVAL) and retries this call.
			c.v, c.err = b.script.Run(ctx, b.sc, []string{c.key}, c.args...).Result()
		}
	}
}
