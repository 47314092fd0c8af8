package order

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

func TestIDGeneratorMonotonicAndUnique(t *testing.T) {
	t.Parallel()
	clock := newClock()
	g := newGen(t, 5, WithClock(clock), WithEpoch(testIDEpoch()))
	seen := map[int64]bool{}
	var last int64
	// 10,000 IDs in one frozen millisecond: the sequence overflows and
	// borrows the next milliseconds instead of repeating or sleeping.
	for i := 0; i < 10000; i++ {
		id, err := g.NextID()
		require.NoError(t, err)
		require.False(t, seen[id])
		require.Greater(t, id, last)
		seen[id], last = true, id
	}
	_, machine, _ := DecomposeID(last, testIDEpoch())
	assert.EqualValues(t, 5, machine)

	// clock steps back an hour: IDs keep increasing
	clock.Add(-time.Hour)
	for i := 0; i < 5000; i++ {
		id, err := g.NextID()
		require.NoError(t, err)
		require.Greater(t, id, last)
		last = id
	}
	clock.Add(2 * time.Hour)
	id, err := g.NextID()
	require.NoError(t, err)
	at, _, seq := DecomposeID(id, testIDEpoch())
	assert.Equal(t, clock.Now().UnixMilli(), at.UnixMilli())
	assert.EqualValues(t, 0, seq)
}

func TestIDGeneratorConcurrentAndMachines(t *testing.T) {
	t.Parallel()
	gens := []*IDGenerator{newGen(t, 1), newGen(t, 2)}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]int64, 0, 2000)
			for i := 0; i < 2000; i++ {
				id, err := gens[w%2].NextID()
				if err != nil {
					t.Error(err)
					return
				}
				local = append(local, id)
			}
			mu.Lock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate id %d", id)
				}
				seen[id] = true
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Len(t, seen, 16000)

	_, err := NewIDGenerator(-1)
	assert.Error(t, err)
	_, err = NewIDGenerator(MaxMachineID + 1)
	assert.Error(t, err)
	_, err = NewIDGenerator(1, WithEpoch(time.Now().Add(time.Hour)))
	assert.Error(t, err)
}

func TestMachineLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, mr := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	clock := newClock()

	a, err := AcquireMachineID(ctx, rdb, WithKeyPrefix(prefix), WithLeaseTTL(3*time.Second))
	require.NoError(t, err)
	b, err := AcquireMachineID(ctx, rdb, WithKeyPrefix(prefix), WithLeaseTTL(3*time.Second))
	require.NoError(t, err)
	assert.NotEqual(t, a.MachineID(), b.MachineID(), "no two instances share a machine id")

	ga, err := a.NewGenerator(WithClock(clock), WithEpoch(testIDEpoch()))
	require.NoError(t, err)
	var last int64
	for i := 0; i < 100; i++ {
		last, err = ga.NextID()
		require.NoError(t, err)
	}
	require.NoError(t, a.Renew(ctx)) // persists the high-water mark

	// a dies; its lease expires; a successor gets the same machine id with a
	// clock one hour behind — its IDs must still be above a's.
	mr.FastForward(4 * time.Second)
	c, err := AcquireMachineID(ctx, rdb, WithKeyPrefix(prefix), WithLeaseTTL(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, a.MachineID(), c.MachineID())
	assert.GreaterOrEqual(t, c.Floor(), ga.LastMillis())
	behind := newClock()
	behind.Add(-time.Hour)
	gc, err := c.NewGenerator(WithClock(behind), WithEpoch(testIDEpoch())) // the floor is relative to the ID epoch: the same one
	require.NoError(t, err)
	id, err := gc.NextID()
	require.NoError(t, err)
	assert.Greater(t, id, last)

	// a's lease is gone
	assert.ErrorIs(t, a.Renew(ctx), ErrLeaseLost)

	// Run/Close renews and releases (b expired with the fast-forward too)
	assert.ErrorIs(t, b.Renew(ctx), ErrLeaseLost)
	b, err = AcquireMachineID(ctx, rdb, WithKeyPrefix(prefix), WithLeaseTTL(3*time.Second))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	eventually(t, 5*time.Second, func() bool { b.w.mu.Lock(); defer b.w.mu.Unlock(); return b.w.done != nil }, "Run started")
	require.NoError(t, b.Renew(ctx))
	require.NoError(t, b.Close())
	require.NoError(t, <-done)
	d, err := AcquireMachineID(ctx, rdb, WithKeyPrefix(prefix), WithLeaseTTL(3*time.Second))
	require.NoError(t, err)
	assert.Equal(t, b.MachineID(), d.MachineID(), "released id is reused")
}
