package order

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order/internal/dbx"
)

// Consumer turns order records into orders; it is the processing core of a
// Kafka consumer, with no Kafka client in it: orderkafka.Handler (a
// sarama.ConsumerGroupHandler) collects a claim's records and hands them to
// [Consumer.Consume], then marks the offset of the last record done.
//
// Consume writes up to [WithBatchSize] messages with [Processor.Process] —
// one DB transaction, one stock update per activity — and only after the
// commit releases the reservations of FAILED outcomes, records results,
// schedules cancellations and notifies; then the records count as done.
// A crash anywhere before the caller marks them redelivers the batch and
// the dedup rows answer it: delivery is at least once, effects are exactly
// once.
//
// Failures:
//   - undecodable or invalid message: a [PermanentError], sent to the
//     [DeadLetter] at once;
//   - the batch fails while the DB health check fails (DB down): back off
//     and retry, forever, counting nothing, settling nothing;
//   - the batch fails while the DB is healthy: each message is retried on
//     its own; one that fails [WithMaxAttempts] times is poison and goes to
//     the dead-letter sink; its neighbours commit. A [TxHook] error is such
//     a failure (a [PermanentError] from the hook dead-letters the message
//     at its first attempt on its own);
//   - business refusals (sold out in the DB, duplicate, unknown activity)
//     are FAILED outcomes, not errors: the reservation is released.
//
// A Consumer may serve many claims at once.
type Consumer struct {
	p   *Processor
	rel Releaser
	o   options

	batches, batchMsgs, oneByOne, deadLettered, retries, releaseFailures atomic.Int64
}

// NewConsumer returns a consumer writing through p and releasing FAILED
// reservations through rel. Options: [WithBatchSize], [WithMaxAttempts],
// [WithBackoff], [WithDeadLetter], [WithResults], [WithNotifier],
// [WithScheduler], [WithHealthCheck], [WithReleaseAttempts], [WithOnError],
// [WithLogger], [WithObserver], [WithContextFrom], [WithClock].
func NewConsumer(p *Processor, rel Releaser, opts ...ConsumerOption) (*Consumer, error) {
	if p == nil || rel == nil {
		return nil, fmt.Errorf("%w: NewConsumer needs a processor and a releaser", ErrInvalidConfig)
	}
	o, err := buildOptions(opts, ConsumerOption.applyConsumer)
	if err != nil {
		return nil, err
	}
	if o.batchSize < 1 || o.maxAttempts < 1 || o.backoffMin <= 0 || o.backoffMax < o.backoffMin || o.releaseTry < 1 {
		return nil, fmt.Errorf("%w: invalid consumer options", ErrInvalidConfig)
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

// BatchSize returns the most records one transaction writes
// ([WithBatchSize]): how many a transport should collect before it calls
// Consume.
func (c *Consumer) BatchSize() int { return c.o.batchSize }

// Consume writes recs, in their order, [WithBatchSize] records per
// transaction, and returns how many of them, from the first, are done:
// committed with their post-commit work run, or dead-lettered. The caller
// marks (commits) the offset of recs[done-1], never beyond. Consume
// returns an error only when it cannot go on: ctx ended (while the DB is
// down it retries until then), or a poison record has nowhere to go
// ([ErrNoDeadLetter]).
func (c *Consumer) Consume(ctx context.Context, recs []Record) (done int, err error) {
	for len(recs) > 0 {
		n := min(len(recs), c.o.batchSize)
		if err := c.consumeBatch(ctx, recs[:n]); err != nil {
			return done, err
		}
		done += n
		recs = recs[n:]
	}
	return done, nil
}

// consumeBatch decodes recs, dead-letters those that do not decode, and
// writes the others.
func (c *Consumer) consumeBatch(ctx context.Context, recs []Record) error {
	msgs := make([]Message, 0, len(recs))
	src := make([]Record, 0, len(recs))
	for _, rec := range recs {
		m, err := Decode(rec.Value)
		if err != nil {
			if err := c.deadLetter(ctx, rec, err); err != nil {
				return err
			}
			continue
		}
		if len(rec.Headers) > 0 {
			m.Headers = rec.Headers
		}
		msgs = append(msgs, m)
		src = append(src, rec)
	}
	if len(msgs) == 0 {
		return nil
	}
	return c.write(ctx, msgs, src)
}

// write writes msgs (decoded from src) in one transaction, or — when that
// fails while the DB is healthy, or for a single message — one by one.
func (c *Consumer) write(ctx context.Context, msgs []Message, src []Record) error {
	if c.o.batchSize > 1 && len(msgs) > 1 {
		written, err := c.writeBatch(ctx, msgs)
		if err != nil || written {
			return err
		}
	}
	for i, m := range msgs {
		if err := c.writeOne(ctx, m, src[i]); err != nil {
			return err
		}
	}
	return nil
}

// writeBatch writes msgs in one transaction, retrying with backoff while
// the DB is down. written is false when the batch fails although the DB is
// healthy: the caller isolates the culprit one message at a time.
func (c *Consumer) writeBatch(ctx context.Context, msgs []Message) (written bool, err error) {
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
			return true, nil
		}
		c.retries.Add(1)
		if c.o.observer != nil {
			c.o.observe(bctx, observe.Event{Stage: StageConsume, Outcome: "error", Activity: batchActivity(msgs), Value: float64(len(msgs)), Err: err}, start)
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		c.report(ctx, err)
		if c.o.health(ctx) == nil {
			return false, nil // the DB is up but the batch fails: isolate the culprit
		}
		if err := c.sleep(ctx, attempt); err != nil {
			return false, err
		}
	}
}

// writeOne writes m in its own transaction, retrying with backoff; a
// permanent failure, or [WithMaxAttempts] failures while the DB is healthy,
// send its record to the dead-letter sink.
func (c *Consumer) writeOne(ctx context.Context, m Message, rec Record) error {
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
			return nil
		}
		c.retries.Add(1)
		if c.o.observer != nil {
			c.o.observe(mctx, observe.Event{Stage: StageConsume, Outcome: "error", Activity: m.ActivityID, Value: 1, Err: err}, start)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.report(ctx, err)
		if isPermanent(err) {
			return c.deadLetter(ctx, rec, err)
		}
		if c.o.health(ctx) == nil {
			counted++
			if counted >= c.o.maxAttempts {
				return c.deadLetter(ctx, rec, Permanent(fmt.Errorf("after %d attempts: %w", counted, err)))
			}
		}
		if err := c.sleep(ctx, attempt); err != nil {
			return err
		}
	}
}

// after runs the post-commit effects of outcomes. None of them may undo the
// commit: a release that keeps failing is left to the Reconciler, a result
// not written is answered from the DB, a cancellation not scheduled is found
// by the Canceller's DB scan.
func (c *Consumer) after(ctx context.Context, outs []Outcome) {
	bg := context.WithoutCancel(ctx)
	for _, o := range outs {
		if !o.release() {
			continue
		}
		// A cart's reservation is its lines': "<id>#<i>" in each line's activity.
		type resv struct{ activity, id string }
		rs := []resv{{o.Message.ActivityID, o.Message.ReservationID}}
		if len(o.Message.Lines) > 0 {
			rs = rs[:0]
			for i, l := range o.Message.Lines {
				rs = append(rs, resv{l.ActivityID, lineReservation(o.Message.ReservationID, i)})
			}
		}
		for _, r := range rs {
			var err error
			for i := 0; i < c.o.releaseTry; i++ {
				if err = c.rel.Release(bg, r.activity, r.id); err == nil {
					break
				}
				if i+1 < c.o.releaseTry {
					_ = c.sleep(bg, i)
				}
			}
			if err != nil {
				c.releaseFailures.Add(1)
				c.report(ctx, fmt.Errorf("order: release %s (left to the reconciler): %w", r.id, err))
			}
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
	now := c.p.o.clock.Now()
	rs := make([]Result, len(outs))
	for i, o := range outs {
		rs[i] = o.result()
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

// batchScheduler is implemented by status.Canceller: one ZADD per batch.
type batchScheduler interface {
	ScheduleMany(ctx context.Context, orders map[string]time.Time) error
}

func (c *Consumer) deadLetter(ctx context.Context, km Record, cause error) error {
	if c.o.deadLetter == nil {
		return fmt.Errorf("%w: %s/%d/%d: %v", ErrNoDeadLetter, km.Topic, km.Partition, km.Offset, cause)
	}
	for attempt := 0; ; attempt++ {
		err := c.o.deadLetter.DeadLetter(ctx, km, cause)
		if err == nil {
			c.deadLettered.Add(1)
			if c.o.observer != nil {
				c.o.observer.Observe(ctx, observe.Event{Stage: StageConsume, Outcome: "dead_letter", Value: 1})
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
	return dbx.SleepBackoff(ctx, c.o.backoffMin, c.o.backoffMax, attempt)
}

// observeStart is the start of an observed consumer operation: the zero
// time, without reading the clock, when there is no observer.
func (c *Consumer) observeStart() time.Time {
	if c.o.observer == nil {
		return time.Time{}
	}
	return time.Now()
}

// observeOutcomes reports one committed consumer transaction; callers
// check c.o.observer first.
func (c *Consumer) observeOutcomes(ctx context.Context, start time.Time, outs []Outcome) {
	ok, failed := 0, 0
	for _, out := range outs {
		if out.Status == StatusFailed {
			failed++
		} else {
			ok++
		}
	}
	msgs := make([]Message, len(outs))
	for i := range outs {
		msgs[i] = outs[i].Message
	}
	act := batchActivity(msgs)
	if ok > 0 {
		c.o.observe(ctx, observe.Event{Stage: StageConsume, Outcome: observe.OK, Activity: act, Value: float64(ok)}, start)
	}
	if failed > 0 {
		c.o.observe(ctx, observe.Event{Stage: StageConsume, Outcome: "failed", Activity: act, Value: float64(failed)}, start)
	}
}

// batchActivity is the activity of msgs, or "" when they concern several.
func batchActivity(msgs []Message) string {
	if len(msgs) == 0 {
		return ""
	}
	act := msgs[0].ActivityID
	for _, m := range msgs[1:] {
		if m.ActivityID != act {
			return ""
		}
	}
	return act
}

// msgContext is m's context: [WithContextFrom] applied to its headers.
func (c *Consumer) msgContext(ctx context.Context, m Message) context.Context {
	if c.o.contextFrom == nil {
		return ctx
	}
	if mctx := c.o.contextFrom(ctx, m.Headers); mctx != nil {
		return mctx
	}
	return ctx
}
