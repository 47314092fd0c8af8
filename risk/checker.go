package risk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Rule is one check of a [Checker]. Check returns a decision (Allow,
// Challenge or Deny with a reason code) or an error when a dependency
// failed; a denial is never an error. [Blacklist], [Behaviour] and
// [DeviceBinder] are rules; wrap a function with [NewRule].
type Rule interface {
	// Name identifies the rule in decisions, hooks and logs.
	Name() string
	Check(ctx context.Context, s Subject) (Decision, error)
}

type funcRule struct {
	name string
	fn   func(ctx context.Context, s Subject) (Decision, error)
}

func (r funcRule) Name() string { return r.name }
func (r funcRule) Check(ctx context.Context, s Subject) (Decision, error) {
	return r.fn(ctx, s)
}

// NewRule makes a [Rule] from a function.
func NewRule(name string, fn func(ctx context.Context, s Subject) (Decision, error)) Rule {
	return funcRule{name: name, fn: fn}
}

// Checker composes rules into one [Decision]: rules run in order, the first
// Deny wins and stops the evaluation, Challenges accumulate (their reasons
// are all kept), and an all-Allow run allows. A Checker is safe for
// concurrent use.
type Checker struct {
	rules  []Rule
	o      options
	nofuse error    // why CheckCheck has no fused form; nil if it has
	luas   sync.Map // the fused Lua texts by shape (fusedKey)
}

// NewChecker returns a Checker over rules (evaluated in this order; put the
// cheap, decisive ones — the blacklist — first). Options: [WithFailurePolicy],
// [WithDryRun], [WithOnDecision], [WithOnFailure], [WithLogger],
// [WithObserver] (each a [CheckerOption]); a nil option is ignored. A nil
// rule or a bad option fails with [ErrInvalidConfig].
func NewChecker(rules []Rule, opts ...CheckerOption) (*Checker, error) {
	o, err := buildOptions(opts, CheckerOption.applyChecker)
	if err != nil {
		return nil, err
	}
	rs := make([]Rule, 0, len(rules))
	for i, r := range rules {
		if r == nil {
			return nil, fmt.Errorf("risk: rule %d is nil: %w", i, ErrInvalidConfig)
		}
		rs = append(rs, r)
	}
	return &Checker{rules: rs, o: o, nofuse: noFusedForm(rs)}, nil
}

// Check evaluates the rules for s. The error is non-nil only under
// [FailClosed] when a rule failed (it wraps [ErrUnavailable] and the rule's
// error) or when ctx is done; the decision is then the zero Decision and
// must not be used to allow. In dry-run mode a FailClosed failure is
// reported as a would-be Deny with reason [ReasonUnavailable] instead.
func (c *Checker) Check(ctx context.Context, s Subject) (Decision, error) {
	var start time.Time // measured only for the observer
	if c.o.observer != nil {
		start = time.Now()
	}
	return c.decide(ctx, s, start, func(_ int, r Rule) (Decision, error) { return r.Check(ctx, s) })
}

// decide is the aggregation of Check and of its fused form: check(i, r) is
// the answer of rule i, r.
func (c *Checker) decide(ctx context.Context, s Subject, start time.Time, check func(i int, r Rule) (Decision, error)) (Decision, error) {
	var out Decision
	for i, r := range c.rules {
		d, err := check(i, r)
		if err != nil {
			c.reportFailure(ctx, r.Name(), err)
			if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return Decision{}, c.failed(ctx, start, fmt.Errorf("risk: rule %s: %w", r.Name(), err))
			}
			switch c.o.failure {
			case FailOpen:
				out.Degraded = append(out.Degraded, r.Name())
				continue
			case FailChallenge:
				out.Degraded = append(out.Degraded, r.Name())
				d = Decision{Action: Challenge, Reason: ReasonUnavailable}
			default:
				if !c.o.dryRun {
					return Decision{}, c.failed(ctx, start, fmt.Errorf("risk: rule %s: %w: %w", r.Name(), ErrUnavailable, err))
				}
				// Dry run never refuses: report the would-be refusal.
				out.Degraded = append(out.Degraded, r.Name())
				d = Decision{Action: Deny, Reason: ReasonUnavailable}
			}
		}
		out.Flags = append(out.Flags, d.Flags...)
		switch d.Action {
		case Deny:
			out.Action = Deny
			out.Reason = d.Reason
			out.Rule = r.Name()
			out.Throttled = d.Throttled
			out.RetryAfter = d.RetryAfter
			return c.finish(ctx, s, out, start), nil
		case Challenge:
			if out.Action == Allow {
				out.Action = Challenge
				out.Reason = d.Reason
				out.Rule = r.Name()
				out.RetryAfter = d.RetryAfter
			}
			out.Challenges = append(out.Challenges, d.Reason)
		}
	}
	return c.finish(ctx, s, out, start), nil
}

// failed reports a Check that ended without a decision and returns err.
func (c *Checker) failed(ctx context.Context, start time.Time, err error) error {
	if c.o.observer != nil {
		c.observeCheck(ctx, start, Decision{}, err)
	}
	return err
}

func (c *Checker) finish(ctx context.Context, s Subject, d Decision, start time.Time) Decision {
	if c.o.dryRun {
		// The hook sees the real action (with DryRun set); the caller gets
		// an allow.
		d.DryRun = true
		d.DryRunAction = d.Action
	}
	if c.o.observer != nil {
		c.observeCheck(ctx, start, d, nil)
	}
	if c.o.onDecision != nil {
		c.o.onDecision(ctx, s, d)
	}
	if c.o.dryRun {
		d.Action = Allow
	}
	return d
}

func (c *Checker) reportFailure(ctx context.Context, rule string, err error) {
	c.o.logger.WarnContext(ctx, "risk: rule failed", "rule", rule, "policy", c.o.failure.String(), "err", err)
	if c.o.onFailure != nil {
		c.o.onFailure(ctx, rule, err)
	}
}
