package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// Worker is the Run/Close bookkeeping of a background loop (order's
// Canceller, orderid's Lease): one Run at a time, none after Close, and
// Close waits for a running Run to return. The zero Worker is ready.
type Worker struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// Begin marks the loop running and returns its context and the function
// Run must defer. what names the loop in the ErrRunning error (for example
// "order: canceller"). After Shutdown it fails with ErrClosed.
func (w *Worker) Begin(ctx context.Context, what string) (context.Context, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, nil, ErrClosed
	}
	if w.done != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, ErrRunning)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w.cancel, w.done = cancel, done
	return ctx, func() {
		cancel()
		w.mu.Lock()
		if w.done == done { // the loop's end frees the worker for the next Run
			w.cancel, w.done = nil, nil
		}
		w.mu.Unlock()
		close(done)
	}, nil
}

// Shutdown marks the worker closed and stops and waits for a running loop.
// first is false when it was closed before; ran reports whether a loop
// ever began (it has ended when Shutdown returns).
func (w *Worker) Shutdown() (first, ran bool) {
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

// Running reports whether a loop has begun and not ended.
func (w *Worker) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil {
		return false
	}
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}
