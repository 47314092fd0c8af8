package order

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// Consumer turns order messages from Kafka into orders. It implements
// sarama.ConsumerGroupHandler: pass it to sarama.ConsumerGroup.Consume with
// a config from [SaramaConfig].
//
// ConsumeClaim collects up to [WithBatchSize] messages (waiting at most
// [WithLinger] for more), writes them with [Processor.Process] — one DB
// transaction, one stock update per activity — and only after the commit
// releases the reservations of FAILED outcomes, records results, schedules
// cancellations, notifies, and marks the last offset of the batch. Marked
// offsets are committed by sarama's auto-commit (see [SaramaConfig]); the
// synchronous session.Commit is never called in the loop. A crash anywhere
// before the mark redelivers the batch and the dedup rows answer it:
// delivery is at least once, effects are exactly once.
//
// Failures:
//   - undecodable or invalid message: a [PermanentError], sent to the
//     [DeadLetter] at once;
//   - the batch fails while the DB health check fails (DB down): back off
//     and retry, forever, counting nothing, marking nothing;
//   - the batch fails while the DB is healthy: each message is retried on
//     its own; one that fails [WithMaxAttempts] times is poison and goes to
//     the dead-letter sink; its neighbours commit. A [TxHook] error is such
//     a failure (a [PermanentError] from the hook dead-letters the message
//     at its first attempt on its own);
//   - business refusals (sold out in the DB, duplicate, unknown activity)
//     are FAILED outcomes, not errors: the reservation is released.
//
// ConsumeClaim returns when the session ends (rebalance, Close) or when a
// poison message has nowhere to go ([ErrNoDeadLetter]). A Consumer may
// serve many claims at once.
type Consumer struct {
	p   *Processor
	rel Releaser
	o   options

	batches, batchMsgs, oneByOne, deadLettered, retries, releaseFailures atomic.Int64
}

// Stats are counters of a [Consumer] since it was created.
type Stats struct {
	Batches         int64 // batch transactions committed
	BatchMessages   int64 // messages written by them
	OneByOne        int64 // messages written on the per-message path
	DeadLettered    int64 // messages sent to the dead-letter sink
	Retries         int64 // failed attempts that were retried
	ReleaseFailures int64 // releases left to the Reconciler
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	return Stats{Batches: c.batches.Load(), BatchMessages: c.batchMsgs.Load(), OneByOne: c.oneByOne.Load(),
		DeadLettered: c.deadLettered.Load(), Retries: c.retries.Load(), ReleaseFailures: c.releaseFailures.Load()}
}

var _ sarama.ConsumerGroupHandler = (*Consumer)(nil)

// NewConsumer returns a consumer writing through p and releasing FAILED
// reservations through rel. Options: [WithBatchSize], [WithLinger],
// [WithMaxAttempts], [WithBackoff], [WithDeadLetter], [WithResults],
// [WithNotifier], [WithScheduler], [WithHealthCheck], [WithReleaseAttempts],
// [WithOnError], [WithLogger], [WithObserver], [WithContextFrom].
func NewConsumer(p *Processor, rel Releaser, opts ...Option) (*Consumer, error) {
	if p == nil || rel == nil {
		return nil, fmt.Errorf("%w: NewConsumer needs a processor and a releaser", ErrInvalidOption)
	}
	o := buildOptions(opts)
	if o.batchSize < 1 || o.maxAttempts < 1 || o.backoffMin <= 0 || o.backoffMax < o.backoffMin || o.releaseTry < 1 {
		return nil, fmt.Errorf("%w: invalid consumer options", ErrInvalidOption)
	}
	if o.health == nil {
		db := p.db
		o.health = func(ctx context.Context) error {
			sqlDB, err := db.DB()
			if err != nil {
				return err
			}
			return sqlDB.PingContext(ctx)
		}
	}
	return &Consumer{p: p, rel: rel, o: o}, nil
}

// Setup implements sarama.ConsumerGroupHandler.
func (c *Consumer) Setup(sarama.ConsumerGroupSession) error { return nil }

// Cleanup implements sarama.ConsumerGroupHandler. Marked offsets are
// committed by sarama when the session is released.
func (c *Consumer) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim implements sarama.ConsumerGroupHandler.
func (c *Consumer) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	batch := make([]*sarama.ConsumerMessage, 0, c.o.batchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, m)
		}
		closed := false
	fill:
		for len(batch) < c.o.batchSize {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					closed = true
					break fill
				}
				batch = append(batch, m)
				continue
			default:
			}
			if c.o.linger <= 0 {
				break
			}
			timer.Reset(c.o.linger)
			select {
			case m, ok := <-claim.Messages():
				timer.Stop()
				if !ok {
					closed = true
					break fill
				}
				batch = append(batch, m)
			case <-timer.C:
				break fill
			case <-ctx.Done():
				timer.Stop()
				break fill
			}
		}
		if err := c.handle(ctx, sess, batch); err != nil {
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

func (c *Consumer) handle(ctx context.Context, sess sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) error {
	msgs := make([]Message, 0, len(batch))
	src := make([]*sarama.ConsumerMessage, 0, len(batch))
	for _, km := range batch {
		m, err := Decode(km.Value)
		if err != nil {
			if err := c.deadLetter(ctx, km, err); err != nil {
				return err
			}
			continue
		}
		if len(km.Headers) > 0 {
			m.Headers = headersOf(km.Headers)
		}
		msgs = append(msgs, m)
		src = append(src, km)
	}
	if len(msgs) > 0 {
		if err := c.write(ctx, msgs, src); err != nil {
			return err
		}
	}
	last := batch[len(batch)-1]
	sess.MarkMessage(last, "")
	return nil
}

func (c *Consumer) write(ctx context.Context, msgs []Message, src []*sarama.ConsumerMessage) error {
	if c.o.batchSize > 1 && len(msgs) > 1 {
		bctx := c.msgContext(ctx, msgs[0]) // the batch's context: its first message's
		for attempt := 0; ; attempt++ {
			start := c.observeStart()
			outs, err := c.p.Process(bctx, msgs)
			if err == nil {
				c.batches.Add(1)
				c.batchMsgs.Add(int64(len(msgs)))
				c.after(bctx, outs)
				if c.o.observer != nil {
					c.observeOutcomes(bctx, start, outs)
				}
				return nil
			}
			c.retries.Add(1)
			if c.o.observer != nil {
				c.o.observe(bctx, Event{Stage: StageConsume, Outcome: "error", Activity: batchActivity(msgs), Value: float64(len(msgs)), Err: err}, start)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.report(ctx, err)
			if c.o.health(ctx) == nil {
				break // the DB is up but the batch fails: isolate the culprit
			}
			if err := c.sleep(ctx, attempt); err != nil {
				return err
			}
		}
	}
	for i, m := range msgs {
		counted := 0
		mctx := c.msgContext(ctx, m)
		for attempt := 0; ; attempt++ {
			start := c.observeStart()
			out, err := c.p.Handle(mctx, m)
			if err == nil {
				c.oneByOne.Add(1)
				c.after(mctx, []Outcome{out})
				if c.o.observer != nil {
					c.observeOutcomes(mctx, start, []Outcome{out})
				}
				break
			}
			c.retries.Add(1)
			if c.o.observer != nil {
				c.o.observe(mctx, Event{Stage: StageConsume, Outcome: "error", Activity: m.ActivityID, Value: 1, Err: err}, start)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.report(ctx, err)
			if IsPermanent(err) {
				if err := c.deadLetter(ctx, src[i], err); err != nil {
					return err
				}
				break
			}
			if c.o.health(ctx) == nil {
				counted++
				if counted >= c.o.maxAttempts {
					if err := c.deadLetter(ctx, src[i], Permanent(fmt.Errorf("after %d attempts: %w", counted, err))); err != nil {
						return err
					}
					break
				}
			}
			if err := c.sleep(ctx, attempt); err != nil {
				return err
			}
		}
	}
	return nil
}

// after runs the post-commit effects of outcomes. None of them may undo the
// commit: a release that keeps failing is left to the Reconciler, a result
// not written is answered from the DB, a cancellation not scheduled is found
// by the Canceller's DB scan.
func (c *Consumer) after(ctx context.Context, outs []Outcome) {
	bg := context.WithoutCancel(ctx)
	for _, o := range outs {
		if !o.Release() {
			continue
		}
		var err error
		for i := 0; i < c.o.releaseTry; i++ {
			if err = c.rel.Release(bg, o.Message.ActivityID, o.Message.ReservationID); err == nil {
				break
			}
			if i+1 < c.o.releaseTry {
				_ = c.sleep(bg, i)
			}
		}
		if err != nil {
			c.releaseFailures.Add(1)
			c.report(ctx, fmt.Errorf("order: release %s (left to the reconciler): %w", o.Message.ReservationID, err))
		}
	}
	if c.o.scheduler != nil {
		due := map[string]time.Time{}
		for _, o := range outs {
			if o.Status == StatusSuccess && !o.Duplicate {
				due[o.OrderNo] = o.ExpireTime
			}
		}
		if bs, ok := c.o.scheduler.(batchScheduler); ok && len(due) > 1 {
			if err := bs.ScheduleMany(bg, due); err != nil {
				c.report(ctx, err)
			}
		} else {
			for no, at := range due {
				if err := c.o.scheduler.Schedule(bg, no, at); err != nil {
					c.report(ctx, fmt.Errorf("order: schedule cancel %s: %w", no, err))
				}
			}
		}
	}
	if c.o.results == nil && c.o.notifier == nil {
		return
	}
	now := c.o.clock.Now()
	rs := make([]Result, len(outs))
	for i, o := range outs {
		rs[i] = o.Result()
		rs[i].At = now
	}
	if c.o.results != nil {
		if err := c.o.results.SetMany(bg, rs); err != nil {
			c.report(ctx, err)
		}
	}
	if c.o.notifier != nil {
		for _, r := range rs {
			c.o.notifier.Notify(bg, r)
		}
	}
}

// batchScheduler is implemented by [Canceller]: one ZADD per batch.
type batchScheduler interface {
	ScheduleMany(ctx context.Context, orders map[string]time.Time) error
}

func (c *Consumer) deadLetter(ctx context.Context, km *sarama.ConsumerMessage, cause error) error {
	if c.o.deadLetter == nil {
		return fmt.Errorf("%w: %s/%d/%d: %v", ErrNoDeadLetter, km.Topic, km.Partition, km.Offset, cause)
	}
	for attempt := 0; ; attempt++ {
		err := c.o.deadLetter.DeadLetter(ctx, km, cause)
		if err == nil {
			c.deadLettered.Add(1)
			if c.o.observer != nil {
				c.o.observer.Observe(ctx, Event{Stage: StageConsume, Outcome: "dead_letter", Value: 1})
			}
			c.o.logger.WarnContext(ctx, "order: message dead-lettered", "topic", km.Topic,
				"partition", km.Partition, "offset", km.Offset, "cause", cause)
			return nil
		}
		c.report(ctx, err)
		if err := c.sleep(ctx, attempt); err != nil {
			return err
		}
	}
}

func (c *Consumer) report(ctx context.Context, err error) {
	c.o.logger.WarnContext(ctx, "order: consumer", "err", err)
	if c.o.onError != nil {
		c.o.onError(ctx, err)
	}
}

func (c *Consumer) sleep(ctx context.Context, attempt int) error {
	return sleepBackoff(ctx, c.o.backoffMin, c.o.backoffMax, attempt)
}

// sleepBackoff waits min·2^attempt (capped at max) with ±25 % jitter.
func sleepBackoff(ctx context.Context, min, max time.Duration, attempt int) error {
	d := min
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	d = d*3/4 + time.Duration(rand.Int64N(int64(d)/2+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
