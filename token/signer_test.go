package token

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"slices"
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

func newTestSigner(t testing.TB, clk Clock, opts ...SignerOption) *Signer {
	t.Helper()
	s, err := NewSigner([]Key{k1}, append([]SignerOption{WithClock(clk)}, opts...)...)
	require.NoError(t, err)
	return s
}

// start is the activity start used by signer tests; the clock begins at t0,
// one minute before (inside the default lead time).
var start = t0.Add(time.Minute)

func sign(t testing.TB, s *Signer, activity, user string) string {
	t.Helper()
	return signAt(t, s, activity, user, start)
}

// signAt signs a URL for an activity starting at st.
func signAt(t testing.TB, s *Signer, activity, user string, st time.Time) string {
	t.Helper()
	tok, err := s.Sign(SignParams{Activity: activity, User: user, Start: st})
	require.NoError(t, err)
	return tok
}

// nonceOf returns the replay-guard key of a signed URL.
func nonceOf(t testing.TB, prefix, activity, tok string) string {
	t.Helper()
	var raw [maxRawLen]byte
	d, err := parse(tok, &raw)
	require.NoError(t, err)
	return nonceKey(prefix, activity, base64.RawURLEncoding.EncodeToString(d.nonce))
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
		assert.ErrorIs(t, err, ErrInvalidConfig, keys)
	}
	var err error
	assert.NotPanics(t, func() { _, err = NewSigner([]Key{k1}, nil) })
	assert.NoError(t, err, "a nil option is ignored")
	for i, o := range []SignerOption{WithLeadTime(-1), WithValidity(0), WithSkew(-1), WithMaxNodeSkew(-1), WithClock(nil)} {
		_, err := NewSigner([]Key{k1}, o)
		assert.ErrorIs(t, err, ErrInvalidConfig, "option %d", i)
	}
	_, err = NewSigner([]Key{k1}, WithMaxNodeSkew(0))
	assert.NoError(t, err, "a max node skew of 0 (one server, or perfectly synchronised clocks) is valid")
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
	c, err := s.Verify(context.Background(), VerifyParams{Token: tok, Activity: "42", User: "alice"})
	require.NoError(t, err)
	assert.Equal(t, "42", c.Activity)
	assert.Equal(t, "alice", c.User)
	assert.Equal(t, "k1", c.KeyID)
	assert.True(t, c.NotBefore.Equal(start))
	assert.True(t, c.Expiry.Equal(start.Add(10*time.Minute)))
	assert.NotEqual(t, [nonceLen]byte{}, c.Nonce)

	// Without a replay guard the URL verifies again until it expires.
	_, err = s.Verify(context.Background(), VerifyParams{Token: tok, Activity: "42", User: "alice"})
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
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = s.Sign(SignParams{Activity: "1", User: "u"})
	assert.ErrorIs(t, err, ErrInvalidArgument, "zero start")
	_, err = s.Sign(SignParams{Activity: "{1}", User: "u", Start: start})
	assert.ErrorIs(t, err, ErrInvalidArgument)
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
		_, err := s.Verify(ctx, VerifyParams{Token: tc.tok, Activity: tc.activity, User: tc.user})
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
	c, err := s.Verify(ctx, VerifyParams{Token: fresh, Activity: "1", User: "u"})
	require.NoError(t, err)
	assert.Equal(t, "k2", c.KeyID)
	c, err = s.Verify(ctx, VerifyParams{Token: old, Activity: "1", User: "u"})
	require.NoError(t, err, "old key verifies until retired")
	assert.Equal(t, "k1", c.KeyID)

	// (3) retire k1.
	require.NoError(t, s.SetKeys([]Key{k2}))
	_, err = s.Verify(ctx, VerifyParams{Token: old, Activity: "1", User: "u"})
	assert.ErrorIs(t, err, ErrUnknownKey, "rotated-out key")
	_, err = s.Verify(ctx, VerifyParams{Token: fresh, Activity: "1", User: "u"})
	assert.NoError(t, err)

	assert.ErrorIs(t, s.SetKeys(nil), ErrInvalidConfig)
	_, err = s.Verify(ctx, VerifyParams{Token: fresh, Activity: "1", User: "u"})
	assert.NoError(t, err, "a failed SetKeys keeps the old set")
}

func TestReplayGuard(t *testing.T) {
	t.Parallel()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// The nonce's TTL runs on the Redis server's clock, so this
			// signer's clock starts at the wall clock's now.
			clk := testenv.NewRealClock()
			st := clk.Now().Truncate(time.Second).Add(time.Minute)
			prefix := testenv.Prefix(t)
			s := newTestSigner(t, clk, WithReplayGuard(rdb), WithKeyPrefix(prefix))
			tok := signAt(t, s, "7", "alice", st)

			// Refusals before the nonce check never burn the nonce.
			_, err := s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
			assert.ErrorIs(t, err, ErrNotYetValid)
			clk.Set(st)
			_, err = s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "bob"})
			assert.ErrorIs(t, err, ErrWrongUser)
			n, err := rdb.Exists(ctx, nonceOf(t, prefix, "7", tok)).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "no nonce claimed by a refused request")

			_, err = s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
			require.NoError(t, err)
			_, err = s.Verify(ctx, VerifyParams{Token: tok, Activity: "7", User: "alice"})
			assert.ErrorIs(t, err, ErrReplayed)

			// Concurrent replays of a fresh URL: exactly one success.
			tok2 := signAt(t, s, "7", "alice", st)
			var ok, replayed atomic.Int64
			var wg sync.WaitGroup
			before := time.Now()
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.Verify(ctx, VerifyParams{Token: tok2, Activity: "7", User: "alice"})
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

			// The guard key lives until the URL expires on every server
			// within the max node skew: validity + skew + max node skew from
			// the (still) signer's clock, minus the real time gone since.
			want := 10*time.Minute + 2*time.Second + defaultMaxNodeSkew
			ttl, err := rdb.PTTL(ctx, nonceOf(t, prefix, "7", tok2)).Result()
			require.NoError(t, err)
			assert.LessOrEqual(t, ttl, want)
			assert.GreaterOrEqual(t, ttl, want-time.Since(before)-time.Millisecond)
		})
	}
}

// The clocks of two servers sharing one replay guard: node 0 runs ahead of
// the true time, node 1 behind it, 10 s apart in all.
var skewedOffsets = [2]time.Duration{5 * time.Second, -5 * time.Second}

// skewRun is what runSkewedNodes observed.
type skewRun struct {
	accepts []int         // per URL: verifications accepted (1 = no replay got through)
	refused map[error]int // refusals of the replays, by sentinel
	// Per URL, read from Redis right after its first use: the true instant
	// its nonce record vanishes, and when it should: expiry + skew + max
	// node skew on the clock of the node that accepted it.
	deaths, wantDeaths []time.Time
	// Nonce records left once the true time is past every wantDeaths.
	leftover int
}

// runSkewedNodes walks the true time through the whole life of six signed
// URLs verified by two Signers whose clocks are skewedOffsets apart and who
// share one replay guard on miniredis. Each URL is first verified by one node
// (the one ahead, or the one behind) at a chosen instant (the first instant
// that node accepts it, the middle of its validity, the last millisecond that
// node accepts it); from then on, at every step (100 ms, and 1 ms either side
// of every boundary), both nodes replay it.
//
// Every clock here is fake: the nodes read the true clock plus their offset,
// and miniredis's TTLs move only with FastForward, which follows the true
// clock step by step.
func runSkewedNodes(t *testing.T, maxNodeSkew time.Duration) skewRun {
	t.Helper()
	const (
		validity = 20 * time.Second
		skew     = 2 * time.Second
		step     = 100 * time.Millisecond
	)
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	truth := testenv.NewEpochClock(0)
	var nodes [2]*Signer
	for i, off := range skewedOffsets {
		clk := clockFunc(func() time.Time { return truth.Now().Add(off) })
		nodes[i] = newTestSigner(t, clk, WithReplayGuard(rdb), WithKeyPrefix(prefix),
			WithValidity(validity), WithSkew(skew), WithMaxNodeSkew(maxNodeSkew))
	}
	st := truth.Now().Truncate(time.Second).Add(10 * time.Second)
	exp := st.Add(validity)
	// Node i accepts from firstLive(i) to lastLive(i) of the true time; a
	// record set by node i should vanish at death(i).
	firstLive := func(i int) time.Time { return st.Add(-skew - skewedOffsets[i]) }
	lastLive := func(i int) time.Time { return exp.Add(skew - skewedOffsets[i] - time.Millisecond) }
	death := func(i int) time.Time { return exp.Add(skew + maxNodeSkew - skewedOffsets[i]) }

	type link struct {
		tok  string
		node int
		at   time.Time
		used bool
	}
	var links []link
	instants := map[time.Time]bool{}
	for i := range nodes {
		for _, at := range []time.Time{firstLive(i), st.Add(validity / 2), lastLive(i)} {
			links = append(links, link{tok: signAt(t, nodes[i], "s", "alice", st), node: i, at: at})
			instants[at] = true
		}
	}
	end := lastLive(1).Add(time.Second) // both nodes see every URL expired
	for at := truth.Now(); !at.After(end); at = at.Add(step) {
		instants[at] = true
	}
	for i := range nodes {
		for _, b := range []time.Time{firstLive(i), lastLive(i).Add(time.Millisecond), death(i)} {
			for _, d := range []time.Duration{-time.Millisecond, 0, time.Millisecond} {
				if !b.Add(d).After(end) {
					instants[b.Add(d)] = true
				}
			}
		}
	}
	order := slices.SortedFunc(maps.Keys(instants), time.Time.Compare)

	run := skewRun{
		accepts:    make([]int, len(links)),
		refused:    map[error]int{},
		deaths:     make([]time.Time, len(links)),
		wantDeaths: make([]time.Time, len(links)),
	}
	for _, at := range order {
		if d := at.Sub(truth.Now()); d > 0 {
			truth.Add(d)
			m.FastForward(d)
		}
		for k := range links {
			l := &links[k]
			if !l.used {
				if at.Equal(l.at) {
					_, err := nodes[l.node].Verify(ctx, VerifyParams{Token: l.tok, Activity: "s", User: "alice"})
					require.NoError(t, err, "first use of URL %d on node %d", k, l.node)
					run.accepts[k]++
					l.used = true
					run.deaths[k] = at.Add(m.TTL(nonceOf(t, prefix, "s", l.tok)))
					run.wantDeaths[k] = death(l.node)
				}
				continue
			}
			for i, n := range nodes {
				_, err := n.Verify(ctx, VerifyParams{Token: l.tok, Activity: "s", User: "alice"})
				if err == nil {
					run.accepts[k]++
					t.Logf("URL %d (first used on node %d at start%+v) replayed on node %d at start%+v",
						k, l.node, l.at.Sub(st), i, at.Sub(st))
					continue
				}
				known := false
				for _, e := range []error{ErrReplayed, ErrNotYetValid, ErrExpired} {
					if errors.Is(err, e) {
						run.refused[e]++
						known = true
					}
				}
				require.True(t, known, "unexpected error %v", err)
			}
		}
	}
	// One second past the latest intended death (a record is never shorter
	// than 1 s), every record must be gone: the guard's memory is bounded.
	m.FastForward(death(1).Add(time.Second).Sub(truth.Now()))
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	run.leftover = len(keys)
	return run
}

// TestReplayGuardSkewedNodes: two servers whose clocks are 10 s apart share
// one replay guard. A URL first accepted on the server ahead must not be
// accepted again by the server behind once the nonce record's TTL, derived
// from the first server's clock, has run out while the second server still
// considers the URL live. Every point in time across the window is tried,
// and the accepts are counted: exactly one per URL.
func TestReplayGuardSkewedNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		maxNodeSkew time.Duration
	}{
		{"default max node skew", defaultMaxNodeSkew},
		{"max node skew = actual skew", skewedOffsets[0] - skewedOffsets[1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := runSkewedNodes(t, tc.maxNodeSkew)
			assert.Equal(t, []int{1, 1, 1, 1, 1, 1}, run.accepts, "accepts per URL")
			assert.Positive(t, run.refused[ErrReplayed], "the replays reached the nonce check")
			assert.Positive(t, run.refused[ErrExpired], "the walk went past the expiry on both nodes")
			for i := range run.deaths {
				assert.True(t, run.deaths[i].Equal(run.wantDeaths[i]),
					"URL %d: record vanishes at %v, want %v", i, run.deaths[i], run.wantDeaths[i])
			}
			assert.Zero(t, run.leftover)
		})
	}
	// Outside the contract the guarantee is gone, and the walk above sees
	// it: with clocks 10 s apart and no allowance for it, the node behind
	// accepts replays once the record set by the node ahead has vanished.
	t.Run("clocks further apart than the max node skew", func(t *testing.T) {
		t.Parallel()
		run := runSkewedNodes(t, 0)
		assert.Greater(t, slices.Max(run.accepts), 1, "a replay got through")
	})
}

// TestReplayGuardRecordOutlivesSkewedNode checks the same contract on every
// Redis kind by reading the record's TTL from the server: the node ahead
// accepts the URL, and the record must still be there when the node 10 s
// behind sees the URL expired.
func TestReplayGuardRecordOutlivesSkewedNode(t *testing.T) {
	t.Parallel()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// The record's TTL runs on the Redis server's clock: the true
			// time here is the wall clock.
			const skew = 2 * time.Second
			prefix := testenv.Prefix(t)
			ahead, behind := skewedOffsets[0], skewedOffsets[1]
			s := newTestSigner(t, clockFunc(func() time.Time { return time.Now().Add(ahead) }),
				WithReplayGuard(rdb), WithKeyPrefix(prefix), WithSkew(skew), WithValidity(time.Minute))
			st := time.Now().Truncate(time.Second)
			exp := st.Add(time.Minute)
			tok := signAt(t, s, "s", "alice", st)
			before := time.Now()
			_, err := s.Verify(ctx, VerifyParams{Token: tok, Activity: "s", User: "alice"})
			require.NoError(t, err)
			ttl, err := rdb.PTTL(ctx, nonceOf(t, prefix, "s", tok)).Result()
			require.NoError(t, err)
			read := time.Now()
			// The node behind accepts until its clock reads exp + skew, i.e.
			// until the true time exp + skew - behind.
			lastAccept := exp.Add(skew - behind)
			assert.GreaterOrEqual(t, ttl, lastAccept.Sub(read)-time.Millisecond,
				"the record vanishes while the node behind still accepts the URL")
			assert.LessOrEqual(t, ttl, exp.Add(skew+defaultMaxNodeSkew-ahead).Sub(before)+time.Millisecond,
				"the record lives no longer than expiry + skew + max node skew")
		})
	}
}

// TestReplayGuardTTLRoundsUp: Redis counts a TTL in whole milliseconds, so
// a TTL computed from a clock with sub-millisecond digits is rounded up,
// never down (go-redis alone truncates, which would end the record up to
// 1 ms before the node behind sees the URL expired).
func TestReplayGuardTTLRoundsUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t) // miniredis's TTLs do not run with real time
	prefix := testenv.Prefix(t)
	clk := newFakeClock(t0)
	s := newTestSigner(t, clk, WithReplayGuard(rdb), WithKeyPrefix(prefix), WithMaxNodeSkew(10*time.Second))
	for i, frac := range []time.Duration{0, 1, 999_999, 1_000_001, 123_456_789} {
		tok := sign(t, s, "r", "alice")
		clk.Set(start.Add(frac))
		_, err := s.Verify(ctx, VerifyParams{Token: tok, Activity: "r", User: "alice"})
		require.NoError(t, err)
		need := start.Add(10*time.Minute + 2*time.Second + 10*time.Second).Sub(clk.Now())
		got := m.TTL(nonceOf(t, prefix, "r", tok))
		assert.GreaterOrEqual(t, got, need, "case %d", i)
		assert.Less(t, got, need+time.Millisecond, "case %d", i)
		clk.Set(t0)
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
	_, err := s.Verify(context.Background(), VerifyParams{Token: tok, Activity: "7", User: "alice"})
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
	s := newTestSigner(t, clockFunc(clk.Now))
	clk.Set(t0)
	tok := sign(t, s, "42", "alice")
	clk.Set(start)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.Verify(ctx, VerifyParams{Token: tok, Activity: "42", User: "alice"}); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}
