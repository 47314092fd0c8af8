package orderkafka

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/order"
)

// Handler is the sarama.ConsumerGroupHandler of the order topic: pass it to
// sarama.ConsumerGroup.Consume with a config from [SaramaConfig]. It
// collects up to the consumer's batch size of a claim's records (waiting
// at most [WithLinger] for more), hands them to order.Consumer.Consume —
// which writes them, runs the post-commit work and dead-letters poison —
// and marks the offset of the last record the consumer reports done.
// Marked offsets are committed by sarama's auto-commit (see
// [SaramaConfig]); the synchronous session.Commit is never called in the
// loop.
//
// ConsumeClaim returns when the session ends (rebalance, Close) or when
// the consumer cannot go on (a poison message with nowhere to go:
// order.ErrNoDeadLetter). A Handler may serve many claims at once.
type Handler struct {
	c      *order.Consumer
	linger time.Duration
}

var _ sarama.ConsumerGroupHandler = (*Handler)(nil)

// NewHandler returns the handler feeding c. Options: [WithLinger]. A nil c
// fails with order.ErrInvalidConfig.
func NewHandler(c *order.Consumer, opts ...HandlerOption) (*Handler, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: NewHandler needs a consumer", order.ErrInvalidConfig)
	}
	o := handlerOptions{linger: 5 * time.Millisecond}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	return &Handler{c: c, linger: o.linger}, nil
}

// Setup implements sarama.ConsumerGroupHandler.
func (h *Handler) Setup(sarama.ConsumerGroupSession) error { return nil }

// Cleanup implements sarama.ConsumerGroupHandler. Marked offsets are
// committed by sarama when the session is released.
func (h *Handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim implements sarama.ConsumerGroupHandler.
func (h *Handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	col := newCollector(claim.Messages(), h.c.BatchSize(), h.linger)
	defer col.stop()
	for {
		batch, closed := col.next(ctx)
		if len(batch) == 0 {
			return nil // session over or claim closed
		}
		recs := make([]order.Record, len(batch))
		for i, m := range batch {
			recs[i] = recordOf(m)
		}
		done, err := h.c.Consume(ctx, recs)
		if done > 0 {
			sess.MarkMessage(batch[done-1], "")
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // session over: the next owner gets the unmarked rest
			}
			return err
		}
		if closed {
			return nil
		}
	}
}

// collector takes batches from a claim: up to size messages, waiting at
// most linger for more once the first one arrived.
type collector struct {
	in     <-chan *sarama.ConsumerMessage
	size   int
	linger time.Duration
	timer  *time.Timer
	batch  []*sarama.ConsumerMessage
}

func newCollector(in <-chan *sarama.ConsumerMessage, size int, linger time.Duration) *collector {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &collector{in: in, size: size, linger: linger, timer: t, batch: make([]*sarama.ConsumerMessage, 0, size)}
}

func (c *collector) stop() { c.timer.Stop() }

// next returns the next batch (empty when ctx ended or the claim closed
// before a first message) and whether the claim is closed.
func (c *collector) next(ctx context.Context) (batch []*sarama.ConsumerMessage, closed bool) {
	c.batch = c.batch[:0]
	select {
	case <-ctx.Done():
		return nil, false
	case m, ok := <-c.in:
		if !ok {
			return nil, true
		}
		c.batch = append(c.batch, m)
	}
	for len(c.batch) < c.size {
		m, ok, more := c.take(ctx)
		if !ok {
			return c.batch, true
		}
		if !more {
			break
		}
		c.batch = append(c.batch, m)
	}
	return c.batch, false
}

// take returns a buffered message at once, or waits up to linger for one.
// ok is false when the claim closed; more is false when none came.
func (c *collector) take(ctx context.Context) (m *sarama.ConsumerMessage, ok, more bool) {
	select {
	case m, ok := <-c.in:
		return m, ok, ok
	default:
	}
	if c.linger <= 0 {
		return nil, true, false
	}
	c.timer.Reset(c.linger)
	defer c.timer.Stop()
	select {
	case m, ok := <-c.in:
		return m, ok, ok
	case <-c.timer.C:
		return nil, true, false
	case <-ctx.Done():
		return nil, true, false
	}
}
