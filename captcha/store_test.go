package captcha

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

var (
	_ redis.Scripter = (*redis.Client)(nil)
	_ redis.Scripter = (*redis.ClusterClient)(nil)
	_ redis.Scripter = (*redis.Ring)(nil)
	_ Generator      = GeneratorFunc(nil)
)

// fixed is a deterministic generator: question and answer given.
func fixed(q, a string) Generator {
	return GeneratorFunc(func(context.Context, Request) (Puzzle, error) {
		return Puzzle{Question: q, Answer: a}, nil
	})
}

// eachRedis runs f against every Redis kind available.
func eachRedis(t *testing.T, gen Generator, f func(t *testing.T, s *Store, rdb redis.UniversalClient), opts ...Option) {
	t.Helper()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s, err := New(rdb, gen, append([]Option{WithKeyPrefix(testenv.Prefix(t))}, opts...)...)
			require.NoError(t, err)
			f(t, s, rdb)
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	_, err := New(nil, fixed("q", "a"))
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil client")
	_, err = New(rdb, nil)
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil generator")
	for i, o := range []Option{WithTTL(0), WithMaxAttempts(0), WithClock(nil)} {
		_, err := New(rdb, fixed("q", "a"), o)
		assert.ErrorIs(t, err, ErrInvalidConfig, "option %d", i)
	}
	_, err = New(rdb, fixed("q", "a"), nil, WithObserver(nil))
	assert.NoError(t, err, "a nil option and a nil observer are ignored")
}

func TestGenerateStores(t *testing.T) {
	t.Parallel()
	// The clock only stamps ExpiresAt; the key's TTL is a relative PEXPIRE,
	// so an Epoch clock is safe on a real server too.
	clk := testenv.NewEpochClock(0)
	now := clk.Now()
	eachRedis(t, fixed("2+2=?", " 4 "), func(t *testing.T, s *Store, rdb redis.UniversalClient) {
		ctx := context.Background()
		ch, err := s.Generate(ctx, GenerateParams{User: "alice"})
		require.NoError(t, err)
		assert.True(t, ValidID(ch.ID), ch.ID)
		assert.Equal(t, "2+2=?", ch.Question)
		assert.Equal(t, now.Add(time.Minute), ch.ExpiresAt)
		key := challengeKey(s.opts.prefix, ch.ID)
		h, err := rdb.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "4", "u": "alice", "n": "0"}, h, "normalised answer stored")
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		assert.InDelta(t, time.Minute.Seconds(), ttl.Seconds(), 2)
	}, WithTTL(time.Minute), WithClock(clk))
}

// With the default (system) clock, ExpiresAt is when the server drops the
// challenge: time.Now() + the key's PTTL, give or take the round trip.
func TestExpiresAtMatchesServerTTL(t *testing.T) {
	t.Parallel()
	eachRedis(t, fixed("q", "a"), func(t *testing.T, s *Store, rdb redis.UniversalClient) {
		ctx := context.Background()
		ch, err := s.Generate(ctx, GenerateParams{})
		require.NoError(t, err)
		ttl, err := rdb.PTTL(ctx, challengeKey(s.opts.prefix, ch.ID)).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0))
		assert.WithinDuration(t, time.Now().Add(ttl), ch.ExpiresAt, 2*time.Second)
	}, WithTTL(time.Hour))
}

// TestVerifyRefusals counts every refusal path of a challenge.
func TestVerifyRefusals(t *testing.T) {
	t.Parallel()
	eachRedis(t, fixed("", "XkCd7"), func(t *testing.T, s *Store, _ redis.UniversalClient) {
		ctx := context.Background()
		got := map[error]int{}
		count := func(err error) {
			for _, e := range []error{ErrNotFound, ErrWrongUser, ErrWrongAnswer, ErrTooManyAttempts} {
				if errors.Is(err, e) {
					got[e]++
				}
			}
		}

		// solved once, then reused
		ch, err := s.Generate(ctx, GenerateParams{User: "alice"})
		require.NoError(t, err)
		count(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "xkcd7", User: "mallory"})) // right answer, wrong user
		require.NoError(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "  XKCD7\t", User: "alice"}), "trimmed, case-insensitive")
		count(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "xkcd7", User: "alice"})) // reused

		// wrong N times
		ch, err = s.Generate(ctx, GenerateParams{})
		require.NoError(t, err)
		for i := 1; i < 3; i++ {
			err := s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "nope", User: ""})
			var ae *AttemptsError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, 3-i, ae.Remaining)
			count(err)
		}
		count(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "nope", User: ""}))  // third wrong: burnt
		count(s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "xkcd7", User: ""})) // right answer too late
		count(s.Verify(ctx, VerifyParams{ID: "not-an-id", Answer: "xkcd7", User: ""}))
		count(s.Verify(ctx, VerifyParams{ID: newID(), Answer: "xkcd7", User: ""})) // unknown

		assert.Equal(t, map[error]int{ErrWrongUser: 1, ErrNotFound: 4, ErrWrongAnswer: 2, ErrTooManyAttempts: 1}, got)
	}, WithMaxAttempts(3))
}

func TestWrongUserDoesNotBurnAttempts(t *testing.T) {
	t.Parallel()
	eachRedis(t, fixed("", "abc"), func(t *testing.T, s *Store, _ redis.UniversalClient) {
		ctx := context.Background()
		ch, err := s.Generate(ctx, GenerateParams{User: "alice"})
		require.NoError(t, err)
		for range 5 {
			assert.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "zzz", User: "mallory"}), ErrWrongUser)
		}
		assert.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "zzz", User: ""}), ErrWrongUser, "anonymous caller of a bound challenge")
		require.NoError(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "abc", User: "alice"}))
	}, WithMaxAttempts(2))
}

func TestLongAnswerCountsAsWrong(t *testing.T) {
	t.Parallel()
	eachRedis(t, fixed("", "abc"), func(t *testing.T, s *Store, _ redis.UniversalClient) {
		ctx := context.Background()
		ch, err := s.Generate(ctx, GenerateParams{})
		require.NoError(t, err)
		long := "abc" + string(make([]byte, maxAnswerLen))
		assert.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: long, User: ""}), ErrTooManyAttempts)
	}, WithMaxAttempts(1))
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	s, err := New(rdb, fixed("", "abc"), WithTTL(time.Minute))
	require.NoError(t, err)
	ctx := context.Background()
	ch, err := s.Generate(ctx, GenerateParams{})
	require.NoError(t, err)
	ch2, err := s.Generate(ctx, GenerateParams{})
	require.NoError(t, err)
	m.FastForward(time.Minute - time.Millisecond)
	require.NoError(t, s.Verify(ctx, VerifyParams{ID: ch2.ID, Answer: "abc", User: ""}), "1 ms before expiry")
	m.FastForward(time.Millisecond)
	assert.ErrorIs(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "abc", User: ""}), ErrNotFound, "expired")
}

func TestConcurrentDoubleVerify(t *testing.T) {
	t.Parallel()
	eachRedis(t, fixed("", "abc"), func(t *testing.T, s *Store, _ redis.UniversalClient) {
		ctx := context.Background()
		for round := range 3 {
			ch, err := s.Generate(ctx, GenerateParams{User: "u"})
			require.NoError(t, err)
			var ok, notFound atomic.Int64
			var wg sync.WaitGroup
			for range 48 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					switch err := s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "ABC", User: "u"}); {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, ErrNotFound):
						notFound.Add(1)
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			assert.EqualValues(t, 1, ok.Load(), "round %d: exactly one success", round)
			assert.EqualValues(t, 47, notFound.Load())
		}
	})
}

func TestConcurrentWrongAnswersBurnExactly(t *testing.T) {
	t.Parallel()
	eachRedis(t, fixed("", "abc"), func(t *testing.T, s *Store, _ redis.UniversalClient) {
		ctx := context.Background()
		ch, err := s.Generate(ctx, GenerateParams{})
		require.NoError(t, err)
		var wrong, burnt, gone atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch err := s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: fmt.Sprint(i), User: ""}); {
				case errors.Is(err, ErrWrongAnswer):
					wrong.Add(1)
				case errors.Is(err, ErrTooManyAttempts):
					burnt.Add(1)
				case errors.Is(err, ErrNotFound):
					gone.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		assert.EqualValues(t, 4, wrong.Load())
		assert.EqualValues(t, 1, burnt.Load())
		assert.EqualValues(t, 15, gone.Load())
	}, WithMaxAttempts(5))
}

func TestGeneratorFailures(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	ctx := context.Background()
	boom := errors.New("boom")
	for name, g := range map[string]Generator{
		"error":   GeneratorFunc(func(context.Context, Request) (Puzzle, error) { return Puzzle{}, boom }),
		"empty":   fixed("q", "   "),
		"toolong": fixed("q", string(make([]byte, maxAnswerLen+1))),
	} {
		s, err := New(rdb, g)
		require.NoError(t, err)
		_, err = s.Generate(ctx, GenerateParams{})
		assert.ErrorIs(t, err, ErrGenerator, name)
	}
	s, err := New(rdb, fixed("q", "a"))
	require.NoError(t, err)
	_, err = s.Generate(ctx, GenerateParams{User: string(make([]byte, 257))})
	assert.Error(t, err)
}

func TestGeneratorSeesIDAndUser(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	var seen Request
	s, err := New(rdb, GeneratorFunc(func(_ context.Context, r Request) (Puzzle, error) {
		seen = r
		return Puzzle{Answer: "a"}, nil
	}))
	require.NoError(t, err)
	ch, err := s.Generate(context.Background(), GenerateParams{User: "bob"})
	require.NoError(t, err)
	assert.Equal(t, Request{ID: ch.ID, User: "bob"}, seen)
}

func TestRedisFailureIsError(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	s, err := New(rdb, fixed("", "abc"))
	require.NoError(t, err)
	ctx := context.Background()
	ch, err := s.Generate(ctx, GenerateParams{})
	require.NoError(t, err)
	m.SetError("LOADING")
	err = s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "abc", User: ""})
	require.Error(t, err)
	for _, e := range []error{ErrNotFound, ErrWrongAnswer, ErrTooManyAttempts, ErrWrongUser} {
		assert.NotErrorIs(t, err, e)
	}
	_, err = s.Generate(ctx, GenerateParams{})
	assert.Error(t, err)
	m.SetError("")
	require.NoError(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "abc", User: ""}), "the failed call did not consume it")

	// A key of the wrong type: an error, not a panic.
	require.NoError(t, m.Set(challengeKey(defaultKeyPrefix, ch.ID), "x"))
	assert.Error(t, s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "abc", User: ""}))
}

func TestAttemptsErrorMessage(t *testing.T) {
	t.Parallel()
	err := error(&AttemptsError{Remaining: 2})
	assert.Equal(t, "captcha: wrong answer (2 attempts left)", err.Error())
	assert.ErrorIs(t, err, ErrWrongAnswer)
}

func TestChallengeKeyIsItsOwnHashTag(t *testing.T) {
	t.Parallel()
	id := newID()
	assert.Equal(t, "seckill:captcha:{"+id+"}", challengeKey(defaultKeyPrefix, id))
}
