package stock

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The in-process sold-out cache.
//
// When a Reserve answers SoldOut with nothing left, the process sets a flag
// for the activity and refuses that activity in-process (Result.Local) with
// one atomic load: no Redis call, no allocation. The flag is dropped when
//
//   - this process releases stock of the activity (Release), or a Reserve
//     sees stock again;
//   - while [Deductor.Run] is active: a release message arrives on the pub/sub
//     channel "<prefix>stock:released" (published by release.lua in the same
//     atomic step that gives the stock back), or the re-check interval passes
//     (the backstop for a message lost during a reconnect);
//   - without Run: the re-check interval passes, measured on the injected
//     clock on each refusal (one extra clock read per refusal).
//
// Dropping the flag only means the next Reserve asks Redis again; if the
// activity is still sold out the flag is set again. So the cost of the
// backstop is at most one Redis call per activity per interval per process.

const forever = math.MaxInt64

type soldFlag struct {
	// until is 0 when not sold out, forever while Run owns the flag, or the
	// clock's UnixNano deadline of the flag otherwise.
	until atomic.Int64
}

func (d *Deductor) flag(activity int64) *soldFlag {
	m := d.flags.Load()
	if m == nil {
		return nil
	}
	return (*m)[activity]
}

// refuseLocal reports whether the process knows the activity is sold out.
func (d *Deductor) refuseLocal(activity int64) bool {
	f := d.flag(activity)
	if f == nil {
		return false
	}
	u := f.until.Load()
	switch {
	case u == 0:
		return false
	case u == forever:
		return true
	case d.o.clock.Now().UnixNano() < u:
		return true
	}
	if f.until.CompareAndSwap(u, 0) && d.o.onSoldOut != nil {
		d.o.onSoldOut(activity, false)
	}
	return false
}

// SoldOut reports whether this process currently refuses the activity
// in-process (it has learnt that the activity is sold out and not yet learnt
// that stock came back). It never calls Redis.
func (d *Deductor) SoldOut(activity int64) bool {
	f := d.flag(activity)
	if f == nil {
		return false
	}
	u := f.until.Load()
	return u == forever || (u != 0 && d.o.clock.Now().UnixNano() < u)
}

func (d *Deductor) markSoldOut(activity int64) {
	now := d.o.clock.Now()
	d.mu.Lock()
	f := d.flag(activity)
	if f == nil {
		old := d.flags.Load()
		m := make(map[int64]*soldFlag, 1)
		if old != nil {
			for k, v := range *old {
				m[k] = v
			}
		}
		f = &soldFlag{}
		m[activity] = f
		d.flags.Store(&m)
	}
	var prev int64
	if d.running {
		prev = f.until.Swap(forever)
		d.marked[activity] = now
	} else {
		prev = f.until.Swap(now.Add(d.o.recheck).UnixNano())
	}
	d.mu.Unlock()
	if prev == 0 {
		d.o.logger.Info("stock: activity sold out, refusing in-process", "activity", activity)
		if d.o.onSoldOut != nil {
			d.o.onSoldOut(activity, true)
		}
	}
}

func (d *Deductor) clearSoldOut(activity int64) {
	f := d.flag(activity)
	if f == nil || f.until.Load() == 0 {
		return
	}
	if f.until.Swap(0) != 0 {
		d.o.logger.Info("stock: stock came back, asking redis again", "activity", activity)
		if d.o.onSoldOut != nil {
			d.o.onSoldOut(activity, false)
		}
	}
}

// Run keeps the in-process sold-out cache fresh until ctx is done or Close is
// called, and then returns nil. It subscribes to the release channel when the
// client implements [Subscriber] (messages clear the flag at once; go-redis
// resubscribes after a reconnect) and, every re-check interval, drops flags
// older than the interval. Run is optional: without it flags expire after the
// re-check interval, checked on the clock at each refusal. Run returns
// [ErrClosed] if the Deductor is closed or Run is already active.
func (d *Deductor) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running || d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	d.running = true
	d.cancel = cancel
	d.mu.Unlock()

	defer func() {
		cancel()
		d.mu.Lock()
		d.running = false
		d.cancel = nil
		// Hand the flags Run owned back to the clock-checked mode.
		deadline := d.o.clock.Now().Add(d.o.recheck).UnixNano()
		for a := range d.marked {
			if f := d.flag(a); f != nil {
				f.until.CompareAndSwap(forever, deadline)
			}
			delete(d.marked, a)
		}
		d.mu.Unlock()
	}()

	var msgs <-chan *redis.Message
	if sub, ok := d.rdb.(Subscriber); ok {
		ps := sub.Subscribe(ctx, d.channel)
		defer ps.Close()
		msgs = ps.Channel()
	}
	t := time.NewTicker(d.o.recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			a, err := strconv.ParseInt(m.Payload, 10, 64)
			if err != nil {
				d.o.logger.Warn("stock: bad release message", "payload", m.Payload)
				continue
			}
			d.mu.Lock()
			delete(d.marked, a)
			d.mu.Unlock()
			d.clearSoldOut(a)
		case <-t.C:
			d.expireMarks()
		}
	}
}

// expireMarks drops the flags Run owns that are older than the interval.
func (d *Deductor) expireMarks() {
	now := d.o.clock.Now()
	var expired []int64
	d.mu.Lock()
	for a, at := range d.marked {
		if now.Sub(at) >= d.o.recheck {
			delete(d.marked, a)
			expired = append(expired, a)
		}
	}
	d.mu.Unlock()
	for _, a := range expired {
		if f := d.flag(a); f != nil && f.until.CompareAndSwap(forever, 0) && d.o.onSoldOut != nil {
			d.o.onSoldOut(a, false)
		}
	}
}

// Close stops [Deductor.Run] and makes later Run calls fail with ErrClosed.
// Reserve, Release and the other calls keep working. It never closes the
// Redis client.
func (d *Deductor) Close() error {
	d.mu.Lock()
	d.closed = true
	cancel := d.cancel
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}
