package orderkafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// Batching (WithBatching).
//
// Concurrent Publish calls join a batch: the first opens it and arms a timer
// of one linger; the batch is sealed when it holds maxBatch messages (the
// caller that fills it sends it, on its own goroutine) or when the linger
// has passed (the timer sends it), or by Close. Sealing takes it out of the
// producer under the lock, so a message that comes later opens the next
// batch: none is lost, none is added to a batch already on its way. A
// sealed batch is one SyncProducer.SendMessages call.
//
// The life of a message in a batch. It leaves pubWaiting exactly once, by
// one compare-and-swap, and whoever wins decides its fate:
//
//	pubWaiting → pubAbandoned  the caller's context ended first: the message
//	                           is never sent, and Publish returns the
//	                           context's error
//	pubWaiting → pubSent       the sender took it into SendMessages: the
//	                           caller waits for the broker's answer whatever
//	                           its context does (SendMessages cannot be
//	                           interrupted, like SendMessage today)
//
// So a Publish that returns its context's error never sent its message (no
// message is both reported cancelled and written later), and the batcher
// sends no message twice. Any other error means what it means for one
// SendMessage: not acknowledged (it may still have been written).

// Message states in a batch.
const (
	pubWaiting int32 = iota
	pubAbandoned
	pubSent
)

// Limits and defaults of [WithBatching].
const (
	maxPublishBatch     = 4096
	defaultPublishBatch = 256
)

// batcher gathers concurrent Publish calls into SendMessages calls.
type batcher struct {
	sp      sarama.SyncProducer
	produce func(ctx context.Context, msgs []*sarama.ProducerMessage, send func() error) error // reports the call
	linger  time.Duration
	max     int

	mu     sync.Mutex
	open   *pubBatch // the batch still accepting messages, or nil
	closed bool      // after Close: Publish sends one by one
	sends  sync.WaitGroup
}

// pubBatch is one SendMessages call in the making. calls is appended to
// under the batcher's lock until the batch is sealed, and only read by the
// sender after that.
type pubBatch struct {
	calls  []*pubCall
	sealed bool // under the batcher's lock
	timer  *time.Timer
	done   chan struct{} // closed when every sent message has its answer
}

type pubCall struct {
	pm    *sarama.ProducerMessage
	state atomic.Int32
	err   error // written by the sender before done is closed
}

// enqueue adds pm to the open batch and returns the call and its batch, or
// nil when the batcher is closed (the caller sends alone).
func (b *batcher) enqueue(pm *sarama.ProducerMessage) (*pubCall, *pubBatch) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil
	}
	pb := b.open
	if pb == nil {
		pb = &pubBatch{calls: make([]*pubCall, 0, min(b.max, 64)), done: make(chan struct{})}
		b.open = pb
		b.sends.Add(1) // done by send, whoever seals pb
		pb.timer = time.AfterFunc(b.linger, func() { b.flush(pb) })
	}
	c := &pubCall{pm: pm}
	pb.calls = append(pb.calls, c)
	full := len(pb.calls) == b.max
	if full {
		b.seal(pb)
	}
	b.mu.Unlock()
	if full {
		pb.timer.Stop()
		b.send(pb)
	}
	return c, pb
}

// seal takes pb out of the open slot; the caller holds b.mu.
func (b *batcher) seal(pb *pubBatch) {
	pb.sealed = true
	if b.open == pb {
		b.open = nil
	}
}

// flush seals pb, if nobody did yet, and sends it (the timer's path).
func (b *batcher) flush(pb *pubBatch) {
	b.mu.Lock()
	if pb.sealed {
		b.mu.Unlock()
		return
	}
	b.seal(pb)
	b.mu.Unlock()
	b.send(pb)
}

// close seals and sends the open batch, turns batching off and waits until
// every batch sent has its answers.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	pb := b.open
	if pb != nil {
		b.seal(pb)
	}
	b.mu.Unlock()
	if pb != nil {
		pb.timer.Stop()
		b.send(pb)
	}
	b.sends.Wait()
}

// send writes the messages of a sealed batch whose callers have not given
// up, in one SendMessages call, and gives every caller its own answer.
func (b *batcher) send(pb *pubBatch) {
	defer b.sends.Done()
	defer close(pb.done)
	sent := make([]*pubCall, 0, len(pb.calls))
	msgs := make([]*sarama.ProducerMessage, 0, len(pb.calls))
	for _, c := range pb.calls {
		if c.state.CompareAndSwap(pubWaiting, pubSent) {
			sent = append(sent, c)
			msgs = append(msgs, c.pm)
		}
	}
	if len(msgs) == 0 {
		return
	}
	err := b.produce(context.Background(), msgs, func() error { return b.sp.SendMessages(msgs) })
	if err == nil {
		return
	}
	var perrs sarama.ProducerErrors
	if !errors.As(err, &perrs) {
		for _, c := range sent { // the whole call failed: every message
			c.err = err
		}
		return
	}
	// One error per failed message; a message without one was acknowledged.
	// An error that names no message of the batch fails every message: a
	// message is answered "acknowledged" only when sarama says so.
	inBatch := make(map[*sarama.ProducerMessage]bool, len(msgs))
	for _, m := range msgs {
		inBatch[m] = true
	}
	failed := make(map[*sarama.ProducerMessage]error, len(perrs))
	for _, pe := range perrs {
		if pe == nil || !inBatch[pe.Msg] {
			for _, c := range sent {
				c.err = err
			}
			return
		}
		failed[pe.Msg] = pe.Err
		if pe.Err == nil {
			failed[pe.Msg] = pe
		}
	}
	for _, c := range sent {
		if e, ok := failed[c.pm]; ok {
			c.err = e
		}
	}
}

// validBatching checks the arguments of WithBatching (a zero maxBatch
// means the default).
func validBatching(linger time.Duration, maxBatch int) (int, error) {
	if maxBatch == 0 {
		maxBatch = defaultPublishBatch
	}
	switch {
	case linger < 0:
		return 0, fmt.Errorf("%w: batching linger %v must be >= 0", ErrInvalidConfig, linger)
	case maxBatch < 0 || maxBatch > maxPublishBatch:
		return 0, fmt.Errorf("%w: batching max batch %d must be in [0, %d]", ErrInvalidConfig, maxBatch, maxPublishBatch)
	}
	return maxBatch, nil
}
