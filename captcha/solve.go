package captcha

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Solve does what ALTCHA's widget does with a challenge (the JSON
// [PoW.Generate] returns, or any ALTCHA v1 SHA-256 challenge): it tries
// the numbers 0..maxnumber in order (ALTCHA's default 1e6 when maxnumber
// is absent) until SHA-256(salt+number) is the challenge, and returns the
// payload the widget would post, base64(JSON{algorithm, challenge, number,
// salt, signature, took}). It is meant for load generators and tests: a
// challenge costs it maxnumber/2 hashes on average. ctx is checked every
// 4096 numbers; its error is returned as is. A challenge that is not
// ALTCHA v1 SHA-256 JSON, or that no number up to maxnumber solves, fails
// with [ErrInvalidArgument].
func Solve(ctx context.Context, challenge []byte) (string, error) {
	var c struct {
		Algorithm string `json:"algorithm"`
		Challenge string `json:"challenge"`
		MaxNumber *int64 `json:"maxnumber"`
		Salt      string `json:"salt"`
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(challenge, &c); err != nil {
		return "", fmt.Errorf("%w: pow challenge: %v", ErrInvalidArgument, err)
	}
	var target [sha256.Size]byte
	if c.Algorithm != powAlgorithm || len(c.Challenge) != 2*sha256.Size {
		return "", fmt.Errorf("%w: pow challenge: not an ALTCHA SHA-256 challenge", ErrInvalidArgument)
	}
	if _, err := hex.Decode(target[:], []byte(c.Challenge)); err != nil {
		return "", fmt.Errorf("%w: pow challenge: %v", ErrInvalidArgument, err)
	}
	maxN := int64(1_000_000)
	if c.MaxNumber != nil {
		maxN = *c.MaxNumber
	}
	if maxN < 0 || maxN > powMaxNumber {
		return "", fmt.Errorf("%w: pow challenge: maxnumber %d not in 0..%d", ErrInvalidArgument, maxN, powMaxNumber)
	}
	start := time.Now() // "took" is wall time, as the widget reports it
	buf := make([]byte, len(c.Salt), len(c.Salt)+20)
	copy(buf, c.Salt)
	for n := int64(0); n <= maxN; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		if sha256.Sum256(strconv.AppendInt(buf, n, 10)) != target {
			continue
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false) // like JSON.stringify: the salt's '&' stays '&'
		err := enc.Encode(struct {
			Algorithm string `json:"algorithm"`
			Challenge string `json:"challenge"`
			Number    int64  `json:"number"`
			Salt      string `json:"salt"`
			Signature string `json:"signature"`
			Took      int64  `json:"took"`
		}{c.Algorithm, c.Challenge, n, c.Salt, c.Signature, time.Since(start).Milliseconds()})
		if err != nil {
			return "", fmt.Errorf("%w: pow challenge: %v", ErrInvalidArgument, err)
		}
		return base64.StdEncoding.EncodeToString(bytes.TrimSuffix(out.Bytes(), []byte("\n"))), nil
	}
	return "", fmt.Errorf("%w: pow challenge: no number in 0..%d solves it", ErrInvalidArgument, maxN)
}
