package waitroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
)

// Commit returns the commitment to seed: the lower-case hex SHA-256 of the
// seed's bytes. The operator publishes it before the sale opens and reveals
// the seed at the start; anyone can then check the order with
// [VerifyOrder].
func Commit(seed []byte) string {
	s := sha256.Sum256(seed)
	return hex.EncodeToString(s[:])
}

// Shuffle returns the order that seed gives entries: the entries sorted
// byte-wise (duplicates removed), then shuffled by Fisher–Yates driven by
// HMAC-SHA256. The function is public and fixed, so it can be recomputed
// in any language:
//
//   - the random words are the four big-endian uint64 of
//     HMAC-SHA256(key = seed, message = uint64 big-endian k) for k = 0, 1,
//     2, …, taken in order;
//   - for i from n−1 down to 1: draw j uniform in [0, i] by rejection (take
//     the next word x; reject it while x ≥ 2^64 − (2^64 mod (i+1)); j = x
//     mod (i+1)), then swap positions i and j.
//
// entries is not modified.
func Shuffle(seed []byte, entries []string) []string {
	out := slices.Clone(entries)
	slices.Sort(out)
	out = slices.Compact(out)
	g := newWords(seed)
	for i := len(out) - 1; i > 0; i-- {
		j := int(g.below(uint64(i + 1 - shuffleBias)))
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// shuffleBias is 0; a test sets it to 1 to run an off-by-one Fisher–Yates
// (Sattolo's algorithm, which never leaves an entry in place) and show the
// fairness test catches it.
var shuffleBias = 0

// VerifyOrder checks a published order: seed matches commitment
// ([Commit]), and order is exactly [Shuffle](seed, entries). It returns
// nil or an error that says what differs (wrapping [ErrInvalidArgument]).
func VerifyOrder(seed []byte, commitment string, entries, order []string) error {
	if Commit(seed) != commitment {
		return fmt.Errorf("%w: the seed does not match the commitment", ErrInvalidArgument)
	}
	want := Shuffle(seed, entries)
	if len(want) != len(order) {
		return fmt.Errorf("%w: order has %d entries, the shuffle %d", ErrInvalidArgument, len(order), len(want))
	}
	for i := range want {
		if want[i] != order[i] {
			return fmt.Errorf("%w: place %d is %q, the shuffle gives %q", ErrInvalidArgument, i+1, order[i], want[i])
		}
	}
	return nil
}

// words is the stream of random words of a seed.
type words struct {
	mac   []byte // the HMAC key (the seed)
	k     uint64
	block [sha256.Size]byte
	used  int // words of block already taken (4 = none left)
}

func newWords(seed []byte) *words { return &words{mac: seed, used: 4} }

func (w *words) next() uint64 {
	if w.used == 4 {
		h := hmac.New(sha256.New, w.mac)
		var ctr [8]byte
		binary.BigEndian.PutUint64(ctr[:], w.k)
		h.Write(ctr[:])
		h.Sum(w.block[:0])
		w.k++
		w.used = 0
	}
	x := binary.BigEndian.Uint64(w.block[w.used*8:])
	w.used++
	return x
}

// below returns a uniform value in [0, n), n ≥ 1, by rejection.
func (w *words) below(n uint64) uint64 {
	if n <= 1 {
		return 0
	}
	// limit = 2^64 − (2^64 mod n); values ≥ limit are rejected.
	rem := (math.MaxUint64%n + 1) % n
	for {
		x := w.next()
		if rem == 0 || x < -rem { // -rem is 2^64 − rem
			return x % n
		}
	}
}
