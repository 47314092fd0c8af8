package orderid

import (
	"context"
	"fmt"
	"sync"
)

// worker is the Run/Close bookkeeping of the package's background loops
// ([Lease]): one Run at a time, none after Close, and
// Close waits for a running Run to return.
type worker struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// begin marks the loop running and returns its context and the function
// Run must defer. what names the loop in the "already running" error.
func (w *worker) begin(ctx context.Context, what string) (context.Context, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, nil, ErrClosed
	}
	if w.done != nil {
		return nil, nil, fmt.Errorf("orderid: %s: %w", what, ErrRunning)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w.cancel, w.done = cancel, done
	return ctx, func() { cancel(); close(done) }, nil
}

// shutdown marks the worker closed and stops and waits for a running loop.
// first is false when it was closed before; running reports whether a
// loop was running.
func (w *worker) shutdown() (first, running bool) {
	w.mu.Lock()
	first = !w.closed
	w.closed = true
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel == nil {
		return first, false
	}
	cancel()
	<-done
	return first, true
}
