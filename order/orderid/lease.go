package orderid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/lifecycle"
	"github.com/seckillkit/seckill/internal/observe"
)

// Lease is a machine ID leased from Redis (SET NX PX, renewed every
// TTL/3 by [Lease.Run]), so two running instances never share one.
// With the lease comes a floor: the highest millisecond any previous owner
// of that ID reported, so a restarted instance whose clock is behind never
// repeats an ID.
//
// If renewal fails for longer than the TTL the lease may pass to another
// instance: Run then returns [ErrLeaseLost] and the generator must no longer
// be used (the consumer using it should stop).
type Lease struct {
	rdb    redis.Scripter
	prefix string
	id     int64
	token  string
	ttl    time.Duration
	floor  int64 // the millisecond above which this owner must issue IDs
	obs    observe.Observer

	mu  sync.Mutex // guards gen
	gen *Generator
	w   lifecycle.Worker
}

// AcquireMachine leases the first free machine ID in 0..[MaxMachine].
// Options: [WithKeyPrefix], [WithTTL]. A nil rdb fails with
// [ErrInvalidConfig].
func AcquireMachine(ctx context.Context, rdb redis.Scripter, opts ...LeaseOption) (*Lease, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: AcquireMachine needs a redis client", ErrInvalidConfig)
	}
	o, err := buildLease(opts)
	if err != nil {
		return nil, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	for id := int64(0); id <= MaxMachine; id++ {
		res, err := leaseAcquireScript.Run(ctx, rdb,
			[]string{machineKey(o.prefix, id), machineFloorKey(o.prefix, id)},
			token, o.ttl.Milliseconds()).Int64()
		if err != nil {
			return nil, fmt.Errorf("orderid: acquire machine id %d: %w", id, err)
		}
		if res >= 0 {
			return &Lease{rdb: rdb, prefix: o.prefix, id: id, token: token, ttl: o.ttl, floor: res, obs: o.observer}, nil
		}
	}
	return nil, ErrNoMachineID
}

// MachineID returns the leased machine ID.
func (l *Lease) MachineID() int64 { return l.id }

// NewGenerator returns a [Generator] for the leased machine ID that
// starts above the floor; Run persists its high-water mark. Options as for
// [New]. Call it once per lease.
func (l *Lease) NewGenerator(opts ...GeneratorOption) (*Generator, error) {
	g, err := newGenerator(l.id, l.floor, opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.gen = g
	l.mu.Unlock()
	return g, nil
}

func (l *Lease) mark() int64 {
	l.mu.Lock()
	g := l.gen
	l.mu.Unlock()
	if g == nil {
		return l.floor
	}
	// Margin: what the generator may issue before the next renewal, at most
	// one ms of borrowed time per 4,096 IDs; a TTL's worth covers a restart.
	return g.lastMillis() + l.ttl.Milliseconds()
}

// Renew extends the lease once and persists the floor. It returns
// [ErrLeaseLost] if the lease is no longer ours. With [WithObserver] it
// reports the renewal.
func (l *Lease) Renew(ctx context.Context) error {
	start := time.Now()
	err := l.renew(ctx, false)
	l.report(ctx, start, err)
	return err
}

// report sends one "orderid.lease" event to the observer, if any.
func (l *Lease) report(ctx context.Context, start time.Time, err error) {
	if l.obs == nil {
		return
	}
	e := observe.Event{Stage: "orderid.lease", Outcome: observe.OK, Name: strconv.FormatInt(l.id, 10), Duration: time.Since(start)}
	switch {
	case errors.Is(err, ErrLeaseLost):
		e.Outcome = "lost"
	case err != nil:
		e.Outcome, e.Err = observe.Error, err
	}
	l.obs.Observe(ctx, e)
}

func (l *Lease) renew(ctx context.Context, release bool) error {
	rel := "0"
	if release {
		rel = "1"
	}
	res, err := leaseRenewScript.Run(ctx, l.rdb,
		[]string{machineKey(l.prefix, l.id), machineFloorKey(l.prefix, l.id)},
		l.token, l.ttl.Milliseconds(), l.mark(), rel).Int64()
	if err != nil {
		return fmt.Errorf("orderid: renew machine id %d: %w", l.id, err)
	}
	if res != 1 {
		return ErrLeaseLost
	}
	return nil
}

// Run renews the lease every TTL/3 until ctx ends or Close is called (then
// it releases the lease and returns nil). It returns [ErrLeaseLost] when the
// lease was lost; transient Redis errors are retried until the TTL runs out.
func (l *Lease) Run(ctx context.Context) error {
	ctx, stop, err := l.w.Begin(ctx, "orderid: lease")
	if err != nil {
		return err
	}
	defer stop()

	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			rctx, rc := context.WithTimeout(context.WithoutCancel(ctx), l.ttl/3)
			err := l.renew(rctx, true)
			rc()
			if err != nil && !errors.Is(err, ErrLeaseLost) {
				return err
			}
			return nil
		case <-t.C:
			err := l.Renew(ctx)
			switch {
			case err == nil:
				lastOK = time.Now()
			case errors.Is(err, ErrLeaseLost):
				return err
			case time.Since(lastOK) >= l.ttl:
				err = fmt.Errorf("%w: %v", ErrLeaseLost, err)
				l.report(ctx, time.Now(), err)
				return err
			}
		}
	}
}

// Close stops Run (which releases the lease) and waits for it. Without a
// running Run it releases the lease directly.
func (l *Lease) Close() error {
	first, running := l.w.Shutdown()
	if !first || running {
		return nil // Run released the lease on its way out
	}
	ctx, c := context.WithTimeout(context.Background(), 5*time.Second)
	defer c()
	if err := l.renew(ctx, true); err != nil && !errors.Is(err, ErrLeaseLost) {
		return err
	}
	return nil
}
