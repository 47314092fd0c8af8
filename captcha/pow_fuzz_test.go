package captcha

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// FuzzPoWVerify feeds arbitrary payloads and users to the stateless
// checks of PoW.Verify. They never panic, every failure is a refusal, and
// whatever they accept is, decoded by encoding/json instead of the
// package's scanner, a challenge signed by one of the PoW's keys (the
// fuzzer cannot forge the HMAC, so one this PoW issued; fuzz workers are
// processes of their own, each issuing its own, so the test checks the
// HMAC rather than a list) and solved by its number.
func FuzzPoWVerify(f *testing.F) {
	rdb, _ := testenv.Miniredis(f)
	clk := testenv.NewEpochClock(0)
	p, err := NewPoW(rdb, []PoWKey{oldKey, newKey}, PoWConfig{MaxNumber: 50, Clock: clk, TTL: time.Hour})
	require.NoError(f, err)
	for _, user := range []string{"", "alice", "al+ice@x"} {
		raw, err := p.Generate(GenerateParams{User: user})
		require.NoError(f, err)
		var c altchaChallenge
		require.NoError(f, json.Unmarshal(raw, &c))
		sol, err := Solve(context.Background(), raw)
		require.NoError(f, err)
		f.Add(sol, user)
		pl := decodeSolution(f, sol)
		f.Add(pl.encode(f), user)
		b, _ := base64.StdEncoding.DecodeString(sol)
		f.Add(base64.RawStdEncoding.EncodeToString(b), user+"x")
		pl.Number++
		f.Add(pl.encode(f), user)
	}
	f.Add("", "")
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"algorithm":"SHA-256","challenge":"","number":1,"salt":"","signature":""}`)), "")
	f.Fuzz(func(t *testing.T, answer, user string) {
		v := VerifyParams{Answer: answer, User: user}
		sc := new(powScratch)
		_, err := p.check(sc, &v)
		if err != nil {
			require.ErrorIs(t, err, ErrRefused)
			return
		}
		b, err := base64.StdEncoding.DecodeString(answer)
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(answer)
		}
		require.NoError(t, err, "accepted but not base64")
		var pl struct {
			Algorithm string      `json:"algorithm"`
			Challenge string      `json:"challenge"`
			Number    json.Number `json:"number"`
			Salt      string      `json:"salt"`
			Signature string      `json:"signature"`
		}
		require.NoError(t, json.Unmarshal(b, &pl), "accepted but not JSON")
		require.Equal(t, "SHA-256", pl.Algorithm)
		n, err := strconv.ParseUint(pl.Number.String(), 10, 64)
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(pl.Salt + strconv.FormatUint(n, 10)))
		got, err := hex.DecodeString(pl.Challenge)
		require.NoError(t, err)
		require.Equal(t, sum[:], got, "accepted a number that does not solve it")
		sig, err := hex.DecodeString(pl.Signature)
		require.NoError(t, err)
		okSig := false
		for _, k := range []PoWKey{oldKey, newKey} {
			m := hmac.New(sha256.New, k.Secret)
			m.Write([]byte(hex.EncodeToString(sum[:])))
			okSig = okSig || hmac.Equal(m.Sum(nil), sig)
		}
		require.True(t, okSig, "accepted an unsigned challenge")
	})
}
