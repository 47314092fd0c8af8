package outbox

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// Relay delivers outbox rows: it claims due rows in batches, publishes them
// through a [Publisher], and marks each SENT, schedules a retry with
// exponential backoff and jitter, or marks it FAILED once the attempt
// budget is spent. Any number of relays, in any number of processes, may
// run over the same table.
//
// Delivery is at least once. A row is published again when a publish
// failed after the broker stored it, when a relay outlived its lease
// ([WithLease]) or crashed between publishing and marking, or when the
// mark failed. Consumers must deduplicate on [Message.MsgID]. Ordering is
// best effort (table order within a batch and per key; retries reorder).
//
// A Relay's methods are safe for concurrent use. Its only goroutines are
// those of [Relay.Run] (and, while a batch is published with
// [WithPublishConcurrency], its workers), all gone when Run returns.
type Relay struct {
	db    *gorm.DB
	pub   Publisher
	o     options
	mode  ClaimMode
	table string   // unquoted, for gorm's Table
	sql   relaySQL // raw SQL on the quoted table
	id    string
	seq   atomic.Uint64

	mu      sync.Mutex
	running bool
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

// NewRelay returns a relay over db publishing through pub. It does not
// start anything: call [Relay.Run], or [Relay.RunOnce] from your own loop.
// The table must exist ([AutoMigrate], schema.sql or schema_postgres.sql);
// it is "outbox_message" unless [WithTable] names another. A nil db or
// pub, a bad option, or a dialect with no claim strategy (without
// [WithClaimMode]) fails with [ErrInvalidConfig]. The claim strategy in
// use is logged when [Relay.Run] starts.
func NewRelay(db *gorm.DB, pub Publisher, opts ...RelayOption) (*Relay, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil database", ErrInvalidConfig)
	}
	if isNil(pub) {
		return nil, fmt.Errorf("%w: nil publisher", ErrInvalidConfig)
	}
	o, err := buildOptions(opts, RelayOption.applyRelay)
	if err != nil {
		return nil, err
	}
	mode, err := resolveClaimMode(o.claimMode, db.Dialector.Name())
	if err != nil {
		return nil, err
	}
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return &Relay{
		db: db, pub: pub, o: o, mode: mode,
		table: o.table.name, sql: newRelaySQL(quoteTable(db, o.table.name)),
		id:   hex.EncodeToString(b[:]),
		stop: make(chan struct{}),
	}, nil
}

// Run polls until ctx is cancelled or [Relay.Close] is called: it runs
// [Relay.RunOnce] at once again after a full batch, otherwise after the poll
// interval, and deletes old SENT rows ([WithRetention]). Database errors are
// logged, passed to the [WithOnError] hook and retried at the next poll;
// they never stop Run. A batch in flight when Run is stopped still records
// what it published. Run returns nil after Close, ctx.Err() after
// cancellation, [ErrRunning] if the relay is already running and
// [ErrClosed] after Close.
func (r *Relay) Run(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return ErrClosed
	case r.running:
		r.mu.Unlock()
		return ErrRunning
	}
	r.running = true
	done := make(chan struct{})
	r.done = done
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		r.done = nil
		r.mu.Unlock()
		close(done)
	}()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-runCtx.Done():
		}
	}()

	r.o.logger.LogAttrs(ctx, slog.LevelInfo, "outbox: relay started",
		slog.String("relay", r.id), slog.String("claim", r.mode.name()))
	var lastCleanup, lastBacklog time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-runCtx.Done():
			select {
			case <-r.stop:
				return nil
			default:
				return ctx.Err()
			}
		case <-timer.C:
		}
		b, err := r.RunOnce(runCtx)
		if err != nil && runCtx.Err() == nil {
			r.reportErr(ctx, err)
		}
		r.housekeep(ctx, runCtx, &lastCleanup, &lastBacklog)
		if err == nil && b.Claimed >= r.o.batchSize {
			timer.Reset(0)
		} else {
			timer.Reset(r.o.pollInterval)
		}
	}
}

// housekeep runs, between batches, the cleanup of old SENT rows and the
// backlog gauges, each when its interval has passed since its last run.
func (r *Relay) housekeep(ctx, runCtx context.Context, lastCleanup, lastBacklog *time.Time) {
	if r.o.cleanup && runCtx.Err() == nil {
		if now := r.o.clock.Now(); lastCleanup.IsZero() || now.Sub(*lastCleanup) >= r.o.cleanupEvery {
			*lastCleanup = now
			if n, err := r.Cleanup(runCtx); err != nil && runCtx.Err() == nil {
				r.reportErr(ctx, err)
			} else if n > 0 {
				r.o.logger.LogAttrs(ctx, slog.LevelDebug, "outbox: cleaned up", slog.Int64("rows", n))
			}
		}
	}
	if r.o.observer != nil && runCtx.Err() == nil {
		if now := r.o.clock.Now(); lastBacklog.IsZero() || now.Sub(*lastBacklog) >= r.o.backlogEvery {
			*lastBacklog = now
			if _, err := r.backlog(runCtx); err != nil && runCtx.Err() == nil {
				r.reportErr(ctx, err)
			}
		}
	}
}

func (r *Relay) reportErr(ctx context.Context, err error) {
	r.o.logger.LogAttrs(ctx, slog.LevelError, "outbox: relay", slog.String("relay", r.id), slog.Any("error", err))
	if r.o.onError != nil {
		r.o.onError(ctx, err)
	}
}

// Close stops [Relay.Run] and waits for it to return (the batch in flight
// is settled first). It is idempotent and returns nil. Do not call it from
// a hook, which runs on Run's goroutine: cancel Run's context instead.
func (r *Relay) Close() error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.stop)
	}
	done := r.done
	r.mu.Unlock()
	if done != nil {
		<-done
	}
	return nil
}

// Batch counts what one [Relay.RunOnce] did. Each claimed row is counted
// once: Claimed = Sent + Retried + Failed + Released + LeaseLost.
type Batch struct {
	Claimed  int // rows leased by this relay
	Sent     int // published and marked SENT by this relay
	Retried  int // failed, retry scheduled
	Failed   int // failed for the last time, now FAILED
	Released int // not attempted because ctx ended; due again at once
	// LeaseLost counts rows this relay published or failed after its
	// lease had been taken over by another relay's claim: the outcome is
	// not recorded (the other relay's is) and no hook runs for them.
	LeaseLost int
}

// RunOnce claims one batch of due rows, publishes it and settles it. It is
// what [Relay.Run] calls in a loop; call it yourself to drive a relay from
// a scheduler or a test. Hooks run after the batch was settled in the
// database. The error is non-nil when the claim or the settle failed; in
// the latter case the rows stay leased and are published again after the
// lease (duplicates, never losses).
func (r *Relay) RunOnce(ctx context.Context) (Batch, error) {
	if r.o.observer == nil {
		return r.runOnce(ctx)
	}
	start := time.Now()
	b, err := r.runOnce(ctx)
	r.observeBatch(ctx, start, b, err)
	return b, err
}

func (r *Relay) runOnce(ctx context.Context) (Batch, error) {
	token := r.id + "-" + strconv.FormatUint(r.seq.Add(1), 36)
	msgs, err := r.claim(ctx, dbTime(r.o.clock.Now()), token)
	if err != nil || len(msgs) == 0 {
		return Batch{}, err
	}
	// Publishing must end before the lease does, or another relay would
	// claim the rows again while they are in flight: give it 80 % of the
	// lease, leaving the rest for the settle. A publisher that ignores ctx
	// can still overrun it (duplicates, never losses).
	pctx, cancel := context.WithTimeout(ctx, r.o.lease*4/5)
	errs := r.publish(pctx, msgs)
	cancel()
	return r.settle(ctx, msgs, errs, token)
}

// publish returns one error per message (nil slice: all delivered).
func (r *Relay) publish(ctx context.Context, msgs []Message) []error {
	if bp, ok := r.pub.(BatchPublisher); ok {
		errs := safeBatch(ctx, bp, msgs)
		if errs != nil && len(errs) != len(msgs) {
			return fillErr(len(msgs), fmt.Errorf("outbox: batch publisher returned %d results for %d messages", len(errs), len(msgs)))
		}
		return errs
	}
	errs := make([]error, len(msgs))
	n := min(r.o.concurrency, len(msgs))
	if n <= 1 {
		for i := range msgs {
			errs[i] = r.publishOne(ctx, msgs[i])
		}
		return errs
	}
	lanes := make([][]int, n)
	for i := range msgs {
		h := fnv.New32a()
		_, _ = h.Write([]byte(msgs[i].Key))
		l := int(h.Sum32() % uint32(n))
		lanes[l] = append(lanes[l], i)
	}
	var wg sync.WaitGroup
	for _, lane := range lanes {
		if len(lane) == 0 {
			continue
		}
		wg.Go(func() {
			for _, i := range lane {
				errs[i] = r.publishOne(ctx, msgs[i])
			}
		})
	}
	wg.Wait()
	return errs
}

// publishOne calls the publisher, turning a panic into an error.
func (r *Relay) publishOne(ctx context.Context, m Message) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("outbox: publisher panicked: %v", p)
		}
	}()
	return r.pub.Publish(ctx, m)
}

func safeBatch(ctx context.Context, bp BatchPublisher, msgs []Message) (errs []error) {
	defer func() {
		if p := recover(); p != nil {
			errs = fillErr(len(msgs), fmt.Errorf("outbox: publisher panicked: %v", p))
		}
	}()
	return bp.PublishBatch(ctx, msgs)
}

// outcome is what settling recorded for one published (or failed) row.
type outcome uint8

const (
	outcomeSent   outcome = iota // published and marked SENT
	outcomeRetry                 // failed, retry scheduled
	outcomeFailed                // failed for the last time, now FAILED
)

// event is one settled row whose hooks run after the commit.
type event struct {
	m       Message
	err     error
	outcome outcome
}

// settlement is what one settle transaction recorded.
type settlement struct {
	events   []event
	released int // rows given back because ctx ended
	lost     int // rows whose lease another relay took over
}

// settle records the publish outcomes in one transaction on a context
// that ignores ctx's cancellation, then runs the hooks.
func (r *Relay) settle(ctx context.Context, msgs []Message, errs []error, token string) (Batch, error) {
	b := Batch{Claimed: len(msgs)}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.markTimeout)
	defer cancel()
	now := dbTime(r.o.clock.Now())
	stopped := ctx.Err() != nil

	var st settlement
	err := r.db.WithContext(sctx).Transaction(func(tx *gorm.DB) error {
		st = settlement{} // a retried transaction starts over
		return r.recordOutcomes(tx, &st, msgs, errs, token, now, stopped)
	})
	if err != nil {
		return b, fmt.Errorf("outbox: settle batch: %w", err)
	}
	b.Released, b.LeaseLost = st.released, st.lost
	if st.lost > 0 {
		r.o.logger.LogAttrs(ctx, slog.LevelWarn, "outbox: lease lost before settle, rows left to the relay that took them over",
			slog.String("token", token), slog.Int("rows", st.lost))
	}
	for _, ev := range st.events {
		r.runHooks(ctx, &b, ev)
	}
	return b, nil
}

// errAt is the publish error of message i (errs nil: all delivered).
func errAt(errs []error, i int) error {
	if errs == nil {
		return nil
	}
	return errs[i]
}

// recordOutcomes writes every row's outcome inside tx: SENT for the
// published rows, back to due for the unsent rows of a stopped batch, and
// retry or FAILED for the failed ones. Only rows this batch still holds
// (lease token) are written; the others are counted as lost.
func (r *Relay) recordOutcomes(tx *gorm.DB, st *settlement, msgs []Message, errs []error, token string, now time.Time, stopped bool) error {
	var sent, released []int64
	for i := range msgs {
		switch e := errAt(errs, i); {
		case e == nil:
			sent = append(sent, msgs[i].ID)
		case stopped:
			released = append(released, msgs[i].ID)
		}
	}
	marked, err := r.markSent(tx, sent, token, now)
	if err != nil {
		return err
	}
	if err := r.releaseUnsent(tx, st, released, token, now); err != nil {
		return err
	}
	for i := range msgs {
		m, e := msgs[i], errAt(errs, i)
		switch {
		case e == nil && marked != nil && !marked[m.ID]:
			st.lost++
		case e == nil:
			m.Status, m.SentAt, m.UpdatedAt = StatusSent, &now, now
			st.events = append(st.events, event{m: m, outcome: outcomeSent})
		case stopped:
			// released above
		default:
			if err := r.recordFailure(tx, st, m, e, token, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// markSent marks the published rows SENT. Only rows this batch still holds
// are marked: a row whose lease was taken over by another relay's claim is
// that relay's to record (it may be publishing it right now). It returns
// the set of rows marked, or nil when every row was.
func (r *Relay) markSent(tx *gorm.DB, sent []int64, token string, now time.Time) (map[int64]bool, error) {
	if len(sent) == 0 {
		return nil, nil
	}
	res := tx.Exec(r.sql.markSent, StatusSent, now, now, sent, token, StatusPending)
	if res.Error != nil {
		return nil, fmt.Errorf("mark sent: %w", res.Error)
	}
	if int(res.RowsAffected) == len(sent) {
		return nil, nil
	}
	var ids []int64
	if err := tx.Raw(r.sql.marked, sent, token, StatusSent).Scan(&ids).Error; err != nil {
		return nil, fmt.Errorf("read marked rows: %w", err)
	}
	marked := make(map[int64]bool, len(ids))
	for _, id := range ids {
		marked[id] = true
	}
	return marked, nil
}

// releaseUnsent makes the rows a stopped batch did not publish due again
// at once; those no longer held by this batch are counted as lost.
func (r *Relay) releaseUnsent(tx *gorm.DB, st *settlement, released []int64, token string, now time.Time) error {
	if len(released) == 0 {
		return nil
	}
	res := tx.Exec(r.sql.release, now, now, released, token, StatusPending)
	if res.Error != nil {
		return fmt.Errorf("release: %w", res.Error)
	}
	st.released = int(res.RowsAffected)
	st.lost += len(released) - st.released
	return nil
}

// recordFailure schedules a retry of a failed row, or marks it FAILED when
// its attempts are exhausted. A row no longer held by this batch is
// counted as lost (the relay that took it over records it).
func (r *Relay) recordFailure(tx *gorm.DB, st *settlement, m Message, e error, token string, now time.Time) error {
	m.LastError, m.UpdatedAt, m.LeaseOwner = truncErr(e), now, ""
	var res *gorm.DB
	oc := outcomeRetry
	if m.Attempts >= r.o.maxAttempts {
		oc = outcomeFailed
		m.Status = StatusFailed
		res = tx.Exec(r.sql.fail, StatusFailed, m.LastError, now, m.ID, token, StatusPending)
	} else {
		m.NextAttemptAt = dbTime(now.Add(r.backoff(m.Attempts)))
		res = tx.Exec(r.sql.retry, m.NextAttemptAt, m.LastError, now, m.ID, token, StatusPending)
	}
	if res.Error != nil {
		return fmt.Errorf("record failure of %d: %w", m.ID, res.Error)
	}
	if res.RowsAffected != 1 { // our lease was taken over: theirs now
		st.lost++
		return nil
	}
	st.events = append(st.events, event{m: m, err: e, outcome: oc})
	return nil
}

// runHooks counts one settled row in b, logs retries and failures, and
// calls the row's hook.
func (r *Relay) runHooks(ctx context.Context, b *Batch, ev event) {
	switch ev.outcome {
	case outcomeSent:
		b.Sent++
		if r.o.onSent != nil {
			r.o.onSent(ctx, ev.m)
		}
	case outcomeRetry:
		b.Retried++
		r.o.logger.LogAttrs(ctx, slog.LevelWarn, "outbox: publish failed, will retry",
			slog.Int64("id", ev.m.ID), slog.String("msg_id", ev.m.MsgID), slog.Int("attempts", ev.m.Attempts),
			slog.Time("next_attempt_at", ev.m.NextAttemptAt), slog.Any("error", ev.err))
		if r.o.onRetry != nil {
			r.o.onRetry(ctx, ev.m, ev.err, ev.m.NextAttemptAt)
		}
	case outcomeFailed:
		b.Failed++
		r.o.logger.LogAttrs(ctx, slog.LevelError, "outbox: message FAILED, attempts exhausted",
			slog.Int64("id", ev.m.ID), slog.String("msg_id", ev.m.MsgID), slog.Int("attempts", ev.m.Attempts),
			slog.Any("error", ev.err))
		if r.o.onFailed != nil {
			r.o.onFailed(ctx, ev.m, ev.err)
		}
	}
}

// backoff is the delay after the attempt-th failed attempt:
// min(base·2^(attempt-1), max), minus up to jitter of it.
func (r *Relay) backoff(attempt int) time.Duration {
	d := r.o.backoffBase
	for i := 1; i < attempt && d < r.o.backoffMax; i++ {
		d *= 2
	}
	if d > r.o.backoffMax || d <= 0 {
		d = r.o.backoffMax
	}
	if r.o.jitter > 0 {
		d -= time.Duration(rand.Float64() * r.o.jitter * float64(d))
	}
	return d
}

// Cleanup deletes SENT rows whose sent_at is older than the retention
// ([WithRetention], default 24h) in chunks of 1000, and returns how many
// it deleted. PENDING and FAILED rows are never deleted.
func (r *Relay) Cleanup(ctx context.Context) (int64, error) {
	cutoff := dbTime(r.o.clock.Now().Add(-r.o.retention))
	d := r.db.WithContext(ctx)
	var total int64
	for {
		var ids []int64
		if err := d.Raw(r.sql.selectOldSent, StatusSent, cutoff, r.o.cleanupLimit).Scan(&ids).Error; err != nil {
			return total, fmt.Errorf("outbox: cleanup: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		res := d.Exec(r.sql.deleteByID, ids, StatusSent)
		if res.Error != nil {
			return total, fmt.Errorf("outbox: cleanup: %w", res.Error)
		}
		total += res.RowsAffected
		if len(ids) < r.o.cleanupLimit {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// Requeue moves the FAILED rows among ids (row IDs, [Message.ID], as
// listed by [Failed]) back to PENDING with a fresh attempt budget
// (attempts 0), due at once, and returns how many it moved. Rows not
// FAILED, and unknown ids, are left alone, so a repeated Requeue moves
// nothing more. Beware: a reconciler treats a FAILED message as not pending
// ([HasPending]) and may already have compensated for it; requeue only
// what you know is still wanted.
func (r *Relay) Requeue(ctx context.Context, ids ...int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	now := dbTime(r.o.clock.Now())
	res := r.db.WithContext(ctx).Exec(r.sql.requeue, StatusPending, now, now, ids, StatusFailed)
	if res.Error != nil {
		return 0, fmt.Errorf("outbox: requeue: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// backlog reads the backlog of the relay's table ([Stats]) and, with
// [WithObserver], reports the gauges "outbox.pending",
// "outbox.oldest_pending_seconds" (on the relay's clock) and
// "outbox.failed"; [Relay.Run] calls it every [WithBacklogInterval].
func (r *Relay) backlog(ctx context.Context) (Backlog, error) {
	b, err := Stats(ctx, r.db, WithTable(r.table))
	if err == nil && r.o.observer != nil {
		r.observeBacklog(ctx, b, r.o.clock.Now())
	}
	return b, err
}
