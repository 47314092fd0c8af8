// Package keyring is the HMAC-SHA256 key set that token's signed URLs,
// captcha's proof-of-work challenges and waitroom's tickets and passes are
// signed with: the first key of the set signs, every key verifies, and a
// set is replaced whole to rotate keys. Like internal/observe, it is a seam
// under internal/, so the building blocks share it without importing one
// another; each keeps its own exported key type and errors.
package keyring

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// Limits of a key.
const (
	MaxIDLen     = 16 // a key ID is 1-16 bytes of [A-Za-z0-9._-]
	MinSecretLen = 16 // bytes; 32 random bytes advised
	MACLen       = sha256.Size
)

// Key is one signing key.
type Key struct {
	ID     string
	Secret []byte
}

// Ring is an immutable key set.
type Ring struct {
	signer *Entry
	byID   map[string]*Entry
}

// Entry is one key of a Ring.
type Entry struct {
	id   string
	pool sync.Pool // of hash.Hash (keyed HMAC-SHA256), reused via Reset
}

// ID is the key's ID.
func (e *Entry) ID() string { return e.id }

// MAC appends the HMAC-SHA256 of msg under the key to dst. It allocates
// nothing once the key's pool is warm.
func (e *Entry) MAC(dst, msg []byte) []byte {
	h := e.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(msg)
	dst = h.Sum(dst)
	e.pool.Put(h)
	return dst
}

// New returns the ring of keys: keys[0] signs. It fails, saying why, on no
// key, a key ID that is empty, longer than MaxIDLen, outside
// [A-Za-z0-9._-] or repeated, or a secret shorter than MinSecretLen; the
// caller wraps the error with its own ErrInvalidConfig. The secrets are
// copied.
func New(keys []Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	r := &Ring{byID: make(map[string]*Entry, len(keys))}
	for i, k := range keys {
		if !ValidID(k.ID) {
			return nil, fmt.Errorf("key ID %q", k.ID)
		}
		if len(k.Secret) < MinSecretLen {
			return nil, fmt.Errorf("key %q: secret shorter than %d bytes", k.ID, MinSecretLen)
		}
		if _, dup := r.byID[k.ID]; dup {
			return nil, fmt.Errorf("duplicate key ID %q", k.ID)
		}
		secret := append([]byte(nil), k.Secret...)
		e := &Entry{id: k.ID}
		e.pool.New = func() any { return hmac.New(sha256.New, secret) }
		r.byID[k.ID] = e
		if i == 0 {
			r.signer = e
		}
	}
	return r, nil
}

// Signer is the key that signs: the first of the set.
func (r *Ring) Signer() *Entry { return r.signer }

// Key is the key with ID id, or nil. Called with string(b) of a []byte, it
// allocates nothing.
func (r *Ring) Key(id string) *Entry { return r.byID[id] }

// ValidID reports whether id is a valid key ID.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !IDByte(id[i]) {
			return false
		}
	}
	return true
}

// IDByte reports whether c may appear in a key ID.
func IDByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
