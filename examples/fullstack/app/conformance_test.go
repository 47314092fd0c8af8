package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouttest"
	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// kitGrace is the reconciler's grace in the conformance runs: Drain waits
// (in real time: the app's reconciler takes no clock) until every held
// reservation without an order is older than this, so it is short.
const kitGrace = time.Second

// TestConformance runs the checkout conformance kit against the reference
// deployment (the variant scenarios on a sale in sizes, -variants): a fresh embedded app (miniredis, SQLite, kfake) per scenario,
// its own checkout (the app's step edit, then the kit's), credentials from
// its own parts (access-token pool, demo captcha, signer), the pipeline
// drained through its real Kafka consumer group, outbox relay and
// reconciler. Every fault is real: Kafka down is the embedded broker
// refusing produce requests, the outbox down is the database failing the
// outbox insert, Freeze and Pause are the deductor's.
func TestConformance(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	checkouttest.Run(t, func(t testing.TB, c checkouttest.Config) *checkouttest.Sale {
		cfg := embeddedConfig(1, c.Stock) // the kit's buyers are its own IDs, not demo users
		cfg.PerUserLimit = max(c.PerUserLimit, 1)
		if len(c.Variants) > 0 { // the kit's variant scenarios: a sale in sizes
			cfg.Variants = c.Variants
			cfg.Stock = 0
			for _, v := range c.Variants {
				cfg.Stock += v.Stock
			}
		}
		// The kit sends up to 12 attempts of one buyer within a second;
		// the per-user window (a rate limit, which keeps no units) would
		// answer some of them "limited".
		cfg.UserRate = 1000
		// Drain runs the reconciler itself once Kafka and the outbox are
		// caught up; the worker's period stays out of the scenarios.
		cfg.ReconcileEvery = time.Hour
		cfg.ReconcileGrace = kitGrace
		app.SetCheckoutSteps(&cfg, c.Steps)
		// The preloader rebuilds a frozen sale once the pipeline is caught
		// up; the frozen scenario's freeze must be the kit's alone.
		app.SetPreloadEvery(&cfg, time.Hour)
		outboxDown := app.FailOutboxWrites(&cfg)
		a, _ := startApp(t, cfg)
		act := app.ActivityID(a)
		d := app.Stock(a)
		return &checkouttest.Sale{
			Checkout: app.Checkout(a),
			Attempt: func(ctx context.Context, user string) (checkout.Attempt, error) {
				return app.Credentials(ctx, a, user)
			},
			Drain: func(ctx context.Context) error { return drainApp(ctx, a) },
			Counts: func(ctx context.Context) (checkouttest.Counts, error) {
				n, err := checkouttest.Count(ctx, d, app.DB(a), act, c.Stock)
				if err != nil {
					return n, err
				}
				ts, err := app.TokenStats(ctx, a)
				if err != nil {
					return n, err
				}
				n.TokensUsed = ts.Used
				return n, nil
			},
			Faults: checkouttest.Faults{
				KafkaDown:  app.FailKafka(a),
				OutboxDown: outboxDown,
				Freeze: func(ctx context.Context, frozen bool) error {
					if frozen {
						return d.Freeze(ctx, act)
					}
					return d.Unfreeze(ctx, act)
				},
				Pause: func(ctx context.Context, paused bool) error {
					if paused {
						return d.Pause(ctx, act)
					}
					return d.Resume(ctx, act)
				},
			},
		}
	})
}

// drainApp waits, within drainBound, until nothing is in flight: no outbox
// row pending (the relay's loop), no consumer lag on the order topic (the
// consumer group's loop, offsets committed), and then the app's reconciler
// run with every held reservation either ordered or released (the
// invariants' "settled"): a reservation held without an order is released
// by the reconciler once it is older than the grace. It polls these
// conditions; the loops it waits for are the app's own.
func drainApp(ctx context.Context, a *app.App) error {
	ctx, cancel := context.WithTimeout(ctx, drainBound)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	state := "not checked"
	for {
		pending, lag, err := app.Backlog(ctx, a)
		switch {
		case err != nil:
			state = fmt.Sprintf("backlog: %v", err) // Kafka's metadata may lag a start: try again
		case pending > 0 || lag > 0:
			state = fmt.Sprintf("%d outbox rows pending, consumer lag %d", pending, lag)
		default:
			if _, err := app.Reconcile(ctx, a); err != nil {
				return fmt.Errorf("reconcile: %w", err)
			}
			iv, err := a.Invariants(ctx)
			if err != nil {
				return fmt.Errorf("invariants: %w", err)
			}
			if iv.Settled {
				return nil
			}
			state = fmt.Sprintf("%d held reservations without an order (grace %v), %d outbox rows pending", iv.InFlight, kitGrace, iv.OutboxPending)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pipeline did not drain within %v: %s", drainBound, state)
		case <-tick.C:
		}
	}
}
