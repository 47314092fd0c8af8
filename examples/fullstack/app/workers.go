package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// worker is one background job of a node. Every job follows the same
// contract, so the node starts and stops them in one place (runner):
//
//   - start (optional) does the job's I/O before the node serves: a preload,
//     a lease, a connection. An error aborts New, and the jobs started so
//     far are stopped in reverse order.
//   - run (optional) works until ctx is cancelled and then returns nil. An
//     error return is logged and counted (seckill_worker_errors_total) and
//     the job stays stopped; it never takes the node down.
//   - stop (optional) releases what start took. It is called once, after
//     ctx is cancelled and before run's return is awaited (a run may need
//     it to return: a closed consumer group ends its loop).
//
// build lists the jobs (no I/O); start runs them in list order.
type worker struct {
	name  string
	start func(ctx context.Context) error
	run   func(ctx context.Context) error
	stop  func() error
}

// every returns a run that calls f every d until ctx is cancelled.
func every(d time.Duration, f func(ctx context.Context)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f(ctx)
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// runner starts and stops a node's workers.
type runner struct {
	log     *slog.Logger
	failed  func(name string) // counts a run that ended in an error
	workers []worker
	started int // workers[:started] have started

	bg     context.Context // lives until stop; the runs' context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func newRunner(ctx context.Context, log *slog.Logger, failed func(string)) *runner {
	r := &runner{log: log, failed: failed}
	r.bg, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return r
}

// add appends workers; call before start.
func (r *runner) add(ws ...worker) { r.workers = append(r.workers, ws...) }

// names lists the workers in start order.
func (r *runner) names() []string {
	out := make([]string, len(r.workers))
	for i, w := range r.workers {
		out[i] = w.name
	}
	return out
}

// start starts every worker in order: its start with ctx (the caller's
// deadline bounds the I/O), then its run with the runner's context.
func (r *runner) start(ctx context.Context) error {
	for _, w := range r.workers[r.started:] {
		if w.start != nil {
			if err := w.start(ctx); err != nil {
				return fmt.Errorf("start %s: %w", w.name, err)
			}
		}
		r.started++
		if w.run != nil {
			r.wg.Add(1)
			go r.loop(w)
		}
	}
	return nil
}

func (r *runner) loop(w worker) {
	defer r.wg.Done()
	err := w.run(r.bg)
	if err != nil && !errors.Is(err, context.Canceled) && r.bg.Err() == nil {
		r.failed(w.name)
		r.log.Error("worker stopped", "worker", w.name, "err", err)
	}
}

// stop cancels the runs, calls the started workers' stop in reverse order
// and waits for every run to return. Safe to call more than once.
func (r *runner) stop() error {
	var errs []error
	r.once.Do(func() {
		r.cancel()
		for i := r.started - 1; i >= 0; i-- {
			if s := r.workers[i].stop; s != nil {
				if err := s(); err != nil {
					errs = append(errs, fmt.Errorf("stop %s: %w", r.workers[i].name, err))
				}
			}
		}
		r.wg.Wait()
	})
	return errors.Join(errs...)
}
