package captcha

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

// BenchmarkGenerator measures the in-process image generators (the cost of
// drawing the PNG dominates).
func BenchmarkGenerator(b *testing.B) {
	letters, err := Letters(5, Style{})
	if err != nil {
		b.Fatal(err)
	}
	arith, err := Arithmetic(Style{}, false)
	if err != nil {
		b.Fatal(err)
	}
	for name, g := range map[string]Generator{"letters": letters, "arithmetic": arith} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Generate(context.Background(), Request{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkNormalizeAnswer measures answer normalisation.
func BenchmarkNormalizeAnswer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = normalizeAnswer(" XkCd7 ")
	}
}

// BenchmarkGenerateVerify measures one Generate (fixed text generator, so
// only Redis is measured) plus one successful Verify against the real
// Redis named by SECKILL_REDIS_ADDR, 50 parallel callers; skipped otherwise.
func BenchmarkGenerateVerify(b *testing.B) {
	rdb := testenv.RealRedis(b)
	s, err := New(rdb, fixed("", "abc"), WithKeyPrefix(testenv.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetParallelism(25) // 25 × GOMAXPROCS(2) = 50 callers
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ch, err := s.Generate(ctx, GenerateParams{User: "u"})
			if err == nil {
				err = s.Verify(ctx, VerifyParams{ID: ch.ID, Answer: "ABC", User: "u"})
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkPoWVerify measures PoW.Verify. In process, side by side:
// check=pow is its stateless check (base64, JSON, two SHA-256, one HMAC,
// the expiry; everything but the Redis round trip) and check=altcha-v1 the
// same check written the way ALTCHA's v1 libraries write it (decode to a
// string, encoding/json, fmt, a new HMAC per call, hex strings compared),
// the anchor. Against the real Redis named by SECKILL_REDIS_ADDR (skipped
// otherwise): redis=pow is a whole PoW.Verify (check plus SET NX) and
// redis=store a successful Store.Verify of an image captcha, the anchor.
func BenchmarkPoWVerify(b *testing.B) {
	rdb, _ := testenv.Miniredis(b)
	p, err := NewPoW(rdb, []PoWKey{oldKey, newKey}, PoWConfig{MaxNumber: 1000})
	if err != nil {
		b.Fatal(err)
	}
	_, sol := solved(b, p, GenerateParams{User: "alice"})
	v := VerifyParams{Answer: sol, User: "alice"}
	b.Run("check=pow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sc := p.scratch.Get().(*powScratch)
			_, err := p.check(sc, &v)
			p.scratch.Put(sc)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check=altcha-v1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !altchaV1Verify(sol, oldKey.Secret) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("redis=pow", func(b *testing.B) {
		real := testenv.RealRedis(b)
		p, err := NewPoW(real, []PoWKey{oldKey}, PoWConfig{MaxNumber: 1, KeyPrefix: testenv.Prefix(b)})
		if err != nil {
			b.Fatal(err)
		}
		sols := make([]string, b.N)
		for i := range sols {
			_, sols[i] = solved(b, p, GenerateParams{User: "alice"})
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := p.Verify(ctx, VerifyParams{Answer: sols[i], User: "alice"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redis=store", func(b *testing.B) {
		real := testenv.RealRedis(b)
		s, err := New(real, fixed("", "abc"), WithKeyPrefix(testenv.Prefix(b)))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		ids := make([]string, b.N)
		for i := range ids {
			ch, err := s.Generate(ctx, GenerateParams{User: "alice"})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = ch.ID
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := s.Verify(ctx, VerifyParams{ID: ids[i], Answer: "abc", User: "alice"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// altchaV1Verify is the anchor of BenchmarkPoWVerify: the v1 check as
// ALTCHA's libraries write it (payload decoded with encoding/json, the
// challenge recomputed from salt + fmt.Sprint(number), the signature as a
// fresh HMAC, hex strings compared, expires read with url.ParseQuery).
func altchaV1Verify(payload string, key []byte) bool {
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return false
	}
	var pl altchaPayload
	if err := json.Unmarshal(raw, &pl); err != nil {
		return false
	}
	if _, q, ok := strings.Cut(pl.Salt, "?"); ok {
		params, _ := url.ParseQuery(q)
		exp, err := strconv.ParseInt(params.Get("expires"), 10, 64)
		if err != nil || time.Now().Unix() > exp {
			return false
		}
	}
	sum := sha256.Sum256([]byte(pl.Salt + fmt.Sprint(pl.Number)))
	challenge := hex.EncodeToString(sum[:])
	m := hmac.New(sha256.New, key)
	m.Write([]byte(challenge))
	return challenge == pl.Challenge && hex.EncodeToString(m.Sum(nil)) == pl.Signature
}

// BenchmarkSolve measures what a challenge costs its solver in Go (a bot
// at least; a browser's WebCrypto is slower): one op is one challenge of
// the default cost (100000), hashes/op the numbers tried.
func BenchmarkSolve(b *testing.B) {
	rdb, _ := testenv.Miniredis(b)
	p, err := NewPoW(rdb, []PoWKey{oldKey}, PoWConfig{})
	if err != nil {
		b.Fatal(err)
	}
	chs := make([][]byte, b.N)
	for i := range chs {
		if chs[i], err = p.Generate(GenerateParams{}); err != nil {
			b.Fatal(err)
		}
	}
	var tried int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sol, err := Solve(context.Background(), chs[i])
		if err != nil {
			b.Fatal(err)
		}
		tried += decodeSolution(b, sol).Number + 1
	}
	b.ReportMetric(float64(tried)/float64(b.N), "hashes/op")
}
