package breaker_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/breaker"
)

func TestNewValidation(t *testing.T) {
	t.Parallel()
	var nilClock breaker.Clock
	bad := []struct {
		name string
		opts []breaker.Option
	}{
		{"negative consecutive", []breaker.Option{breaker.WithConsecutiveFailures(-1)}},
		{"no trip condition", []breaker.Option{breaker.WithConsecutiveFailures(0)}},
		{"ratio zero", []breaker.Option{breaker.WithFailureRatio(0, 10)}},
		{"ratio negative", []breaker.Option{breaker.WithFailureRatio(-0.5, 10)}},
		{"ratio above one", []breaker.Option{breaker.WithFailureRatio(1.01, 10)}},
		{"ratio NaN", []breaker.Option{breaker.WithFailureRatio(math.NaN(), 10)}},
		{"ratio +Inf", []breaker.Option{breaker.WithFailureRatio(math.Inf(1), 10)}},
		{"min requests zero", []breaker.Option{breaker.WithFailureRatio(0.5, 0)}},
		{"window zero", []breaker.Option{breaker.WithWindow(0, 10)}},
		{"window negative", []breaker.Option{breaker.WithWindow(-time.Second, 10)}},
		{"buckets zero", []breaker.Option{breaker.WithWindow(time.Second, 0)}},
		{"buckets too many", []breaker.Option{breaker.WithWindow(time.Hour, 1025)}},
		{"window shorter than buckets", []breaker.Option{breaker.WithWindow(5*time.Nanosecond, 10)}},
		{"open timeout zero", []breaker.Option{breaker.WithOpenTimeout(0)}},
		{"open timeout negative", []breaker.Option{breaker.WithOpenTimeout(-time.Second)}},
		{"probe limit zero", []breaker.Option{breaker.WithProbeLimit(0)}},
		{"successes zero", []breaker.Option{breaker.WithSuccessesToClose(0)}},
		{"nil classifier", []breaker.Option{breaker.WithClassifier(nil)}},
		{"nil clock", []breaker.Option{breaker.WithClock(nilClock)}},
		{"several at once", []breaker.Option{breaker.WithProbeLimit(-1), breaker.WithOpenTimeout(0)}},
	}
	if strconv.IntSize == 64 { // an int can exceed the uint32 run counter
		tooLarge := int64(math.MaxUint32) + 1
		bad = append(bad, struct {
			name string
			opts []breaker.Option
		}{"consecutive too large", []breaker.Option{breaker.WithConsecutiveFailures(int(tooLarge))}})
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b *breaker.Breaker
			var err error
			require.NotPanics(t, func() { b, err = breaker.New("x", tc.opts...) })
			require.Error(t, err)
			assert.Nil(t, b)
			assert.True(t, errors.Is(err, breaker.ErrInvalidConfig), "%v", err)
			assert.Contains(t, err.Error(), "breaker: invalid configuration: ")
		})
	}

	good := []struct {
		name string
		opts []breaker.Option
	}{
		{"defaults", nil},
		{"ratio only", []breaker.Option{breaker.WithConsecutiveFailures(0), breaker.WithFailureRatio(1, 1)}},
		{"window without ratio", []breaker.Option{breaker.WithWindow(time.Minute, 1024)}},
		{"one bucket", []breaker.Option{breaker.WithWindow(time.Nanosecond, 1), breaker.WithFailureRatio(0.5, 1)}},
		{"nil hook is no hook", []breaker.Option{breaker.WithOnStateChange(nil)}},
		{"nil option is ignored", []breaker.Option{nil, breaker.WithProbeLimit(2), nil}},
		{"everything", []breaker.Option{
			breaker.WithConsecutiveFailures(math.MaxInt32), breaker.WithFailureRatio(0.25, 100),
			breaker.WithWindow(time.Minute, 60), breaker.WithOpenTimeout(time.Second), breaker.WithProbeLimit(10),
			breaker.WithSuccessesToClose(20), breaker.WithClassifier(breaker.DefaultClassifier),
			breaker.WithClock(newFakeClock()), breaker.WithOnStateChange(func(context.Context, string, breaker.State, breaker.State) {}),
		}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := breaker.New("ok", tc.opts...)
			require.NoError(t, err)
			assert.Equal(t, "ok", b.Name())
			assert.Equal(t, breaker.Closed, b.State())
		})
	}
}

func TestStrings(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "closed", breaker.Closed.String())
	assert.Equal(t, "open", breaker.Open.String())
	assert.Equal(t, "half-open", breaker.HalfOpen.String())
	assert.Equal(t, "state(9)", breaker.State(9).String())
	assert.Equal(t, "success", breaker.Success.String())
	assert.Equal(t, "failure", breaker.Failure.String())
	assert.Equal(t, "ignore", breaker.Ignore.String())
	assert.Equal(t, "outcome(7)", breaker.Outcome(7).String())
	// The numeric values are part of the API (metrics gauges export them).
	assert.Equal(t, []int{0, 1, 2}, []int{int(breaker.Closed), int(breaker.HalfOpen), int(breaker.Open)})
}
