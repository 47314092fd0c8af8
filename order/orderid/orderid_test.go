package orderid

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/observe"
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
	_, machine, _ := Decompose(last, testIDEpoch())
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
	at, _, seq := Decompose(id, testIDEpoch())
	assert.Equal(t, clock.Now().UnixMilli(), at.UnixMilli())
	assert.EqualValues(t, 0, seq)
}

func TestIDGeneratorConcurrentAndMachines(t *testing.T) {
	t.Parallel()
	gens := []*Generator{newGen(t, 1), newGen(t, 2)}
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

	_, err := New(-1)
	assert.Error(t, err)
	_, err = New(MaxMachine + 1)
	assert.Error(t, err)
	_, err = New(1, WithEpoch(time.Now().Add(time.Hour)))
	assert.Error(t, err)
}

func TestMachineLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, mr := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	clock := newClock()

	a, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(3*time.Second))
	require.NoError(t, err)
	b, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(3*time.Second))
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
	c, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, a.MachineID(), c.MachineID())
	assert.GreaterOrEqual(t, c.floor, ga.lastMillis())
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
	b, err = AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(3*time.Second))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	eventually(t, 5*time.Second, b.w.Running, "Run started")
	require.NoError(t, b.Renew(ctx))
	require.NoError(t, b.Close())
	require.NoError(t, <-done)
	d, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(3*time.Second))
	require.NoError(t, err)
	assert.Equal(t, b.MachineID(), d.MachineID(), "released id is reused")
}

func TestLeaseOnEveryRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			prefix := testenv.Prefix(t) + string(kind) + ":"
			a, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(10*time.Second))
			require.NoError(t, err)
			b, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(10*time.Second))
			require.NoError(t, err)
			assert.NotEqual(t, a.MachineID(), b.MachineID())
			g, err := a.NewGenerator()
			require.NoError(t, err)
			_, err = g.NextID()
			require.NoError(t, err)
			require.NoError(t, a.Renew(ctx))
			require.NoError(t, a.Close())
			require.NoError(t, b.Close())
			c, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(10*time.Second))
			require.NoError(t, err)
			assert.Equal(t, a.MachineID(), c.MachineID())
			assert.GreaterOrEqual(t, c.floor, g.lastMillis())
			require.NoError(t, c.Close())
		})
	}
}

var tagRe = regexp.MustCompile(`\{[^}]*\}`)

// Miniredis cannot check slots: assert the lease scripts' keys share one tag.
func TestLeaseKeysShareTag(t *testing.T) {
	t.Parallel()
	lease, floor := machineKey("seckill:", 7), machineFloorKey("seckill:", 7)
	require.NotEmpty(t, tagRe.FindString(lease))
	assert.Equal(t, tagRe.FindString(lease), tagRe.FindString(floor))
	assert.Equal(t, "seckill:{idgen:7}:lease", lease)
}

// Bad arguments, options and collaborators fail with ErrInvalidConfig; a
// nil option is ignored.
func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	for name, err := range map[string]error{
		"machine -1":    second(New(-1)),
		"machine > max": second(New(MaxMachine + 1)),
		"future epoch":  second(New(1, WithEpoch(time.Now().Add(time.Hour)))),
		"nil clock":     second(New(1, WithClock(nil))),
		"nil redis":     second(AcquireMachine(ctx, nil)),
		"ttl too short": second(AcquireMachine(ctx, rdb, WithTTL(2*time.Millisecond))),
		"negative ttl":  second(AcquireMachine(ctx, rdb, WithTTL(-time.Second))),
	} {
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	g, err := New(3, nil, WithClock(newClock()), GeneratorOption(nil), WithEpoch(testIDEpoch()))
	require.NoError(t, err, "a nil option is ignored")
	assert.EqualValues(t, 3, g.machine)
	l, err := AcquireMachine(ctx, rdb, nil, LeaseOption(nil), WithKeyPrefix(testenv.Prefix(t)), WithObserver(nil))
	require.NoError(t, err, "a nil option is ignored")
	require.NoError(t, l.Close())
}

func second[T any](_ T, err error) error { return err }

// The default epoch, 2024-01-01 UTC as WithEpoch's doc says, is the one
// IDs are made against by default.
func TestDefaultEpoch(t *testing.T) {
	t.Parallel()
	g, err := New(9)
	require.NoError(t, err)
	id, err := g.NextID()
	require.NoError(t, err)
	at, machine, _ := Decompose(id, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	assert.EqualValues(t, 9, machine)
	assert.WithinDuration(t, time.Now(), at, time.Minute)
}

// newClock returns a fake clock standing at the test epoch.
func newClock() *testenv.Clock { return testenv.NewEpochClock(0) }

// testIDEpoch is the ID epoch of every generator on a test clock: a day
// before the test epoch (the default epoch may be after the "past" test
// epoch, or more than 41 bits of milliseconds before a "future" one).
func testIDEpoch() time.Time { return testenv.Epoch().Add(-24 * time.Hour) }

// newGen returns a generator for machine; on a test clock pass WithClock
// and WithEpoch(testIDEpoch()) together.
func newGen(t testing.TB, machine int64, opts ...GeneratorOption) *Generator {
	t.Helper()
	g, err := New(machine, opts...)
	require.NoError(t, err)
	return g
}

// eventually polls cond (a goroutine's start has no clock to move).
func eventually(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timeout: " + msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type ctxKey struct{}

// The lease reports each renewal to the observer as "orderid.lease", with
// the renewing call's context: ok while it holds, lost once another
// instance may have it.
func TestLeaseObserver(t *testing.T) {
	t.Parallel()
	rdb, mr := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	var events []observe.Event
	var ctxs []any
	obs := observe.Func(func(ctx context.Context, e observe.Event) {
		events = append(events, e)
		ctxs = append(ctxs, ctx.Value(ctxKey{}))
	})
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	l, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix), WithTTL(3*time.Second), WithObserver(obs))
	require.NoError(t, err)
	require.NoError(t, l.Renew(ctx))
	mr.FastForward(4 * time.Second) // the lease expires
	require.ErrorIs(t, l.Renew(ctx), ErrLeaseLost)

	require.Len(t, events, 2)
	for i, want := range []string{observe.OK, "lost"} {
		e := events[i]
		assert.Equal(t, "orderid.lease", e.Stage)
		assert.True(t, observe.ValidStage(e.Stage) && observe.ValidWord(e.Outcome))
		assert.Equal(t, want, e.Outcome)
		assert.Equal(t, strconv.FormatInt(l.MachineID(), 10), e.Name)
		assert.Nil(t, e.Err)
		assert.Equal(t, "caller", ctxs[i], "the observer gets the caller's ctx")
	}

	// A Redis failure is an "error" carrying it.
	events = nil
	l2, err := AcquireMachine(ctx, rdb, WithKeyPrefix(prefix+"b:"), WithObserver(obs))
	require.NoError(t, err)
	mr.SetError("boom")
	require.Error(t, l2.Renew(ctx))
	mr.SetError("")
	require.Len(t, events, 1)
	assert.Equal(t, observe.Error, events[0].Outcome)
	assert.Error(t, events[0].Err)
}
