package token

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
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
	_ NonceStore = (*redis.Client)(nil)
	_ NonceStore = (*redis.ClusterClient)(nil)
	_ NonceStore = (*redis.Ring)(nil)
	_ NonceStore = redis.UniversalClient(nil)
)

var (
	k1 = Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}
	k2 = Key{ID: "k2", Secret: []byte("fedcba9876543210fedcba9876543210")}
)

func newTestSigner(t testing.TB, clk Clock, opts ...Option) *Signer {
	t.Helper()
	s, err := NewSigner([]Key{k1}, append([]Option{WithClock(clk)}, opts...)...)
	require.NoError(t, err)
	return s
}

// start is the activity start used by signer tests; the clock begins at t0,
// one minute before (inside the default lead time).
var start = t0.Add(time.Minute)

func sign(t testing.TB, s *Signer, activity, user string) string {
	t.Helper()
	tok, err := s.Sign(SignParams{Activity: activity, User: user, Start: start})
	require.NoError(t, err)
	return tok
}

func TestNewSignerValidates(t *testing.T) {
	t.Parallel()
	bad := [][]Key{
		nil,
		{{ID: "", Secret: k1.Secret}},
		{{ID: "this-id-is-too-long", Secret: k1.Secret}},
		{{ID: "a b", Secret: k1.Secret}},
		{{ID: "a", Secret: []byte("short")}},
		{k1, k1},
	}
	for _, keys := range bad {
		_, err := NewSigner(keys)
		assert.ErrorIs(t, err, ErrNoKeys, keys)
	}
	var err error
	assert.NotPanics(t, func() { _, err = NewSigner([]Key{k1}, nil) })
	assert.NoError(t, err, "a nil option is ignored")
	for _, o := range []Option{WithLeadTime(-1), WithValidity(0), WithSkew(-1)} {
		_, err := NewSigner([]Key{k1}, o)
		assert.Error(t, err)
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	clk := newFakeClock(t0)
	s := newTestSigner(t, clk)
	tok := sign(t, s, "42", "alice")
	assert.LessOrEqual(t, len(tok), 120, "compact")
	assert.NotContains(t, tok, "/")
	assert.NotContains(t, tok, "+")
	assert.NotContains(t, tok, "=")

	clk.Set(start)
	c, err := s.Verify(context.Background(), tok, "42", "alice")
	require.NoError(t, err)
	assert.Equal(t, "42", c.Activity)
	assert.Equal(t, "alice", c.User)
	assert.Equal(t, "k1", c.KeyID)
	assert.True(t, c.NotBefore.Equal(start))
	assert.True(t, c.Expiry.Equal(start.Add(10*time.Minute)))
	assert.NotEqual(t, [nonceLen]byte{}, c.Nonce)

	// Without a replay guard the URL verifies again until it expires.
	_, err = s.Verify(context.Background(), tok, "42", "alice")
	assert.NoError(t, err)
	// Two signatures of the same request differ (fresh nonce).
	assert.NotEqual(t, tok, sign(t, s, "42", "alice"))
}

func TestSignReleaseWindow(t *testing.T) {
	t.Parallel()
	clk := newFakeClock(start.Add(-time.Minute - time.Second))
	s := newTestSigner(t, clk)
	p := SignParams{Activity: "1", User: "u", Start: start}
	_, err := s.Sign(p)
	assert.ErrorIs(t, err, ErrTooEarly, "before start minus the lead time")
	clk.Set(start.Add(-time.Minute))
	_, err = s.Sign(p)
	assert.NoError(t, err, "released exactly at start minus the lead time")
	clk.Set(start.Add(10 * time.Minute))
	_, err = s.Sign(p)
	assert.ErrorIs(t, err, ErrExpired)

	p.Expiry = start.Add(time.Hour)
	_, err = s.Sign(p)
	assert.NoError(t, err, "explicit expiry")
	p.Expiry = start
	_, err = s.Sign(p)
	assert.Error(t, err)
	_, err = s.Sign(SignParams{Activity: "1", User: "u"})
	assert.Error(t, err, "zero start")
	_, err = s.Sign(SignParams{Activity: "{1}", User: "u", Start: start})
	assert.ErrorIs(t, err, ErrMalformed)
}

// TestVerifyRefusals counts every refusal path of a signed URL.
func TestVerifyRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newFakeClock(t0)
	s := newTestSigner(t, clk, WithSkew(2*time.Second))
	good := sign(t, s, "42", "alice")

	raw, err := base64.RawURLEncoding.DecodeString(good)
	require.NoError(t, err)
	enc := base64.RawURLEncoding.EncodeToString
	flipMAC := append([]byte(nil), raw...)
	flipMAC[len(flipMAC)-1] ^= 1
	// Change the user from "alice" to "alicf" keeping the old MAC: a forgery.
	forgedUser := []byte(strings.Replace(string(raw), "alice", "alicf", 1))
	// A token signed by an attacker's own key under our key ID.
	evil, err := NewSigner([]Key{{ID: "k1", Secret: []byte("attacker-secret-attacker-secret!")}}, WithClock(clk))
	require.NoError(t, err)
	// A token signed by a key we never had.
	other, err := NewSigner([]Key{{ID: "zz", Secret: k2.Secret}}, WithClock(clk))
	require.NoError(t, err)

	cases := []struct {
		name     string
		at       time.Time
		tok      string
		activity string
		user     string
		want     error
	}{
		{"ok at start", start, good, "42", "alice", nil},
		{"ok within skew before start", start.Add(-2 * time.Second), good, "42", "alice", nil},
		{"not yet valid", start.Add(-2*time.Second - time.Nanosecond), good, "42", "alice", ErrNotYetValid},
		{"ok within skew after expiry", start.Add(10*time.Minute + 2*time.Second - time.Nanosecond), good, "42", "alice", nil},
		{"expired", start.Add(10*time.Minute + 2*time.Second), good, "42", "alice", ErrExpired},
		{"wrong user", start, good, "42", "bob", ErrWrongUser},
		{"wrong activity", start, good, "43", "alice", ErrWrongActivity},
		{"flipped mac", start, enc(flipMAC), "42", "alice", ErrInvalidSignature},
		{"forged user", start, enc(forgedUser), "42", "alicf", ErrInvalidSignature},
		{"attacker key", start, sign(t, evil, "42", "alice"), "42", "alice", ErrInvalidSignature},
		{"unknown key", start, sign(t, other, "42", "alice"), "42", "alice", ErrUnknownKey},
		{"empty", start, "", "42", "alice", ErrMalformed},
		{"not base64", start, "!!!!", "42", "alice", ErrMalformed},
		{"padded", start, good + "=", "42", "alice", ErrMalformed},
		{"truncated", start, good[:len(good)-2], "42", "alice", ErrMalformed},
		{"too long", start, strings.Repeat("A", maxEncodedLen+1), "42", "alice", ErrMalformed},
		{"wrong version", start, enc(append([]byte{2}, raw[1:]...)), "42", "alice", ErrMalformed},
	}
	got := map[error]int{}
	for _, tc := range cases {
		clk.Set(tc.at)
		_, err := s.Verify(ctx, tc.tok, tc.activity, tc.user)
		if tc.want == nil {
			assert.NoError(t, err, tc.name)
			continue
		}
		assert.ErrorIs(t, err, tc.want, tc.name)
		got[tc.want]++
	}
	assert.Equal(t, map[error]int{
		ErrNotYetValid: 1, ErrExpired: 1, ErrWrongUser: 1, ErrWrongActivity: 1,
		ErrInvalidSignature: 3, ErrUnknownKey: 1, ErrMalformed: 6,
	}, got)
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newFakeClock(t0)
	s := newTestSigner(t, clk)
	old := sign(t, s, "1", "u")
	clk.Set(start)

	// (1) add k2 as a verify-only key, (2) make it the signer.
	require.NoError(t, s.SetKeys([]Key{k1, k2}))
	require.NoError(t, s.SetKeys([]Key{k2, k1}))
	clk.Set(t0)
	fresh := sign(t, s, "1", "u")
	clk.Set(start)
	c, err := s.Verify(ctx, fresh, "1", "u")
	require.NoError(t, err)
	assert.Equal(t, "k2", c.KeyID)
	c, err = s.Verify(ctx, old, "1", "u")
	require.NoError(t, err, "old key verifies until retired")
	assert.Equal(t, "k1", c.KeyID)

	// (3) retire k1.
	require.NoError(t, s.SetKeys([]Key{k2}))
	_, err = s.Verify(ctx, old, "1", "u")
	assert.ErrorIs(t, err, ErrUnknownKey, "rotated-out key")
	_, err = s.Verify(ctx, fresh, "1", "u")
	assert.NoError(t, err)

	assert.ErrorIs(t, s.SetKeys(nil), ErrNoKeys)
	_, err = s.Verify(ctx, fresh, "1", "u")
	assert.NoError(t, err, "a failed SetKeys keeps the old set")
}

func TestReplayGuard(t *testing.T) {
	t.Parallel()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := newFakeClock(t0)
			s := newTestSigner(t, clk, WithReplayGuard(rdb), WithKeyPrefix(testenv.Prefix(t)))
			tok := sign(t, s, "7", "alice")

			// Refusals before the nonce check never burn the nonce.
			_, err := s.Verify(ctx, tok, "7", "alice")
			assert.ErrorIs(t, err, ErrNotYetValid)
			clk.Set(start)
			_, err = s.Verify(ctx, tok, "7", "bob")
			assert.ErrorIs(t, err, ErrWrongUser)

			_, err = s.Verify(ctx, tok, "7", "alice")
			require.NoError(t, err)
			_, err = s.Verify(ctx, tok, "7", "alice")
			assert.ErrorIs(t, err, ErrReplayed)

			// Concurrent replays of a fresh URL: exactly one success.
			clk.Set(t0)
			tok2 := sign(t, s, "7", "alice")
			clk.Set(start)
			var ok, replayed atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.Verify(ctx, tok2, "7", "alice")
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, ErrReplayed):
						replayed.Add(1)
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			assert.EqualValues(t, 1, ok.Load())
			assert.EqualValues(t, 31, replayed.Load())

			// The guard key lives until the URL expires (plus skew).
			raw, _ := base64.RawURLEncoding.DecodeString(tok2)
			d, err := parse(tok2, (*[maxRawLen]byte)(append(raw, make([]byte, maxRawLen)...)[:maxRawLen]))
			require.NoError(t, err)
			key := nonceKey(testenv.Prefix(t), "7", base64.RawURLEncoding.EncodeToString(d.nonce))
			ttl, err := rdb.TTL(ctx, key).Result()
			require.NoError(t, err)
			assert.InDelta(t, (10*time.Minute + 2*time.Second).Seconds(), ttl.Seconds(), 2)
		})
	}
}

func TestReplayGuardFailure(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	clk := newFakeClock(t0)
	s := newTestSigner(t, clk, WithReplayGuard(rdb))
	tok := sign(t, s, "7", "alice")
	clk.Set(start)
	m.SetError("READONLY")
	_, err := s.Verify(context.Background(), tok, "7", "alice")
	require.Error(t, err)
	assert.ErrorContains(t, err, "READONLY")
	for _, e := range []error{ErrReplayed, ErrExpired, ErrInvalidSignature} {
		assert.NotErrorIs(t, err, e)
	}
}

func TestVerifyDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	clk := newFakeClock(start)
	s := newTestSigner(t, ClockFunc(clk.Now))
	clk.Set(t0)
	tok := sign(t, s, "42", "alice")
	clk.Set(start)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.Verify(ctx, tok, "42", "alice"); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}
