package risk

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fixed(name string, d Decision, err error) Rule {
	return NewRule(name, func(context.Context, Subject) (Decision, error) { return d, err })
}

// counted wraps a rule and counts its calls.
type counted struct {
	Rule
	mu sync.Mutex
	n  int
}

func (c *counted) Check(ctx context.Context, s Subject) (Decision, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Rule.Check(ctx, s)
}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func TestCheckerCompose(t *testing.T) {
	t.Parallel()
	allow := Decision{}
	chA := Decision{Action: Challenge, Reason: "a"}
	chB := Decision{Action: Challenge, Reason: "b", RetryAfter: time.Second}
	deny := Decision{Action: Deny, Reason: "x", RetryAfter: time.Minute}
	rate := Decision{Action: Deny, Reason: "r", Throttled: true, RetryAfter: time.Second}
	flag := Decision{Flags: []string{"f"}}
	cases := []struct {
		name       string
		rules      []Decision
		errs       []error
		policy     FailurePolicy
		action     Action
		reason     string
		rule       string
		challenges []string
		flags      []string
		degraded   []string
		throttled  bool
		retry      time.Duration
		calls      []int
		err        bool
	}{
		{name: "no rules", action: Allow},
		{name: "all allow", rules: []Decision{allow, allow}, action: Allow, calls: []int{1, 1}},
		{name: "first deny wins and stops", rules: []Decision{allow, deny, rate}, action: Deny, reason: "x", rule: "r1", retry: time.Minute, calls: []int{1, 1, 0}},
		{name: "throttled deny", rules: []Decision{rate, deny}, action: Deny, reason: "r", rule: "r0", throttled: true, retry: time.Second, calls: []int{1, 0}},
		{name: "challenges accumulate", rules: []Decision{chA, allow, chB}, action: Challenge, reason: "a", rule: "r0", challenges: []string{"a", "b"}, calls: []int{1, 1, 1}},
		{name: "deny after challenge wins", rules: []Decision{chA, deny}, action: Deny, reason: "x", rule: "r1", challenges: []string{"a"}, retry: time.Minute, calls: []int{1, 1}},
		{name: "flags kept", rules: []Decision{flag, chB}, action: Challenge, reason: "b", rule: "r1", challenges: []string{"b"}, flags: []string{"f"}, retry: time.Second, calls: []int{1, 1}},
		{name: "fail closed", rules: []Decision{allow, allow, deny}, errs: []error{nil, errDown, nil}, policy: FailClosed, err: true, calls: []int{1, 1, 0}},
		{name: "fail open skips", rules: []Decision{allow, allow, allow}, errs: []error{nil, errDown, nil}, policy: FailOpen, action: Allow, degraded: []string{"r1"}, calls: []int{1, 1, 1}},
		{name: "fail open still denies on other rules", rules: []Decision{allow, allow, deny}, errs: []error{errDown, nil, nil}, policy: FailOpen, action: Deny, reason: "x", rule: "r2", degraded: []string{"r0"}, retry: time.Minute, calls: []int{1, 1, 1}},
		{name: "fail challenge", rules: []Decision{allow, allow}, errs: []error{errDown, nil}, policy: FailChallenge, action: Challenge, reason: ReasonUnavailable, rule: "r0", challenges: []string{ReasonUnavailable}, degraded: []string{"r0"}, calls: []int{1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var rules []Rule
			var cs []*counted
			for i, d := range c.rules {
				var err error
				if c.errs != nil {
					err = c.errs[i]
				}
				cr := &counted{Rule: fixed("r"+string(rune('0'+i)), d, err)}
				cs = append(cs, cr)
				rules = append(rules, cr)
			}
			var failures []string
			var hooked []Decision
			chk, err := NewChecker(rules, WithFailurePolicy(c.policy),
				WithOnFailure(func(_ context.Context, rule string, err error) { failures = append(failures, rule) }),
				WithOnDecision(func(_ context.Context, _ Subject, d Decision) { hooked = append(hooked, d) }))
			require.NoError(t, err)
			d, err := chk.Check(bg, Subject{UserID: "u"})
			for i, cr := range cs {
				assert.Equal(t, c.calls[i], cr.n, "calls of rule %d", i)
			}
			nerr := 0
			for _, e := range c.errs {
				if e != nil {
					nerr++
				}
			}
			assert.Len(t, failures, nerr, "every failure reported")
			if c.err {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrUnavailable)
				assert.ErrorIs(t, err, errDown)
				assert.Empty(t, hooked)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.action, d.Action)
			assert.Equal(t, c.reason, d.Reason)
			assert.Equal(t, c.rule, d.Rule)
			assert.Equal(t, c.challenges, d.Challenges)
			assert.Equal(t, c.flags, d.Flags)
			assert.Equal(t, c.degraded, d.Degraded)
			assert.Equal(t, c.throttled, d.Throttled)
			assert.Equal(t, c.retry, d.RetryAfter)
			assert.False(t, d.DryRun)
			require.Len(t, hooked, 1)
			assert.Equal(t, d, hooked[0])
		})
	}
}

func TestCheckerDryRun(t *testing.T) {
	t.Parallel()
	var seen []Decision
	chk, err := NewChecker([]Rule{fixed("bl", Decision{Action: Deny, Reason: "x"}, nil)}, WithDryRun(true),
		WithOnDecision(func(_ context.Context, _ Subject, d Decision) { seen = append(seen, d) }))
	require.NoError(t, err)
	d, err := chk.Check(bg, Subject{})
	require.NoError(t, err)
	assert.Equal(t, Allow, d.Action, "dry run allows")
	assert.True(t, d.DryRun)
	assert.Equal(t, Deny, d.DryRunAction)
	assert.Equal(t, "x", d.Reason)
	require.Len(t, seen, 1)
	assert.Equal(t, Deny, seen[0].Action, "hook sees the real action")
	assert.True(t, seen[0].DryRun)
}

func TestCheckerContextCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	r := NewRule("slow", func(ctx context.Context, _ Subject) (Decision, error) { return Decision{}, ctx.Err() })
	chk, err := NewChecker([]Rule{r}, WithFailurePolicy(FailOpen))
	require.NoError(t, err)
	_, err = chk.Check(ctx, Subject{})
	assert.ErrorIs(t, err, context.Canceled, "a cancelled request is not failed open")
}

func TestNewCheckerErrors(t *testing.T) {
	t.Parallel()
	_, err := NewChecker([]Rule{nil})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewChecker(nil, WithFailurePolicy(FailurePolicy(9)))
	assert.ErrorIs(t, err, ErrInvalidConfig)
	for _, a := range []Action{Allow, Challenge, Deny, Action(7)} {
		assert.NotEmpty(t, a.String())
	}
	for _, p := range []FailurePolicy{FailClosed, FailOpen, FailChallenge, FailurePolicy(7)} {
		assert.NotEmpty(t, p.String())
	}
}

func TestCheckerDryRunFailure(t *testing.T) {
	t.Parallel()
	var seen []Decision
	chk, err := NewChecker([]Rule{fixed("bl", Decision{}, errDown), fixed("x", Decision{Action: Challenge, Reason: "c"}, nil)},
		WithDryRun(true), WithOnDecision(func(_ context.Context, _ Subject, d Decision) { seen = append(seen, d) }))
	require.NoError(t, err)
	d, err := chk.Check(bg, Subject{})
	require.NoError(t, err, "dry run never refuses, not even on failure")
	assert.Equal(t, Allow, d.Action)
	assert.Equal(t, Deny, d.DryRunAction)
	assert.Equal(t, ReasonUnavailable, d.Reason)
	assert.Equal(t, []string{"bl"}, d.Degraded)
	require.Len(t, seen, 1)
	assert.Equal(t, Deny, seen[0].Action)
}
