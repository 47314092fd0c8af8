package captcha

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// refusalSentinels and otherSentinels classify every exported error of the
// package; TestEveryErrorClassified fails when errors.go gains one that is
// in neither.
var (
	refusalSentinels = map[string]error{
		"ErrNotFound": ErrNotFound, "ErrWrongAnswer": ErrWrongAnswer,
		"ErrTooManyAttempts": ErrTooManyAttempts, "ErrWrongUser": ErrWrongUser,
	}
	otherSentinels = map[string]error{
		"ErrBadReply": ErrBadReply, "ErrGenerator": ErrGenerator,
		"ErrInvalidConfig": ErrInvalidConfig, "ErrInvalidArgument": ErrInvalidArgument,
	}
)

func TestEveryErrorClassified(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var declared []string
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
						declared = append(declared, n.Name)
					}
				}
			}
		}
	}
	classified := []string{"ErrRefused"}
	for n := range refusalSentinels {
		classified = append(classified, n)
	}
	for n := range otherSentinels {
		classified = append(classified, n)
	}
	sort.Strings(declared)
	sort.Strings(classified)
	assert.Equal(t, declared, classified)
}

func TestRefusalUmbrella(t *testing.T) {
	t.Parallel()
	for n, e := range refusalSentinels {
		assert.ErrorIs(t, e, ErrRefused, n)
		assert.ErrorIs(t, errors.Join(errors.New("x"), e), ErrRefused, "%s wrapped", n)
		for m, other := range refusalSentinels {
			if m != n {
				assert.NotErrorIs(t, e, other, "%s is not %s", n, m)
			}
		}
	}
	assert.ErrorIs(t, &AttemptsError{Remaining: 2}, ErrRefused)
	for n, e := range otherSentinels {
		assert.NotErrorIs(t, e, ErrRefused, n)
	}
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		assert.NotErrorIs(t, e, ErrRefused)
	}
	assert.Equal(t, "captcha: wrong answer", ErrWrongAnswer.Error())
}

// TestVerifyRefusalsAreRefused drives every denial of Verify through the
// script and checks the umbrella; a Redis failure, a cancelled context and
// bad input to Generate are not refusals.
func TestVerifyRefusalsAreRefused(t *testing.T) {
	t.Parallel()
	eachRedis(t, fixed("q", "right"), func(t *testing.T, s *Store, _ redis.UniversalClient) {
		ctx := context.Background()
		refused := func(err, want error) {
			t.Helper()
			require.ErrorIs(t, err, want)
			assert.ErrorIs(t, err, ErrRefused)
		}
		ch, err := s.Generate(ctx, GenerateParams{User: "alice"})
		require.NoError(t, err)
		refused(s.Verify(ctx, VerifyParams{ID: "bad id", Answer: "right", User: "alice"}), ErrNotFound)
		refused(s.Verify(ctx, VerifyParams{ID: newID(), Answer: "right", User: "alice"}), ErrNotFound)
		refused(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "right", User: "bob"}), ErrWrongUser)
		refused(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "wrong", User: "alice"}), ErrWrongAnswer)
		refused(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "wrong", User: "alice"}), ErrTooManyAttempts)

		// Swapped fields no longer compile silently; swapped values are refused.
		ch, err = s.Generate(ctx, GenerateParams{User: "alice"})
		require.NoError(t, err)
		refused(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "alice", User: "right"}), ErrWrongUser)
		require.NoError(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "right", User: "alice"}))

		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		err = s.Verify(cancelled, VerifyParams{ID: newID(), Answer: "right", User: "alice"})
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, ErrRefused, "a cancelled call is not a refusal")

		_, err = s.Generate(ctx, GenerateParams{User: strings.Repeat("u", 257)})
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.NotErrorIs(t, err, ErrRefused)
	}, WithMaxAttempts(2))
}

func TestRedisFailureIsNotRefusal(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	s, err := New(rdb, fixed("q", "a"), WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	m.SetError("READONLY")
	err = s.Verify(context.Background(), VerifyParams{ID: newID(), Answer: "a"})
	require.ErrorContains(t, err, "READONLY")
	assert.NotErrorIs(t, err, ErrRefused)
}

// TestOneOptionMechanism: Option is an interface with an unexported
// method, so only the package's With… functions make one (it was an
// exported func type that any func(*options) literal converted to), and a
// nil one is ignored.
func TestOneOptionMechanism(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeOf((*Option)(nil)).Elem()
	require.Equal(t, reflect.Interface, typ.Kind())
	for i := 0; i < typ.NumMethod(); i++ {
		assert.False(t, typ.Method(i).IsExported(), typ.Method(i).Name)
	}
	_, err := New(redis.NewClient(&redis.Options{}), textGenerator(t), nil, WithTTL(time.Second))
	require.NoError(t, err)
}

// TestInvalidConfigSentinel: bad configuration wraps the package's one
// sentinel, named like every package's.
func TestInvalidConfigSentinel(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "captcha: invalid configuration", ErrInvalidConfig.Error())
	_, err := New(nil, textGenerator(t))
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// textGenerator is a text-only arithmetic generator.
func textGenerator(t *testing.T) Generator {
	g, err := Arithmetic(Style{}, true)
	require.NoError(t, err)
	return g
}
