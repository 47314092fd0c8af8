package token

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// refusalSentinels and otherSentinels classify every exported error of the
// package; TestEveryErrorClassified fails when a new one is added to
// errors.go without being put in one of them.
var (
	refusalSentinels = map[string]error{
		"ErrMalformed": ErrMalformed, "ErrInvalidSignature": ErrInvalidSignature,
		"ErrUnknownKey": ErrUnknownKey, "ErrNotYetValid": ErrNotYetValid,
		"ErrExpired": ErrExpired, "ErrReplayed": ErrReplayed, "ErrWrongUser": ErrWrongUser,
		"ErrWrongActivity": ErrWrongActivity, "ErrTooEarly": ErrTooEarly,
		"ErrNotFound": ErrNotFound, "ErrUsed": ErrUsed,
	}
	otherSentinels = map[string]error{
		"ErrBadReply": ErrBadReply, "ErrInvalidConfig": ErrInvalidConfig,
		"ErrInvalidArgument": ErrInvalidArgument,
	}
)

// exportedErrors lists the exported package-level variables named Err* in
// errors.go, read from the source.
func exportedErrors(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if n.IsExported() && len(n.Name) > 3 && n.Name[:3] == "Err" {
					names = append(names, n.Name)
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

func TestEveryErrorClassified(t *testing.T) {
	t.Parallel()
	var classified []string
	for n := range refusalSentinels {
		classified = append(classified, n)
	}
	for n := range otherSentinels {
		classified = append(classified, n)
	}
	classified = append(classified, "ErrRefused")
	sort.Strings(classified)
	assert.Equal(t, exportedErrors(t), classified)
}

func TestRefusalUmbrella(t *testing.T) {
	t.Parallel()
	for n, e := range refusalSentinels {
		assert.ErrorIs(t, e, ErrRefused, n)
		assert.ErrorIs(t, wrapf(e), ErrRefused, "%s wrapped", n)
		for m, other := range refusalSentinels {
			if m != n {
				assert.NotErrorIs(t, e, other, "%s is not %s", n, m)
			}
		}
	}
	for n, e := range otherSentinels {
		assert.NotErrorIs(t, e, ErrRefused, n)
		assert.NotErrorIs(t, wrapf(e), ErrRefused, "%s wrapped", n)
	}
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		assert.NotErrorIs(t, e, ErrRefused, e.Error())
	}
	// The messages stay what they were.
	assert.Equal(t, "token: already used", ErrUsed.Error())
	assert.Equal(t, "token: refused", ErrRefused.Error())
}

func wrapf(err error) error { return errors.Join(errors.New("context"), err) }

// TestPoolRefusalsFromRedis drives every denial of Consume and Restore
// through a real script and checks the umbrella, then the failures that are
// not refusals: bad input, a Redis error, a cancelled context.
func TestPoolRefusalsFromRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "9", 2)
		require.NoError(t, err)
		a, err := p.Take(ctx, "9", "alice")
		require.NoError(t, err)
		b, err := p.Take(ctx, "9", "bob")
		require.NoError(t, err)
		refused := func(err, want error) {
			t.Helper()
			require.ErrorIs(t, err, want)
			assert.ErrorIs(t, err, ErrRefused)
		}
		refused(p.Consume(ctx, ConsumeParams{Activity: "9", User: "alice", Token: "AAAAAAAAAAAAAAAAAAAAAA"}), ErrNotFound)
		refused(p.Consume(ctx, ConsumeParams{Activity: "9", User: "alice", Token: b.Token}), ErrWrongUser)
		refused(p.Consume(ctx, ConsumeParams{Activity: "9", User: "alice", Token: "nope"}), ErrMalformed)
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "9", User: "alice", Token: a.Token}))
		refused(p.Consume(ctx, ConsumeParams{Activity: "9", User: "alice", Token: a.Token}), ErrUsed)
		refused(p.Restore(ctx, ConsumeParams{Activity: "9", User: "bob", Token: a.Token}), ErrWrongUser)
		refused(p.Restore(ctx, ConsumeParams{Activity: "9", User: "alice", Token: "AAAAAAAAAAAAAAAAAAAAAA"}), ErrNotFound)
		clk.Advance(6 * time.Minute) // past bob's binding
		refused(p.Consume(ctx, ConsumeParams{Activity: "9", User: "bob", Token: b.Token}), ErrExpired)

		err = p.Consume(ctx, ConsumeParams{Activity: "9{", User: "bob", Token: b.Token})
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.NotErrorIs(t, err, ErrRefused, "bad input is not a refusal")
		_, err = p.Take(ctx, "9", "")
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.NotErrorIs(t, err, ErrRefused)

		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		err = p.Consume(cancelled, ConsumeParams{Activity: "9", User: "bob", Token: b.Token})
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, ErrRefused, "a cancelled call is not a refusal")
	})
}

func TestPoolRedisFailureIsNotRefusal(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	p, err := NewPool(rdb, WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	m.SetError("READONLY")
	ctx := context.Background()
	for _, err := range []error{
		p.Consume(ctx, ConsumeParams{Activity: "9", User: "u", Token: "AAAAAAAAAAAAAAAAAAAAAA"}),
		p.Restore(ctx, ConsumeParams{Activity: "9", User: "u", Token: "AAAAAAAAAAAAAAAAAAAAAA"}),
		func() error { _, err := p.Take(ctx, "9", "u"); return err }(),
	} {
		require.ErrorContains(t, err, "READONLY")
		assert.NotErrorIs(t, err, ErrRefused)
	}
}

// TestSignerRefusals drives every refusal of Sign and Verify and checks
// the umbrella; a replay-guard failure and bad input are not refusals.
func TestSignerRefusals(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	clk := newFakeClock(t0.Add(-time.Hour))
	s, err := NewSigner([]Key{k1}, WithClock(clk), WithReplayGuard(rdb), WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	ctx := context.Background()
	refused := func(err, want error) {
		t.Helper()
		require.ErrorIs(t, err, want)
		assert.ErrorIs(t, err, ErrRefused)
	}
	_, err = s.Sign(SignParams{Activity: "7", User: "alice", Start: start})
	refused(err, ErrTooEarly)
	clk.Set(t0)
	tok := sign(t, s, "7", "alice")
	verify := func(p VerifyParams) error { _, err := s.Verify(ctx, p); return err }
	refused(verify(VerifyParams{Token: tok, Activity: "7", User: "alice"}), ErrNotYetValid)
	clk.Set(start)
	refused(verify(VerifyParams{Token: "!!", Activity: "7", User: "alice"}), ErrMalformed)
	refused(verify(VerifyParams{Token: tok, Activity: "8", User: "alice"}), ErrWrongActivity)
	refused(verify(VerifyParams{Token: tok, Activity: "7", User: "bob"}), ErrWrongUser)
	other, err := NewSigner([]Key{k2}, WithClock(clk))
	require.NoError(t, err)
	_, err = other.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
	refused(err, ErrUnknownKey)
	forged, err := NewSigner([]Key{{ID: k1.ID, Secret: k2.Secret}}, WithClock(clk))
	require.NoError(t, err)
	_, err = forged.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
	refused(err, ErrInvalidSignature)
	require.NoError(t, verify(VerifyParams{Token: tok, Activity: "7", User: "alice"}))
	refused(verify(VerifyParams{Token: tok, Activity: "7", User: "alice"}), ErrReplayed)
	clk.Set(start.Add(time.Hour))
	refused(verify(VerifyParams{Token: tok, Activity: "7", User: "alice"}), ErrExpired)
	_, err = s.Sign(SignParams{Activity: "7", User: "alice", Start: start})
	refused(err, ErrExpired)

	_, err = s.Sign(SignParams{Activity: "{7}", User: "alice", Start: start})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotErrorIs(t, err, ErrRefused)

	clk.Set(start)
	m.SetError("READONLY")
	err = verify(VerifyParams{Token: sign(t, s, "7", "alice"), Activity: "7", User: "alice"})
	require.ErrorContains(t, err, "READONLY")
	assert.NotErrorIs(t, err, ErrRefused, "a replay-guard failure is not a refusal")
}

// TestOptionsBelongToTheirConstructor checks, for every option, which
// constructors' option interfaces its value implements: an option of one
// constructor only must not satisfy the other's interface (so passing it
// there does not compile, and a type assertion fails at run time too).
func TestOptionsBelongToTheirConstructor(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	for name, c := range map[string]struct {
		opt          any
		pool, signer bool
	}{
		"WithKeyPrefix":    {WithKeyPrefix("p:"), true, true},
		"WithClock":        {WithClock(systemClock{}), true, true},
		"WithObserver":     {WithObserver(&recorder{}), true, true},
		"WithMultiplier":   {WithMultiplier(2), true, false},
		"WithBindTTL":      {WithBindTTL(time.Minute), true, false},
		"WithReclaimBatch": {WithReclaimBatch(1), true, false},
		"WithIssueBatch":   {WithIssueBatch(10), true, false},
		"WithLeadTime":     {WithLeadTime(time.Minute), false, true},
		"WithValidity":     {WithValidity(time.Minute), false, true},
		"WithSkew":         {WithSkew(time.Second), false, true},
		"WithReplayGuard":  {WithReplayGuard(rdb), false, true},
		"WithMaxNodeSkew":  {WithMaxNodeSkew(time.Second), false, true},
	} {
		po, isPool := c.opt.(PoolOption)
		so, isSigner := c.opt.(SignerOption)
		assert.Equal(t, c.pool, isPool, "%s is a PoolOption", name)
		assert.Equal(t, c.signer, isSigner, "%s is a SignerOption", name)
		if isPool {
			_, err := NewPool(rdb, po)
			assert.NoError(t, err, "NewPool(%s)", name)
		}
		if isSigner {
			_, err := NewSigner([]Key{k1}, so)
			assert.NoError(t, err, "NewSigner(%s)", name)
		}
	}
}

// TestSharedOptionsApplyToBoth passes the shared options to both
// constructors and checks that each takes effect in each.
func TestSharedOptionsApplyToBoth(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	ctx := context.Background()
	clk := newFakeClock(t0)
	rec := &recorder{}
	shared := []Option{WithKeyPrefix("conv:"), WithClock(clk), WithObserver(rec)}

	poolOpts := []PoolOption{WithMultiplier(1)}
	for _, o := range shared {
		poolOpts = append(poolOpts, o)
	}
	p, err := NewPool(rdb, poolOpts...)
	require.NoError(t, err)
	_, err = p.Issue(ctx, "5", 1)
	require.NoError(t, err)
	g, err := p.Take(context.WithValue(ctx, ctxKey{}, "caller"), "5", "alice")
	require.NoError(t, err)
	assert.True(t, m.Exists(newPoolKeys("conv:", "5").meta), "pool keys carry the prefix")
	assert.Equal(t, clk.Now().Add(5*time.Minute).UnixMilli(), g.ExpiresAt.UnixMilli(), "the deadline is on the injected clock")

	signerOpts := []SignerOption{WithReplayGuard(rdb)}
	for _, o := range shared {
		signerOpts = append(signerOpts, o)
	}
	s, err := NewSigner([]Key{k1}, signerOpts...)
	require.NoError(t, err)
	clk.Set(start)
	tok := sign(t, s, "5", "alice") // refused with ErrTooEarly were the system clock used
	_, err = s.Verify(context.WithValue(ctx, ctxKey{}, "caller"), VerifyParams{Token: tok, Activity: "5", User: "alice"})
	require.NoError(t, err)
	assert.True(t, m.Exists(nonceOf(t, "conv:", "5", tok)), "the nonce key carries the prefix")
	assert.Equal(t, []shape{{StageTake, "granted", "5"}, {StageVerify, "ok", "5"}}, shapes(t, rec.take()))
}

func TestNilOptionsAndCollaborators(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	var nilFunc Option // a nil Option stored in the interface
	_, err := NewPool(rdb, nil, PoolOption(nilFunc), nilFunc)
	assert.NoError(t, err, "nil options are ignored")
	_, err = NewSigner([]Key{k1}, nil, SignerOption(nilFunc), nilFunc)
	assert.NoError(t, err, "nil options are ignored")
	assert.NotPanics(t, func() { _, _ = NewPool(rdb, WithObserver(nil)) })

	_, err = NewPool(nil, WithMultiplier(1))
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil client")
	_, err = NewPool(rdb, WithClock(nil))
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil clock")
	_, err = NewSigner([]Key{k1}, WithClock(nil))
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil clock")
	_, err = NewSigner([]Key{k1}, WithReplayGuard(nil))
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil replay-guard store")
	_, err = NewSigner(nil)
	assert.ErrorIs(t, err, ErrInvalidConfig, "no keys")
}

// TestOneOptionMechanism: every option type is an interface whose methods
// are unexported, so only the package's With… functions make options
// (Option was an exported func type before); and bad configuration,
// including a bad key set, wraps the one ErrInvalidConfig.
func TestOneOptionMechanism(t *testing.T) {
	t.Parallel()
	for _, typ := range []reflect.Type{
		reflect.TypeOf((*Option)(nil)).Elem(),
		reflect.TypeOf((*PoolOption)(nil)).Elem(),
		reflect.TypeOf((*SignerOption)(nil)).Elem(),
	} {
		require.Equal(t, reflect.Interface, typ.Kind(), typ.Name())
		for i := 0; i < typ.NumMethod(); i++ {
			assert.False(t, typ.Method(i).IsExported(), "%s.%s", typ.Name(), typ.Method(i).Name)
		}
	}
	assert.Equal(t, "token: invalid configuration", ErrInvalidConfig.Error())
	s, err := NewSigner([]Key{k1})
	require.NoError(t, err)
	for _, keys := range [][]Key{nil, {{ID: "k", Secret: []byte("short")}}, {k1, k1}} {
		err := s.SetKeys(keys)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%v", keys)
		assert.NotErrorIs(t, err, ErrRefused, "bad configuration is not a refusal")
	}
}
