package waitroom

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

// TestCredentialsRefused: a forged, altered, expired, other user's, other
// sale's, wrong-kind or replayed-after-Done ticket or pass never gets
// through, and every refusal wraps ErrRefused.
func TestCredentialsRefused(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0)
	r := newRoom(t, rdb, c, WithTicketTTL(time.Hour), WithPassTTL(time.Minute))
	configure(t, r, "s1", 0, 10)
	configure(t, r, "s2", 0, 10)
	tk := join(t, r, "s1", "alice", "bob")
	join(t, r, "s2", "alice")
	if err := r.Start(ctx, "s1", testSeed); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "s2", testSeed); err != nil {
		t.Fatal(err)
	}
	r.Admit(ctx, "s1", 10)
	r.Admit(ctx, "s2", 10)
	p, err := r.Poll(ctx, Credential{Sale: "s1", User: "alice", Token: tk["alice"]})
	if err != nil || p.State != Admitted {
		t.Fatalf("alice: %+v %v", p, err)
	}
	pass := p.Pass

	other, _ := New(rdb, []Key{{ID: "k1", Secret: []byte("another secret of 32 bytes......")}}, WithKeyPrefix(r.opts.prefix), WithClock(c))
	forgedPass, _ := other.Poll(ctx, Credential{Sale: "s1", User: "alice", Token: other.ring.Load().sign(kindTicket, "s1", "alice", t0.Add(time.Hour))})
	raw, _ := base64.RawURLEncoding.DecodeString(pass)
	raw[len(raw)-40] ^= 1 // a byte of the expiry
	altered := base64.RawURLEncoding.EncodeToString(raw)

	for _, tc := range []struct {
		name string
		c    Credential
		want error
	}{
		{"garbage", Credential{"s1", "alice", "!!"}, ErrMalformed},
		{"empty", Credential{"s1", "alice", ""}, ErrMalformed},
		{"ticket as pass", Credential{"s1", "alice", tk["alice"]}, ErrMalformed},
		{"forged (other key)", Credential{"s1", "alice", forgedPass.Pass}, ErrInvalidSignature},
		{"altered", Credential{"s1", "alice", altered}, ErrInvalidSignature},
		{"other user", Credential{"s1", "bob", pass}, ErrWrongUser},
		{"other sale", Credential{"s2", "alice", pass}, ErrWrongUser},
	} {
		_, err := r.Verify(ctx, tc.c)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrRefused) {
			t.Errorf("pass %s: %v, want %v (a refusal)", tc.name, err, tc.want)
		}
	}
	if _, err := r.Poll(ctx, Credential{"s1", "alice", pass}); !errors.Is(err, ErrMalformed) {
		t.Errorf("pass as ticket: %v", err)
	}
	if _, err := r.Poll(ctx, Credential{"s1", "bob", tk["alice"]}); !errors.Is(err, ErrWrongUser) {
		t.Errorf("other user's ticket: %v", err)
	}
	if _, err := r.Poll(ctx, Credential{"s2", "alice", tk["alice"]}); !errors.Is(err, ErrWrongUser) {
		t.Errorf("other sale's ticket: %v", err)
	}
	// The genuine pass works, until Done: then its replay is refused.
	if _, err := r.Verify(ctx, Credential{"s1", "alice", pass}); err != nil {
		t.Fatalf("genuine pass: %v", err)
	}
	if err := r.Done(ctx, "s1", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Verify(ctx, Credential{"s1", "alice", pass}); !errors.Is(err, ErrNotAdmitted) {
		t.Errorf("pass replayed after Done: %v, want ErrNotAdmitted", err)
	}
	// Expiry: bob's pass after its minute; then every ticket after its hour.
	pb, _ := r.Poll(ctx, Credential{"s1", "bob", tk["bob"]})
	c.Add(time.Minute)
	if _, err := r.Verify(ctx, Credential{"s1", "bob", pb.Pass}); !errors.Is(err, ErrExpired) {
		t.Errorf("expired pass: %v", err)
	}
	c.Add(time.Hour)
	if _, err := r.Poll(ctx, Credential{"s1", "bob", tk["bob"]}); !errors.Is(err, ErrExpired) {
		t.Errorf("expired ticket: %v", err)
	}
}

// TestKeyRotation: a credential signed by the old key verifies while the
// old key is in the set, and is refused once it is dropped.
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0)
	r := newRoom(t, rdb, c)
	configure(t, r, "s1", 0, 10)
	tk := join(t, r, "s1", "u")
	k2 := Key{ID: "k2", Secret: []byte("the new key of thirty-two bytes!")}
	if err := r.SetKeys([]Key{k2, testKeys[0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Poll(ctx, Credential{"s1", "u", tk["u"]}); err != nil {
		t.Fatalf("old key still in the set: %v", err)
	}
	if err := r.SetKeys([]Key{k2}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Poll(ctx, Credential{"s1", "u", tk["u"]}); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("old key dropped: %v", err)
	}
	if err := r.SetKeys([]Key{{ID: "k3", Secret: []byte("short")}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("short secret: %v", err)
	}
}

// FuzzCredential: decoding and verifying arbitrary input never panics and
// never accepts anything but the genuine credential.
func FuzzCredential(f *testing.F) {
	ring, err := newKeyring(testKeys)
	if err != nil {
		f.Fatal(err)
	}
	exp := t0.Add(time.Hour)
	genuine := map[byte]string{kindPass: ring.sign(kindPass, "s1", "alice", exp), kindTicket: ring.sign(kindTicket, "s1", "alice", exp)}
	f.Add(genuine[kindPass])
	f.Add(genuine[kindTicket])
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, tok string) {
		for _, kind := range []byte{kindTicket, kindPass} {
			got, err := ring.verify(kind, tok, "s1", "alice", t0)
			if err == nil {
				if tok != genuine[kind] || !got.Equal(exp) {
					t.Fatalf("accepted %q as kind %c", tok, kind)
				}
			} else if !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v is not a refusal", err)
			}
		}
	})
}
