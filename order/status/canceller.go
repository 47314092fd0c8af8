package status

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/lifecycle"
	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// Client is what the package needs from Redis: scripts and HGETALL for
// [Results], the sorted set of the [Canceller]'s delay queue.
// *redis.Client, *redis.ClusterClient and *redis.Ring satisfy it.
type Client interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	ZAdd(ctx context.Context, key string, members ...redis.Z) *redis.IntCmd
	ZRangeByScore(ctx context.Context, key string, opt *redis.ZRangeBy) *redis.StringSliceCmd
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
}

// Canceller owns the life of an order after it is written: payment
// ([Canceller.Pay], by provider reference [Canceller.PayRef]), refund
// ([Canceller.Refund]) and the unpaid cancellation ([Canceller.Cancel]), run at
// expiry by a Redis delay queue (a sorted set of order numbers scored by
// expiry) with a periodic DB scan as backstop — a queue entry lost to a
// crash, or never scheduled, is still found by the scan.
//
// Pay and Cancel are compare-and-set updates of the status column, so a
// payment racing a cancellation ends as exactly one of them. Cancel restores
// the DB stock in the same transaction, then releases the Redis reservation
// through the [order.Releaser] (its ReleaseOrder when it implements
// [OrderReleaser]; idempotent; a failed release is retried by the next
// Cancel of the same order, which re-issues it).
//
// Safe for concurrent use, by several instances too. Background work runs
// only inside [Canceller.Run]; stop it with ctx or [Canceller.Close].
type Canceller struct {
	db           *gorm.DB
	rdb          Client
	rel          order.Releaser
	o            options
	restoreStock string // UPDATE activity SET stock = stock + ? WHERE id = ?
	w            lifecycle.Worker
}

var _ order.Scheduler = (*Canceller)(nil)

// NewCanceller returns a canceller. rdb may be nil: then Schedule is a
// no-op and only the DB scan cancels. Options: [WithClock], [WithKeyPrefix],
// [WithPollInterval], [WithScanInterval], [WithScanBatch], [WithBackoff],
// [WithOnPayCancelled], [WithOnPayConflict], [WithRefundHook],
// [WithOnError], [WithLogger], [WithTables], [WithObserver].
func NewCanceller(db *gorm.DB, rdb Client, rel order.Releaser, opts ...CancellerOption) (*Canceller, error) {
	if db == nil || rel == nil {
		return nil, fmt.Errorf("%w: NewCanceller needs a db and a releaser", order.ErrInvalidConfig)
	}
	o, err := buildOptions(opts, CancellerOption.applyCanceller)
	if err != nil {
		return nil, err
	}
	if o.poll <= 0 || o.scan <= 0 || o.scanBatch < 1 || o.backoffMin <= 0 {
		return nil, fmt.Errorf("%w: invalid canceller options", order.ErrInvalidConfig)
	}
	restore := "UPDATE " + dbx.QuoteIdent(db, o.tables.Activity) + " SET stock = stock + ? WHERE id = ?"
	return &Canceller{db: db, rdb: rdb, rel: rel, o: o, restoreStock: restore}, nil
}

// Schedule queues orderNo for cancellation at at (if still unpaid then).
// Scheduling again replaces the time (a plain ZADD). Implements [order.Scheduler].
func (c *Canceller) Schedule(ctx context.Context, orderNo string, at time.Time) error {
	if c.rdb == nil {
		return nil
	}
	if err := c.rdb.ZAdd(ctx, cancelQueueKey(c.o.prefix), redis.Z{Score: float64(at.UnixMilli()), Member: orderNo}).Err(); err != nil {
		return fmt.Errorf("order: schedule %s: %w", orderNo, err)
	}
	return nil
}

var errCASLost = errors.New("order: status changed")

// ScheduleMany queues many orders in one ZADD; the [order.Consumer] uses it for a
// batch when its [order.Scheduler] has it.
func (c *Canceller) ScheduleMany(ctx context.Context, orders map[string]time.Time) error {
	if c.rdb == nil || len(orders) == 0 {
		return nil
	}
	zs := make([]redis.Z, 0, len(orders))
	for no, at := range orders {
		zs = append(zs, redis.Z{Score: float64(at.UnixMilli()), Member: no})
	}
	if err := c.rdb.ZAdd(ctx, cancelQueueKey(c.o.prefix), zs...).Err(); err != nil {
		return fmt.Errorf("order: schedule %d orders: %w", len(orders), err)
	}
	return nil
}

func statusErr(status string) error {
	switch status {
	case order.OrderPaid:
		return ErrAlreadyPaid
	case order.OrderCancelled:
		return ErrAlreadyCancelled
	case order.OrderRefunded:
		return ErrAlreadyRefunded
	default:
		return fmt.Errorf("order: unexpected status %q", status)
	}
}

func (c *Canceller) find(tx *gorm.DB, orderNo string) (order.Order, error) {
	var rows []order.Order
	if err := tx.Table(c.o.tables.Order).Where("order_no = ?", orderNo).Limit(1).Find(&rows).Error; err != nil {
		return order.Order{}, fmt.Errorf("order: find %s: %w", orderNo, err)
	}
	if len(rows) == 0 {
		return order.Order{}, ErrOrderNotFound
	}
	return rows[0], nil
}

// Cancel moves a CREATED order to CANCELLED (CAS), frees its (user,
// activity) slot and restores the DB stock in one transaction, then
// releases the Redis reservation. It is the explicit cancellation (the
// user or an operator asks), so it does not look at expire_time; the
// unpaid cancellation ([Canceller.CancelDue], [Canceller.ScanExpired] and
// [Canceller.Pay] on an expired order) cancels only an order whose
// expire_time has passed. It returns nil when this call cancelled the
// order; [ErrAlreadyCancelled] when it was cancelled before (the release
// is re-issued, idempotently); [ErrAlreadyPaid]; [ErrOrderNotFound]; or an
// infrastructure error (nothing changed, or — if it says so with
// [ErrReleasePending] — cancelled but not yet released: call Cancel again).
func (c *Canceller) Cancel(ctx context.Context, orderNo string) error {
	return c.cancelOrder(ctx, orderNo, c.o.clock.Now(), false)
}

// txAttempts bounds the runs of one transaction of Cancel, PayRef and
// Refund: a concurrent report of the same payment, a CAS lost to a
// payment, or a deadlock the database broke by rolling one back (InnoDB
// does under concurrent payments of one order) is run again.
const txAttempts = 32

// notDueError reports that the unpaid cancellation found the order CREATED
// and its expire_time, the truth, still ahead: a delay-queue entry scored
// early (a skewed or buggy scheduler) or an expiry moved later.
type notDueError struct{ expire time.Time }

func (e *notDueError) Error() string {
	return "order: not expired until " + e.expire.UTC().Format(time.RFC3339Nano)
}

// cancelOrder is Cancel at now; with expiredOnly the CAS also requires
// expire_time <= now, and a CREATED order not yet expired gives a
// *notDueError and changes nothing.
func (c *Canceller) cancelOrder(ctx context.Context, orderNo string, now time.Time, expiredOnly bool) (cerr error) {
	var o order.Order
	if c.o.observer != nil {
		start := time.Now()
		defer func() {
			c.observeCancel(ctx, start, o.ActivityID, cerr)
		}()
	}
	var err error
	for attempt := range txAttempts { // a deadlock the database broke by rolling this one back: run it again
		if attempt > 0 {
			if serr := dbx.SleepBackoff(ctx, time.Millisecond, 100*time.Millisecond, attempt); serr != nil {
				break
			}
		}
		err = c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var err error
			o, err = c.cancelTx(tx, orderNo, now, expiredOnly)
			return err
		})
		if !dbx.IsRetryable(err) {
			break
		}
	}
	if errors.Is(err, errCASLost) {
		// Not CREATED (or gone, or not expired): read the committed state
		// outside the transaction.
		if o, err = c.find(c.db.WithContext(ctx), orderNo); err == nil {
			if o.Status == order.OrderCreated && expiredOnly {
				return &notDueError{expire: o.ExpireTime}
			}
			err = statusErr(o.Status)
		}
	}
	switch {
	case err == nil, errors.Is(err, ErrAlreadyCancelled):
		if rerr := c.release(context.WithoutCancel(ctx), o); rerr != nil {
			return errors.Join(err, fmt.Errorf("%w: order %s, reservation %s: %w", ErrReleasePending, orderNo, o.ReservationID, rerr))
		}
		return err
	case errors.Is(err, ErrAlreadyPaid), errors.Is(err, ErrOrderNotFound), errors.Is(err, ErrAlreadyRefunded):
		return err
	default:
		return fmt.Errorf("order: cancel %s: %w", orderNo, err)
	}
}

// cancelTx is the transaction of a cancellation: the CAS CREATED →
// CANCELLED (with expiredOnly, only once expire_time <= now), the slot
// freed and the DB stock restored; errCASLost when the CAS changed
// nothing.
func (c *Canceller) cancelTx(tx *gorm.DB, orderNo string, now time.Time, expiredOnly bool) (order.Order, error) {
	// CAS first: under REPEATABLE READ a status read before the update
	// could be a stale snapshot.
	q := tx.Table(c.o.tables.Order).Where("order_no = ? AND status = ?", orderNo, order.OrderCreated)
	if expiredOnly {
		q = q.Where("expire_time <= ?", now)
	}
	res := q.Updates(map[string]any{"status": order.OrderCancelled, "cancel_time": now, "live_slot": nil, "updated_at": now})
	if res.Error != nil {
		return order.Order{}, res.Error
	}
	if res.RowsAffected == 0 {
		return order.Order{}, errCASLost
	}
	o, err := c.find(tx, orderNo)
	if err != nil {
		return o, err
	}
	if hasLines(o) {
		// Every line still following the order is cancelled with it.
		if o.Lines, err = liveLines(tx, c.o.tables.Line, orderNo); err != nil {
			return o, err
		}
		if err := settleLines(tx, c.o.tables.Line, o.Lines, order.OrderCancelled, "", now); err != nil {
			return o, err
		}
		return o, restoreLines(tx, c.restoreStock, o.Lines)
	}
	return o, tx.Exec(c.restoreStock, o.Qty, o.ActivityID).Error
}

// release gives the cancelled order's reservation back, through
// [OrderReleaser] when the Releaser implements it. For an order with lines
// it gives back the reservation of every line cancelled, or refunded with
// a restock to the sale (each as the order of its line: lineOrder), all
// of them however many were released before: a release is idempotent.
func (c *Canceller) release(ctx context.Context, o order.Order) error {
	if !hasLines(o) {
		return c.releaseOne(ctx, o)
	}
	ls, err := readLines(c.db.WithContext(ctx), c.o.tables.Line, o.OrderNo)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range ls {
		if releasable(l) {
			if err := c.releaseOne(ctx, lineOrder(o, l)); err != nil {
				errs = append(errs, fmt.Errorf("line %d (%s): %w", l.LineNo, l.ReservationID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// releaseOne gives one reservation back.
func (c *Canceller) releaseOne(ctx context.Context, o order.Order) error {
	if or, ok := c.rel.(OrderReleaser); ok {
		return or.ReleaseOrder(ctx, o)
	}
	return c.rel.Release(ctx, o.ActivityID, o.ReservationID)
}

// Pay moves a CREATED, unexpired order to PAID (CAS). It returns nil when
// this call paid the order; [ErrAlreadyPaid] for a repeated payment (treat
// as success); [ErrOrderCancelled] when the order was cancelled or its
// payment window had passed (it is cancelled now) — the refund hook
// ([WithOnPayCancelled]) was called and the money must go back;
// [ErrOrderNotFound]; or an infrastructure error.
//
// When Pay itself cancels an expired order and the Redis release fails,
// the order is still CANCELLED with its DB stock restored, and the error is
// [ErrOrderCancelled] joined with [ErrReleasePending] (errors.Is matches
// both): the order is put back on the delay queue, whose next
// [Canceller.CancelDue] re-issues the release; without Redis, or if that
// fails too, the reconcile.Reconciler releases the reservation of a cancelled order.
func (c *Canceller) Pay(ctx context.Context, orderNo string) error {
	now := c.o.clock.Now()
	res := c.db.WithContext(ctx).Table(c.o.tables.Order).
		Where("order_no = ? AND status = ? AND expire_time > ?", orderNo, order.OrderCreated, now).
		Updates(map[string]any{"status": order.OrderPaid, "pay_time": now, "updated_at": now})
	if res.Error != nil {
		return fmt.Errorf("order: pay %s: %w", orderNo, res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	o, err := c.find(c.db.WithContext(ctx), orderNo)
	if err != nil {
		return err
	}
	var pending error
	switch o.Status {
	case order.OrderPaid, order.OrderRefunded:
		return ErrAlreadyPaid
	case order.OrderCreated: // expired at now, not yet cancelled: cancel it now
		cerr := c.cancelOrder(ctx, orderNo, now, true)
		switch {
		case cerr == nil, errors.Is(cerr, ErrAlreadyCancelled) && !errors.Is(cerr, ErrReleasePending):
		case errors.Is(cerr, ErrAlreadyPaid), errors.Is(cerr, ErrAlreadyRefunded):
			return ErrAlreadyPaid
		case errors.Is(cerr, ErrReleasePending):
			// CANCELLED in the DB, the reservation still held in Redis.
			pending = errors.Join(cerr, c.requeue(ctx, orderNo, now))
		default:
			// Nothing changed — unless the commit went through and only its
			// answer was lost: then the release was never issued.
			if o2, err2 := c.find(c.db.WithContext(ctx), orderNo); err2 != nil || o2.Status != order.OrderCancelled {
				if _, ok := errors.AsType[*notDueError](cerr); ok {
					return fmt.Errorf("order: pay %s: expire_time changed: %w", orderNo, cerr)
				}
				return cerr
			}
			pending = errors.Join(fmt.Errorf("%w: order %s: %w", ErrReleasePending, orderNo, cerr), c.requeue(ctx, orderNo, now))
		}
		if o2, err := c.find(c.db.WithContext(ctx), orderNo); err == nil {
			o = o2
		}
	}
	if c.o.onPayCancel != nil {
		c.o.onPayCancel(ctx, o)
	}
	if pending != nil {
		return errors.Join(ErrOrderCancelled, pending)
	}
	return ErrOrderCancelled
}

// CancelDue cancels the orders whose queue time has come (at most
// [WithScanBatch] per call) and returns how many this call cancelled. An
// entry is claimed with ZREM, so several instances never cancel the same
// order twice; an entry that failed is re-queued after a backoff. The
// queue's score only says when to look: the cancellation itself requires
// the order's expire_time in the DB to have passed, and an entry scored
// early (a skewed clock, a buggy scheduler) is re-queued at the order's
// expire_time instead.
func (c *Canceller) CancelDue(ctx context.Context) (int, error) {
	if c.rdb == nil {
		return 0, nil
	}
	now := c.o.clock.Now()
	key := cancelQueueKey(c.o.prefix)
	due, err := c.rdb.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10),
		Count: int64(c.o.scanBatch)}).Result()
	if err != nil {
		return 0, fmt.Errorf("order: poll cancel queue: %w", err)
	}
	n := 0
	var errs []error
	for _, no := range due {
		claimed, err := c.rdb.ZRem(ctx, key, no).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("order: claim %s: %w", no, err))
			continue
		}
		if claimed == 0 {
			continue // another instance took it
		}
		err = c.cancelOrder(ctx, no, now, true)
		if nd, ok := errors.AsType[*notDueError](err); ok {
			// Scored before the order's expire_time: the row is the truth.
			if err := c.Schedule(context.WithoutCancel(ctx), no, nd.expire); err != nil {
				errs = append(errs, fmt.Errorf("%w (the DB scan cancels it when it expires)", err))
			}
			continue
		}
		switch {
		case err == nil:
			n++
		case errors.Is(err, ErrAlreadyPaid), errors.Is(err, ErrOrderNotFound), errors.Is(err, ErrAlreadyRefunded),
			errors.Is(err, ErrAlreadyCancelled) && !errors.Is(err, ErrReleasePending):
		case errors.Is(err, ErrReleasePending):
			if !errors.Is(err, ErrAlreadyCancelled) {
				n++
			}
			fallthrough
		default:
			errs = append(errs, err, c.requeue(ctx, no, now))
		}
	}
	return n, errors.Join(errs...)
}

// requeue puts orderNo back on the delay queue after a backoff.
func (c *Canceller) requeue(ctx context.Context, orderNo string, now time.Time) error {
	if c.rdb == nil {
		return nil
	}
	retry := now.Add(c.o.backoffMin * 20)
	if err := c.rdb.ZAdd(context.WithoutCancel(ctx), cancelQueueKey(c.o.prefix),
		redis.Z{Score: float64(retry.UnixMilli()), Member: orderNo}).Err(); err != nil {
		return fmt.Errorf("order: requeue %s (the DB scan finds it if still CREATED, the Reconciler if not): %w", orderNo, err)
	}
	return nil
}

// ScanExpired is the backstop of the delay queue: it cancels CREATED orders
// whose expire_time has passed (at most [WithScanBatch] per call) and
// returns how many this call cancelled.
func (c *Canceller) ScanExpired(ctx context.Context) (int, error) {
	now := c.o.clock.Now()
	var nos []string
	if err := c.db.WithContext(ctx).Table(c.o.tables.Order).Where("status = ? AND expire_time <= ?", order.OrderCreated, now).
		Order("expire_time").Limit(c.o.scanBatch).Pluck("order_no", &nos).Error; err != nil {
		return 0, fmt.Errorf("order: scan expired: %w", err)
	}
	n := 0
	var errs []error
	for _, no := range nos {
		err := c.cancelOrder(ctx, no, now, true)
		if _, ok := errors.AsType[*notDueError](err); ok {
			continue // its expire_time moved on since the read
		}
		switch {
		case err == nil:
			n++
		case errors.Is(err, ErrAlreadyPaid), errors.Is(err, ErrAlreadyRefunded),
			errors.Is(err, ErrAlreadyCancelled) && !errors.Is(err, ErrReleasePending):
		case errors.Is(err, ErrReleasePending):
			// CANCELLED now, so the scan will not see it again: the queue
			// retries the release (or, without Redis, the Reconciler).
			if !errors.Is(err, ErrAlreadyCancelled) {
				n++
			}
			errs = append(errs, err, c.requeue(ctx, no, c.o.clock.Now()))
		default:
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// Run polls the delay queue every [WithPollInterval] and scans the DB every
// [WithScanInterval] until ctx ends or Close is called; it returns nil then.
// Failures go to [WithOnError] and are retried on the next tick.
func (c *Canceller) Run(ctx context.Context) error {
	ctx, stop, err := c.w.Begin(ctx, "order: canceller")
	if err != nil {
		return err
	}
	defer stop()

	poll := time.NewTicker(c.o.poll)
	defer poll.Stop()
	scan := time.NewTicker(c.o.scan)
	defer scan.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			_, err = c.CancelDue(ctx)
		case <-scan.C:
			_, err = c.ScanExpired(ctx)
		}
		if err != nil && ctx.Err() == nil {
			c.o.logger.WarnContext(ctx, "order: canceller", "err", err)
			if c.o.onError != nil {
				c.o.onError(ctx, err)
			}
		}
	}
}

// Close stops Run and waits for it to return. It is safe to call twice.
func (c *Canceller) Close() error {
	c.w.Shutdown()
	return nil
}

// observeCancel reports one cancellation attempt; callers check
// c.o.observer.
func (c *Canceller) observeCancel(ctx context.Context, start time.Time, activity string, err error) {
	e := observe.Event{Stage: StageCancel, Outcome: cancelOutcome(err), Activity: activity, Duration: time.Since(start)}
	if e.Outcome == observe.Error {
		e.Err = err
	}
	c.o.observer.Observe(ctx, e)
}

func cancelOutcome(err error) string {
	if _, ok := errors.AsType[*notDueError](err); ok {
		return "not_due"
	}
	switch {
	case err == nil:
		return observe.OK
	case errors.Is(err, ErrReleasePending):
		return "release_pending"
	case errors.Is(err, ErrAlreadyCancelled):
		return "already_cancelled"
	case errors.Is(err, ErrAlreadyPaid):
		return "already_paid"
	case errors.Is(err, ErrAlreadyRefunded):
		return "already_refunded"
	case errors.Is(err, ErrOrderNotFound):
		return "not_found"
	}
	return observe.Error
}

// tables are the names the canceller was built with ([Orders] checks its
// own against them).
