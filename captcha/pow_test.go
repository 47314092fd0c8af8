package captcha

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
)

var (
	oldKey = PoWKey{ID: "k1", Secret: []byte("0123456789abcdef-old")}
	newKey = PoWKey{ID: "k2", Secret: []byte("0123456789abcdef-new")}
)

// altchaChallenge is ALTCHA v1's challenge JSON, decoded independently of
// the package's code.
type altchaChallenge struct {
	Algorithm string `json:"algorithm"`
	Challenge string `json:"challenge"`
	MaxNumber int64  `json:"maxnumber"`
	Salt      string `json:"salt"`
	Signature string `json:"signature"`
}

// altchaPayload is ALTCHA v1's solution payload.
type altchaPayload struct {
	Algorithm string `json:"algorithm"`
	Challenge string `json:"challenge"`
	Number    int64  `json:"number"`
	Salt      string `json:"salt"`
	Signature string `json:"signature"`
}

func (p altchaPayload) encode(t testing.TB) string {
	b, err := json.Marshal(p) // escapes '&' as \u0026, unlike the widget
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

// eachPoW runs f with a PoW on every Redis kind available; the clock is
// fake (the one-time records' TTL is relative, so it is safe on a real
// server).
func eachPoW(t *testing.T, cfg PoWConfig, f func(t *testing.T, p *PoW, rdb redis.UniversalClient, clk *testenv.Clock)) {
	t.Helper()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			clk := testenv.NewEpochClock(0)
			c := cfg
			c.KeyPrefix, c.Clock = testenv.Prefix(t), clk
			p, err := NewPoW(rdb, []PoWKey{oldKey}, c)
			require.NoError(t, err)
			f(t, p, rdb, clk)
		})
	}
}

// solved generates a challenge and solves it with Solve.
func solved(t testing.TB, p *PoW, g GenerateParams) (altchaChallenge, string) {
	t.Helper()
	raw, err := p.Generate(g)
	require.NoError(t, err)
	var c altchaChallenge
	require.NoError(t, json.Unmarshal(raw, &c))
	sol, err := Solve(context.Background(), raw)
	require.NoError(t, err)
	return c, sol
}

func decodeSolution(t testing.TB, sol string) altchaPayload {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(sol)
	require.NoError(t, err)
	var pl altchaPayload
	require.NoError(t, json.Unmarshal(b, &pl))
	return pl
}

// countPoW counts the one-time records of the test's prefix.
func countPoW(t *testing.T, p *PoW, rdb redis.UniversalClient, sum string) int64 {
	t.Helper()
	b, err := hex.DecodeString(sum)
	require.NoError(t, err)
	n, err := rdb.Exists(context.Background(), powKeyOf(p.cfg.KeyPrefix, b)).Result()
	require.NoError(t, err)
	return n
}

// TestPoWChallengeFormat: the challenge is ALTCHA v1's, recomputed here
// the way ALTCHA's libraries compute it: challenge = hex(SHA-256(salt +
// decimal number)), signature = hex(HMAC-SHA256(key, challenge)), expiry
// and key in the salt's query, ending in '&'.
func TestPoWChallengeFormat(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	clk := testenv.NewEpochClock(0)
	p, err := NewPoW(rdb, []PoWKey{oldKey}, PoWConfig{Clock: clk, MaxNumber: 500, TTL: 90 * time.Second})
	require.NoError(t, err)
	raw, err := p.Generate(GenerateParams{User: "al+ice@x"})
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	assert.ElementsMatch(t, []string{"algorithm", "challenge", "maxnumber", "salt", "signature"}, keysOf(fields))
	var c altchaChallenge
	require.NoError(t, json.Unmarshal(raw, &c))
	assert.Equal(t, "SHA-256", c.Algorithm)
	assert.EqualValues(t, 500, c.MaxNumber)

	id, query, ok := strings.Cut(c.Salt, "?")
	require.True(t, ok, c.Salt)
	assert.True(t, ValidID(id), id)
	require.True(t, strings.HasSuffix(query, "&"), "ALTCHA's splicing delimiter")
	q, err := url.ParseQuery(strings.TrimSuffix(query, "&"))
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatInt(clk.Now().Add(90*time.Second).Unix(), 10), q.Get("expires"))
	assert.Equal(t, "k1", q.Get("k"))
	assert.Equal(t, "al+ice@x", q.Get("u"))

	found := -1
	for n := 0; n <= 500; n++ {
		s := sha256.Sum256([]byte(c.Salt + strconv.Itoa(n)))
		if hex.EncodeToString(s[:]) == c.Challenge {
			found = n
			break
		}
	}
	assert.GreaterOrEqual(t, found, 0, "a number in 0..maxnumber solves it")
	m := hmac.New(sha256.New, oldKey.Secret)
	m.Write([]byte(c.Challenge))
	assert.Equal(t, hex.EncodeToString(m.Sum(nil)), c.Signature)

	// The payload Solve returns is the widget's: btoa(JSON.stringify(…)).
	sol, err := Solve(context.Background(), raw)
	require.NoError(t, err)
	b, err := base64.StdEncoding.DecodeString(sol)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `\u0026`)
	pl := decodeSolution(t, sol)
	assert.Equal(t, altchaPayload{"SHA-256", c.Challenge, int64(found), c.Salt, c.Signature}, pl)
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestPoWPassesOnce: a solved challenge passes once, then is refused, and
// the one record counted in Redis lives until the challenge has expired on
// every server.
func TestPoWPassesOnce(t *testing.T) {
	t.Parallel()
	eachPoW(t, PoWConfig{MaxNumber: 1000, TTL: time.Minute, MaxNodeSkew: 3 * time.Second}, func(t *testing.T, p *PoW, rdb redis.UniversalClient, _ *testenv.Clock) {
		ctx := context.Background()
		c, sol := solved(t, p, GenerateParams{User: "alice"})
		assert.Zero(t, countPoW(t, p, rdb, c.Challenge))
		require.NoError(t, p.Verify(ctx, VerifyParams{Answer: sol, User: "alice"}))
		assert.EqualValues(t, 1, countPoW(t, p, rdb, c.Challenge))
		b, _ := hex.DecodeString(c.Challenge)
		ttl, err := rdb.PTTL(ctx, powKeyOf(p.cfg.KeyPrefix, b)).Result()
		require.NoError(t, err)
		assert.InDelta(t, (time.Minute + time.Second + 3*time.Second).Seconds(), ttl.Seconds(), 2)

		err = p.Verify(ctx, VerifyParams{Answer: sol, User: "alice"})
		require.ErrorIs(t, err, ErrNotFound, "replayed")
		assert.ErrorIs(t, err, ErrRefused)
		assert.ErrorContains(t, err, "already redeemed")

		// The same solution re-encoded (Go's JSON escapes '&', other
		// padding) is the same challenge: still refused.
		pl := decodeSolution(t, sol)
		err = p.Verify(ctx, VerifyParams{Answer: pl.encode(t), User: "alice"})
		assert.ErrorIs(t, err, ErrNotFound)
		err = p.Verify(ctx, VerifyParams{Answer: strings.TrimRight(pl.encode(t), "="), User: "alice"})
		assert.ErrorIs(t, err, ErrNotFound)
		assert.EqualValues(t, 1, countPoW(t, p, rdb, c.Challenge))
	})
}

// TestPoWHammer: many goroutines redeem the same solutions at once; each
// challenge passes exactly once, counted from the answers and from Redis.
func TestPoWHammer(t *testing.T) {
	t.Parallel()
	eachPoW(t, PoWConfig{MaxNumber: 200}, func(t *testing.T, p *PoW, rdb redis.UniversalClient, _ *testenv.Clock) {
		const challenges, racers = 8, 16
		var sols []string
		var sums []string
		for range challenges {
			c, sol := solved(t, p, GenerateParams{})
			sols, sums = append(sols, sol), append(sums, c.Challenge)
		}
		var passed, refused atomic.Int64
		var wg sync.WaitGroup
		for i := range challenges * racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := p.Verify(context.Background(), VerifyParams{Answer: sols[i%challenges], User: "u" + strconv.Itoa(i)})
				switch {
				case err == nil:
					passed.Add(1)
				case assert.ErrorIs(t, err, ErrNotFound):
					refused.Add(1)
				}
			}()
		}
		wg.Wait()
		assert.EqualValues(t, challenges, passed.Load())
		assert.EqualValues(t, challenges*(racers-1), refused.Load())
		for _, s := range sums {
			assert.EqualValues(t, 1, countPoW(t, p, rdb, s))
		}
	})
}

// TestPoWRefusals: forged, tampered, spliced, expired, other user's and
// other ID's payloads are refused with the umbrella, and none of them
// burns the challenge (counted in Redis), which still passes afterwards.
func TestPoWRefusals(t *testing.T) {
	t.Parallel()
	eachPoW(t, PoWConfig{MaxNumber: 1000, TTL: time.Minute}, func(t *testing.T, p *PoW, rdb redis.UniversalClient, clk *testenv.Clock) {
		ctx := context.Background()
		c, sol := solved(t, p, GenerateParams{User: "al+ice@x"})
		good := decodeSolution(t, sol)
		refused := func(pl altchaPayload, user string, want error, why string) {
			t.Helper()
			err := p.Verify(ctx, VerifyParams{Answer: pl.encode(t), User: user})
			require.ErrorIs(t, err, want, why)
			assert.ErrorIs(t, err, ErrRefused, why)
		}

		forged := good
		forged.Signature = strings.Repeat("ab", 32)
		refused(forged, "al+ice@x", ErrWrongAnswer, "forged signature")

		tampered := good
		tampered.Number++
		refused(tampered, "al+ice@x", ErrWrongAnswer, "tampered number")
		err := p.Verify(ctx, VerifyParams{Answer: tampered.encode(t), User: "al+ice@x"})
		assert.ErrorContains(t, err, "does not solve")

		// ALTCHA checks the challenge field too, though the signature is
		// over the hash Verify computes.
		tampered = good
		tampered.Challenge = strings.Repeat("0", 64)
		refused(tampered, "al+ice@x", ErrWrongAnswer, "tampered challenge")

		// A challenge the client made itself: solvable, not signed by us.
		own := good
		own.Salt = strings.Replace(good.Salt, "u=al%2Bice%40x", "u=mallory", 1)
		s := sha256.Sum256([]byte(own.Salt + strconv.FormatInt(own.Number, 10)))
		own.Challenge = hex.EncodeToString(s[:])
		refused(own, "mallory", ErrWrongAnswer, "unsigned challenge")
		m := hmac.New(sha256.New, []byte("0123456789abcdef-guess"))
		m.Write([]byte(own.Challenge))
		own.Signature = hex.EncodeToString(m.Sum(nil))
		refused(own, "mallory", ErrWrongAnswer, "signed with another key")

		// Splicing a digit of the number into the salt keeps the hash and the
		// signature; the salt no longer ends in '&' and is refused.
		spliced := false
		for i := 0; i < 100 && !spliced; i++ {
			_, sol := solved(t, p, GenerateParams{})
			pl := decodeSolution(t, sol)
			digits := strconv.FormatInt(pl.Number, 10)
			if len(digits) < 2 || digits[1] == '0' {
				continue // nothing to splice without a leading zero
			}
			pl.Salt += digits[:1]
			pl.Number, _ = strconv.ParseInt(digits[1:], 10, 64)
			refused(pl, "", ErrWrongAnswer, "spliced")
			spliced = true
		}
		require.True(t, spliced)

		refused(good, "bob", ErrWrongUser, "other user's")
		refused(good, "", ErrWrongUser, "anonymous caller")
		refused(good, "al ice@x", ErrWrongUser, "escaping is compared exactly")
		err = p.Verify(ctx, VerifyParams{ID: newID(), Answer: sol, User: "al+ice@x"})
		assert.ErrorIs(t, err, ErrNotFound, "other ID")

		assert.Zero(t, countPoW(t, p, rdb, c.Challenge), "no refusal burnt it")
		id, _, _ := strings.Cut(c.Salt, "?")
		require.NoError(t, p.Verify(ctx, VerifyParams{ID: id, Answer: sol, User: "al+ice@x"}))

		// Expiry: refused from the second after the signed one, by the
		// injected clock; accepted up to its last instant.
		c2, sol2 := solved(t, p, GenerateParams{})
		_, query, _ := strings.Cut(c2.Salt, "?")
		q, err := url.ParseQuery(strings.TrimSuffix(query, "&"))
		require.NoError(t, err)
		exp, err := strconv.ParseInt(q.Get("expires"), 10, 64)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Unix(exp, 0).Sub(clk.Now()), time.Minute, "at least the TTL")
		clk.Set(time.Unix(exp+1, 0))
		err = p.Verify(ctx, VerifyParams{Answer: sol2})
		require.ErrorIs(t, err, ErrNotFound, "expired")
		assert.ErrorContains(t, err, "expired")
		assert.Zero(t, countPoW(t, p, rdb, c2.Challenge))
		clk.Set(time.Unix(exp, 999_999_999))
		require.NoError(t, p.Verify(ctx, VerifyParams{Answer: sol2}), "an unbound challenge passes for anyone")
	})
}

// TestPoWKeyRotation: a challenge signed by the old key passes while the
// old key is still held (after the new one is added, and after it moved
// first), and is refused once the old key is dropped; new challenges are
// signed by the first key.
func TestPoWKeyRotation(t *testing.T) {
	t.Parallel()
	eachPoW(t, PoWConfig{MaxNumber: 100}, func(t *testing.T, p *PoW, _ redis.UniversalClient, _ *testenv.Clock) {
		ctx := context.Background()
		_, byOld1 := solved(t, p, GenerateParams{})
		_, byOld2 := solved(t, p, GenerateParams{})
		_, byOld3 := solved(t, p, GenerateParams{})

		require.NoError(t, p.SetKeys([]PoWKey{oldKey, newKey}))
		require.NoError(t, p.Verify(ctx, VerifyParams{Answer: byOld1}), "overlap: new key added")
		c, byOld4 := solved(t, p, GenerateParams{})
		assert.Contains(t, c.Salt, "&k=k1&", "the first key still signs")

		require.NoError(t, p.SetKeys([]PoWKey{newKey, oldKey}))
		require.NoError(t, p.Verify(ctx, VerifyParams{Answer: byOld2}), "overlap: new key first")
		c, byNew := solved(t, p, GenerateParams{})
		assert.Contains(t, c.Salt, "&k=k2&", "the new key signs")

		require.NoError(t, p.SetKeys([]PoWKey{newKey}))
		for _, sol := range []string{byOld3, byOld4} {
			err := p.Verify(ctx, VerifyParams{Answer: sol})
			require.ErrorIs(t, err, ErrNotFound, "old key dropped")
			assert.ErrorContains(t, err, "key not held")
		}
		require.NoError(t, p.Verify(ctx, VerifyParams{Answer: byNew}))

		// A key ID renamed onto another secret does not verify the old
		// challenges: the signature is checked with the secret.
		_, sol := solved(t, p, GenerateParams{})
		require.NoError(t, p.SetKeys([]PoWKey{{ID: "k2", Secret: oldKey.Secret}}))
		assert.ErrorIs(t, p.Verify(ctx, VerifyParams{Answer: sol}), ErrWrongAnswer)

		for _, bad := range [][]PoWKey{nil, {{ID: "", Secret: oldKey.Secret}}, {{ID: "k", Secret: []byte("short")}},
			{{ID: "a&b", Secret: oldKey.Secret}}, {{ID: strings.Repeat("k", 17), Secret: oldKey.Secret}}, {oldKey, oldKey}} {
			assert.ErrorIs(t, p.SetKeys(bad), ErrInvalidConfig, "%v", bad)
		}
		_, sol = solved(t, p, GenerateParams{})
		assert.NoError(t, p.Verify(ctx, VerifyParams{Answer: sol}), "a refused key set leaves the keys in place")
	})
}

// TestPoWMalformed: payloads that are not a solution are refused as wrong
// answers (ErrRefused), never as failures, before Redis is touched.
func TestPoWMalformed(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	p, err := NewPoW(rdb, []PoWKey{oldKey}, PoWConfig{MaxNumber: 100, Clock: testenv.NewEpochClock(0)})
	require.NoError(t, err)
	c, sol := solved(t, p, GenerateParams{})
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	good := decodeSolution(t, sol)
	obj := func(extra string) string {
		return `{"algorithm":"SHA-256","challenge":"` + c.Challenge + `","number":` + strconv.FormatInt(good.Number, 10) +
			`,"salt":"` + c.Salt + `","signature":"` + c.Signature + `"` + extra + `}`
	}
	_, err = p.check(new(powScratch), &VerifyParams{Answer: b64(obj(`,"took":12,"test":true,"x":null,"y":"a\"b"`))})
	require.NoError(t, err, "extra scalar members are ignored")
	_, err = p.check(new(powScratch), &VerifyParams{Answer: b64(" \n" + obj("") + " \t")})
	require.NoError(t, err, "white space")

	m.SetError("no Redis call expected")
	for name, ans := range map[string]string{
		"empty":          "",
		"not base64":     "!!!!",
		"too long":       strings.Repeat("A", powMaxEncoded+4),
		"not JSON":       b64("hello"),
		"array":          b64("[1]"),
		"empty object":   b64("{}"),
		"trailing":       b64(obj("") + "x"),
		"duplicate":      b64(obj(`,"number":` + strconv.FormatInt(good.Number, 10))),
		"nested":         b64(obj(`,"x":{"a":1}`)),
		"SHA-1":          b64(strings.Replace(obj(""), "SHA-256", "SHA-1", 1)),
		"float number":   b64(strings.Replace(obj(""), `"number":`+strconv.FormatInt(good.Number, 10), `"number":1.0`, 1)),
		"negative":       b64(strings.Replace(obj(""), `"number":`+strconv.FormatInt(good.Number, 10), `"number":-1`, 1)),
		"leading zero":   b64(strings.Replace(obj(""), `"number":`+strconv.FormatInt(good.Number, 10), `"number":0`+strconv.FormatInt(good.Number, 10), 1)),
		"short hash":     b64(strings.Replace(obj(""), c.Challenge, c.Challenge[:62], 1)),
		"salt no &":      b64(strings.Replace(obj(""), c.Salt, strings.TrimSuffix(c.Salt, "&"), 1)),
		"salt too long":  b64(strings.Replace(obj(""), c.Salt, c.Salt+"u="+strings.Repeat("a", 900)+"&", 1)),
		"salt extra":     b64(strings.Replace(obj(""), c.Salt, c.Salt+"z=1&", 1)),
		"missing number": b64(strings.Replace(obj(""), `"number":`+strconv.FormatInt(good.Number, 10)+`,`, ``, 1)),
		// altcha-lib 2.10.0's v1 fix: the signed salt cut at an earlier '&'
		// and its rest sent in a string number hashes the same bytes.
		"string number": b64(strings.Replace(strings.Replace(obj(""), c.Salt, c.Salt[:strings.Index(c.Salt, "k=")], 1),
			`"number":`+strconv.FormatInt(good.Number, 10), `"number":"`+c.Salt[strings.Index(c.Salt, "k="):]+strconv.FormatInt(good.Number, 10)+`"`, 1)),
		"control byte": b64(strings.Replace(obj(""), `"salt":"`, "\"salt\":\"\x01", 1)),
		"bad escape":   b64(strings.Replace(obj(""), `"salt":"`, `"salt":"\x`, 1)),
	} {
		err := p.Verify(context.Background(), VerifyParams{Answer: ans})
		require.ErrorIs(t, err, ErrWrongAnswer, name)
		assert.ErrorIs(t, err, ErrRefused, name)
	}
}

// TestPoWBadInput: the caller's mistakes are ErrInvalidConfig or
// ErrInvalidArgument, never refusals; a Redis failure and a cancelled
// context are errors, not refusals.
func TestPoWBadInput(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	for name, cfg := range map[string]PoWConfig{
		"max number": {MaxNumber: -1}, "huge max number": {MaxNumber: 2e9}, "TTL": {TTL: time.Millisecond},
		"skew": {MaxNodeSkew: -time.Second},
	} {
		_, err := NewPoW(rdb, []PoWKey{oldKey}, cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	_, err := NewPoW(nil, []PoWKey{oldKey}, PoWConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil client")
	_, err = NewPoW(rdb, nil, PoWConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig, "no key")

	p, err := NewPoW(rdb, []PoWKey{oldKey}, PoWConfig{MaxNumber: 100})
	require.NoError(t, err)
	for name, g := range map[string]GenerateParams{
		"long user": {User: strings.Repeat("u", 257)}, "cost": {MaxNumber: -5}, "huge cost": {MaxNumber: 2e9},
	} {
		_, err := p.Generate(g)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.NotErrorIs(t, err, ErrRefused, name)
	}
	s, err := New(rdb, fixed("q", "a"))
	require.NoError(t, err)
	_, err = s.Generate(context.Background(), GenerateParams{MaxNumber: 10})
	assert.ErrorIs(t, err, ErrInvalidArgument, "Store has no cost")

	_, sol := solved(t, p, GenerateParams{})
	err = p.Verify(context.Background(), VerifyParams{Answer: sol, User: strings.Repeat("u", 257)})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotErrorIs(t, err, ErrRefused)

	m.SetError("READONLY")
	err = p.Verify(context.Background(), VerifyParams{Answer: sol})
	require.ErrorContains(t, err, "READONLY")
	assert.NotErrorIs(t, err, ErrRefused)
	m.SetError("")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err = p.Verify(cancelled, VerifyParams{Answer: sol})
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrRefused)
	require.NoError(t, p.Verify(context.Background(), VerifyParams{Answer: sol}), "a failed call does not burn it")
}

// TestPoWCost: the secret number stays within the cost asked for, per
// challenge or by default, and Solve finds it within that bound.
func TestPoWCost(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	p, err := NewPoW(rdb, []PoWKey{oldKey}, PoWConfig{MaxNumber: 50})
	require.NoError(t, err)
	for _, g := range []GenerateParams{{}, {MaxNumber: 3}, {MaxNumber: 1}} {
		want := g.MaxNumber
		if want == 0 {
			want = 50
		}
		for range 20 {
			c, sol := solved(t, p, g)
			assert.Equal(t, want, c.MaxNumber)
			n := decodeSolution(t, sol).Number
			assert.True(t, n >= 0 && n <= want, "%d not in 0..%d", n, want)
		}
	}
	d, err := NewPoW(rdb, []PoWKey{oldKey}, PoWConfig{})
	require.NoError(t, err)
	c, _ := solved(t, d, GenerateParams{})
	assert.EqualValues(t, 100_000, c.MaxNumber, "default cost")
}

// TestSolve: Solve is bounded by maxnumber and ctx and refuses what is not
// an ALTCHA SHA-256 challenge.
func TestSolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	salt := "abc?expires=1&"
	s := sha256.Sum256([]byte(salt + "77"))
	ch := func(maxN int64) []byte {
		b, _ := json.Marshal(altchaChallenge{"SHA-256", hex.EncodeToString(s[:]), maxN, salt, "sig"})
		return b
	}
	sol, err := Solve(ctx, ch(77))
	require.NoError(t, err)
	assert.EqualValues(t, 77, decodeSolution(t, sol).Number)
	_, err = Solve(ctx, ch(76))
	assert.ErrorIs(t, err, ErrInvalidArgument, "the number is beyond maxnumber")
	for _, bad := range []string{"", "{", `{"algorithm":"SHA-1","challenge":"00"}`, `{"algorithm":"SHA-256","challenge":"zz"}`,
		`{"algorithm":"SHA-256","challenge":"` + strings.Repeat("z", 64) + `"}`,
		`{"algorithm":"SHA-256","challenge":"` + strings.Repeat("0", 64) + `","maxnumber":-1}`} {
		_, err := Solve(ctx, []byte(bad))
		assert.ErrorIs(t, err, ErrInvalidArgument, bad)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Solve(cancelled, ch(77))
	assert.ErrorIs(t, err, context.Canceled)
}

// TestPoWCheckAllocs: the stateless check of a valid payload — base64,
// JSON, two SHA-256, one HMAC, the clock — allocates nothing.
func TestPoWCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts are meaningless")
	}
	rdb, _ := testenv.Miniredis(t)
	p, err := NewPoW(rdb, []PoWKey{oldKey, newKey}, PoWConfig{MaxNumber: 100})
	require.NoError(t, err)
	_, sol := solved(t, p, GenerateParams{User: "al+ice@x"})
	v := VerifyParams{Answer: sol, User: "al+ice@x"}
	escaped := VerifyParams{Answer: decodeSolution(t, sol).encode(t), User: "al+ice@x"}
	for _, v := range []*VerifyParams{&v, &escaped} {
		allocs := testing.AllocsPerRun(100, func() {
			sc := p.scratch.Get().(*powScratch)
			if _, err := p.check(sc, v); err != nil {
				t.Fatal(err)
			}
			p.scratch.Put(sc)
		})
		assert.Zero(t, allocs)
	}
}

// TestPoWObserved: Verify reports captcha.verify with Name "pow".
func TestPoWObserved(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	rec := newRecorder()
	p, err := NewPoW(rdb, []PoWKey{oldKey}, PoWConfig{MaxNumber: 10, Observer: rec})
	require.NoError(t, err)
	_, sol := solved(t, p, GenerateParams{User: "a"})
	ctx := callerCtx
	_ = p.Verify(ctx, VerifyParams{Answer: sol, User: "b"})
	_ = p.Verify(ctx, VerifyParams{Answer: sol, User: "a"})
	_ = p.Verify(ctx, VerifyParams{Answer: sol, User: "a"})
	_ = p.Verify(ctx, VerifyParams{Answer: "x"})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.True(t, rec.ctxOK, "the caller's ctx")
	var outcomes []string
	for _, e := range rec.events {
		assert.Equal(t, StageVerify, e.Stage)
		assert.Equal(t, "pow", e.Name)
		outcomes = append(outcomes, e.Outcome)
	}
	assert.Equal(t, []string{"wrong_user", observe.OK, "not_found", "wrong_answer"}, outcomes)
}

// TestQueryEscape: the salt's user is url.QueryEscape's form, compared
// without building it.
func TestQueryEscape(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "alice", "al+ice@x.y", "a b", "ü", "~-_.", "%41", "&=?#"} {
		esc := appendQueryEscape(nil, u)
		assert.Equal(t, url.QueryEscape(u), string(esc), u)
		assert.True(t, queryEscapedEqual(esc, u), u)
		assert.True(t, validQueryEscaped(esc), u)
		assert.False(t, queryEscapedEqual(esc, u+"x"), u)
		if u != "" {
			assert.False(t, queryEscapedEqual(esc, u[1:]), u)
		}
	}
	assert.False(t, queryEscapedEqual([]byte("%40"), "A"))
	assert.False(t, validQueryEscaped([]byte("a%4")))
	assert.False(t, validQueryEscaped([]byte("a&b")))
}

// TestPoWReasonsAreRefusals: every reason PoW.Verify gives wraps the one
// sentinel it names and the umbrella, and no other sentinel.
func TestPoWReasonsAreRefusals(t *testing.T) {
	t.Parallel()
	for e, want := range map[error]error{
		errPoWMalformed: ErrWrongAnswer, errPoWUnsolved: ErrWrongAnswer, errPoWForged: ErrWrongAnswer,
		errPoWUnknownKey: ErrNotFound, errPoWOtherID: ErrNotFound, errPoWExpired: ErrNotFound, errPoWRedeemed: ErrNotFound,
	} {
		assert.ErrorIs(t, e, ErrRefused, e.Error())
		for name, other := range refusalSentinels {
			assert.Equal(t, other == want, errors.Is(e, other), "%s is %s", e, name)
		}
		assert.True(t, strings.HasPrefix(e.Error(), want.Error()+": pow "), e.Error())
	}
}
