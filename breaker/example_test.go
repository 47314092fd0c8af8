package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckillkit/seckill/breaker"
)

// manualClock is a clock the example moves by hand, so the output does not
// depend on timing.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time          { return c.t }
func (c *manualClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func ExampleNew() {
	// A fixed date is safe here: the breaker reads only this fake clock.
	clk := &manualClock{t: time.Unix(0, 0)}
	b, err := breaker.New("redis",
		breaker.WithConsecutiveFailures(3),
		breaker.WithOpenTimeout(2*time.Second),
		breaker.WithClock(clk),
		breaker.WithOnStateChange(func(_ context.Context, name string, from, to breaker.State) {
			fmt.Printf("%s: %s -> %s\n", name, from, to)
		}),
	)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	redisDown := errors.New("dial tcp: connection refused")

	for range 3 {
		_ = b.Execute(ctx, func(context.Context) error { return redisDown })
	}
	err = b.Execute(ctx, func(context.Context) error { return nil })
	fmt.Println("while open:", err, errors.Is(err, breaker.ErrOpen))

	clk.Advance(2 * time.Second)
	err = b.Execute(ctx, func(context.Context) error { return nil }) // the probe
	fmt.Println("probe:", err)
	fmt.Println("state:", b.State())
	// Output:
	// redis: closed -> open
	// while open: breaker: open true
	// redis: open -> half-open
	// redis: half-open -> closed
	// probe: <nil>
	// state: closed
}

func ExampleDo() {
	b, err := breaker.New("stock")
	if err != nil {
		panic(err)
	}
	left, err := breaker.Do(context.Background(), b, func(ctx context.Context) (int64, error) {
		return 41, nil // e.g. the result of a Redis script
	})
	fmt.Println(left, err)
	// Output: 41 <nil>
}

func ExampleBreaker_Allow() {
	b, err := breaker.New("kafka")
	if err != nil {
		panic(err)
	}
	done, err := b.Allow()
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	// ... start an asynchronous send; report its outcome when it completes.
	sendErr := error(nil)
	done(sendErr)
	done(sendErr) // a second call is ignored
	fmt.Println(b.Counts().Successes)
	// Output: 1
}

func ExampleWithFailureRatio() {
	// A fixed date is safe here: the breaker reads only this fake clock.
	clk := &manualClock{t: time.Unix(0, 0)}
	b, err := breaker.New("db",
		breaker.WithConsecutiveFailures(0),     // only the ratio trips
		breaker.WithFailureRatio(0.5, 10),      // >= 50% failures over >= 10 calls
		breaker.WithWindow(10*time.Second, 10), // in the last 10s, 1s buckets
		breaker.WithClock(clk),
	)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := range 10 {
		_ = b.Execute(ctx, func(context.Context) error {
			if i%3 == 0 {
				return errors.New("timeout")
			}
			return nil
		})
	}
	c := b.Counts()
	fmt.Println(c.State, c.Successes, c.Failures)
	// Output: closed 6 4
}

func ExampleWithClassifier() {
	errSoldOut := errors.New("sold out")
	b, err := breaker.New("stock", breaker.WithConsecutiveFailures(1),
		breaker.WithClassifier(func(err error) breaker.Outcome {
			if errors.Is(err, errSoldOut) {
				return breaker.Success // a business answer: the dependency is healthy
			}
			return breaker.DefaultClassifier(err)
		}))
	if err != nil {
		panic(err)
	}
	_ = b.Execute(context.Background(), func(context.Context) error { return errSoldOut })
	fmt.Println(b.State())
	// Output: closed
}
