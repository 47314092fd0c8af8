package lifecycle

import (
	"context"
	"errors"
	"testing"
)

// TestWorker: one Run at a time (a second Begin is ErrRunning, named), a
// loop's end frees the worker for the next Run, Shutdown cancels the
// running loop and waits for its end, and nothing begins after it.
func TestWorker(t *testing.T) {
	var w Worker
	// A loop that ended frees the worker: the next Run begins. Before, a
	// second Run after the first had returned was refused as running.
	_, stop0, err := w.Begin(context.Background(), "test: loop")
	if err != nil {
		t.Fatal(err)
	}
	stop0()
	if w.Running() {
		t.Fatal("Running after the first loop ended")
	}
	ctx, stop, err := w.Begin(context.Background(), "test: loop")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Begin(context.Background(), "test: loop"); !errors.Is(err, ErrRunning) || err.Error() != "test: loop: seckill: already running" {
		t.Fatalf("second Begin: %v", err)
	}
	if !w.Running() {
		t.Fatal("not Running after Begin")
	}
	ended := make(chan struct{})
	go func() {
		<-ctx.Done() // runs until Shutdown cancels it
		close(ended)
		stop()
	}()
	first, running := w.Shutdown()
	if !first || !running {
		t.Fatalf("Shutdown: first %v running %v", first, running)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Shutdown returned before the loop ended")
	}
	if first, ran := w.Shutdown(); first || ran {
		t.Fatalf("second Shutdown: first %v ran %v (nothing runs any more)", first, ran)
	}
	if w.Running() {
		t.Fatal("Running after the loop ended")
	}
	if _, _, err := w.Begin(context.Background(), "test: loop"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Begin after Shutdown: %v", err)
	}
}
