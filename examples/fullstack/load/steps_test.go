package load

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStepsGateTheBuyPhase: with 16 workers sending 1,000 requests, each
// step runs exactly once, in At order, and no request numbered At or more
// is sent before the step has returned; every step is marked.
func TestStepsGateTheBuyPhase(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	var done [3]atomic.Bool
	step := func(k int, name string) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
			done[k].Store(true)
			return nil
		}
	}
	rep := &Report{}
	// Given out of order on purpose.
	steps := []Step{{At: 700, Name: "resume", Do: step(2, "resume")}, {At: 100, Name: "pause", Do: step(0, "pause")}, {At: 700, Name: "top-up", Do: step(1, "top-up")}}
	g := newGate(steps, rep)
	var early atomic.Int64
	err := parallel(context.Background(), 16, 1000, nil, func(i int) error {
		if err := g.before(context.Background(), i); err != nil {
			return err
		}
		if (i >= 100 && !done[0].Load()) || (i >= 700 && (!done[1].Load() || !done[2].Load())) {
			early.Add(1)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"pause", "resume", "top-up"}, ran, "steps of one At keep the order they were given in")
	assert.Zero(t, early.Load(), "requests sent before their step had run")
	rep.mu.Lock()
	assert.Len(t, rep.marks, 3)
	rep.mu.Unlock()

	failing := newGate([]Step{{At: 0, Name: "boom", Do: func(context.Context) error { return errors.New("admin down") }}}, &Report{})
	assert.ErrorContains(t, failing.before(context.Background(), 0), `step "boom": admin down`)
}
