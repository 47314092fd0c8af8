package limiter

import (
	"context"
	"fmt"
)

// Step is one limit of a [Chain]: a limiter and the key to charge in it.
type Step struct {
	Limiter Limiter
	Key     string
	// N, if > 0, is the number of events charged in this step instead of
	// the n passed to Chain.
	N int
}

func (s Step) cost(n int) int {
	if s.N > 0 {
		return s.N
	}
	return n
}

// Chain charges n events to each step in order (user, then device, then
// global) and reports the first refusal.
//
// A refusal or failure by step i means steps after i are never consulted,
// so their budgets are untouched; and steps before i, which had allowed and
// spent n, are refunded (when they implement [Refunder], as every limiter
// of this package does), so a request refused anywhere spends nothing
// anywhere. A refund that fails (Redis down) leaves that earlier budget
// spent — erring toward refusing — and is reported by that limiter's
// redislimit.WithOnFailure hook.
//
// It returns the refusing step's Result and index, or, when every step
// allows, the Result with the fewest Remaining and index -1. A non-nil error
// comes from the failing step (its index is returned); nothing stays spent.
// Order the steps cheapest and most selective first: the per-user limit
// refuses most abusive traffic before the global bucket is touched.
func Chain(ctx context.Context, n int, steps ...Step) (Result, int, error) {
	var tight Result
	var buf [8]bool
	spent := buf[:0] // spent[i]: step i allowed and spent n (not a dry-run pass)
	for i, s := range steps {
		if s.Limiter == nil {
			refund(ctx, steps, spent, n)
			return Result{}, i, fmt.Errorf("%w: chain step %d has a nil limiter", ErrInvalidArgument, i)
		}
		r, err := s.Limiter.AllowN(ctx, s.Key, s.cost(n))
		if err != nil || !r.Allowed {
			refund(ctx, steps, spent, n)
			return r, i, err
		}
		spent = append(spent, !r.DryRunRefused)
		if i == 0 || r.Remaining < tight.Remaining {
			tight = r
		}
	}
	return tight, -1, nil
}

func refund(ctx context.Context, steps []Step, spent []bool, n int) {
	ctx = context.WithoutCancel(ctx)
	for i, ok := range spent {
		if !ok {
			continue
		}
		if rf, isRF := steps[i].Limiter.(Refunder); isRF {
			_ = rf.RefundN(ctx, steps[i].Key, steps[i].cost(n))
		}
	}
}
