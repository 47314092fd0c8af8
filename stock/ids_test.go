package stock

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"1", "0", "-1", "9223372036854775807", "3f2b8c1e-9d4a-4b7e-a1c2-5e6f7a8b9c0d",
		"01J9Z3K8QW4V6X2N5M7P0R1T3Y", "summer-sale_2026", "a.b@c+d", strings.Repeat("x", MaxIDLen)} {
		assert.True(t, ValidID(id), id)
	}
	for _, id := range hostileIDs {
		assert.False(t, ValidID(id), "%q", id)
	}
	for c := range 256 {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._@+-", byte(c)) >= 0
		assert.Equal(t, ok, ValidID("a"+string([]byte{byte(c)})+"b"), "byte %#x", c)
	}
}

// hostileIDs are refused everywhere: each would break a key ("{", "}"
// move the Cluster hash tag; ":" splits a ledger record "user:qty:…" and
// the key parts) or is not an ID.
var hostileIDs = []string{
	"", "1:2", ":", "7}", "{7", "a{b}c", "1 2", " 1", "1\n", "1\x00", "é", "用户", "1\u00a0",
	strings.Repeat("7", MaxIDLen+1), strings.Repeat("x", 10000),
}

// countingScripter counts every script call that reaches the client.
type countingScripter struct {
	redis.UniversalClient
	n atomic.Int64
}

func (c *countingScripter) Eval(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	c.n.Add(1)
	return c.UniversalClient.Eval(ctx, s, k, a...)
}

func (c *countingScripter) EvalSha(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	c.n.Add(1)
	return c.UniversalClient.EvalSha(ctx, s, k, a...)
}

func (c *countingScripter) EvalRO(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	c.n.Add(1)
	return c.UniversalClient.EvalRO(ctx, s, k, a...)
}

func (c *countingScripter) EvalShaRO(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	c.n.Add(1)
	return c.UniversalClient.EvalShaRO(ctx, s, k, a...)
}

// TestHostileIDsRefusedBeforeRedis: every call taking an activity or user
// ID refuses a hostile one with the package's invalid-input sentinel,
// without a single script call and without writing a key, and never
// echoes an over-long ID in the error.
func TestHostileIDsRefusedBeforeRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	mustLoad(t, d, Activity{ID: "1", Stock: 10, PerUserLimit: 2})
	mustLoad(t, d, Activity{ID: "2", Stock: 10, Shards: 3})
	before := snapshot(t, rdb, prefix)

	cs := &countingScripter{UniversalClient: rdb}
	h := newTestDeductor(t, cs, prefix)
	check := func(id, call string, err error, sentinel error) {
		t.Helper()
		require.ErrorIs(t, err, sentinel, "%s(%.20q)", call, id)
		if len(id) > MaxIDLen {
			assert.NotContains(t, err.Error(), id[:MaxIDLen+1], "%s echoes an over-long ID", call)
			assert.Less(t, len(err.Error()), 200, call)
		}
	}
	for _, id := range hostileIDs {
		for _, a := range []string{"1", "2"} {
			_, err := h.Reserve(ctx, Request{Activity: a, User: id, Qty: 1, ReservationID: "r"})
			check(id, "Reserve user", err, ErrInvalidArgument)
			_, err = h.Held(ctx, a, id)
			check(id, "Held user", err, ErrInvalidArgument)
			_, err = h.Rebuild(ctx, Activity{ID: a, Stock: 10}, []Reservation{{ID: "r", User: id, Qty: 1}})
			check(id, "Rebuild user", err, ErrInvalidArgument)
		}
		_, err := h.Reserve(ctx, Request{Activity: id, User: "1", Qty: 1, ReservationID: "r"})
		check(id, "Reserve", err, ErrInvalidArgument)
		_, err = h.Release(ctx, id, "r")
		check(id, "Release", err, ErrInvalidArgument)
		_, _, err = h.Lookup(ctx, id, "r")
		check(id, "Lookup", err, ErrInvalidArgument)
		_, err = h.Remaining(ctx, id)
		check(id, "Remaining", err, ErrInvalidArgument)
		_, err = h.Stats(ctx, id)
		check(id, "Stats", err, ErrInvalidArgument)
		_, _, err = h.Reservations(ctx, id, 0, 10)
		check(id, "Reservations", err, ErrInvalidArgument)
		check(id, "Freeze", h.Freeze(ctx, id), ErrInvalidArgument)
		check(id, "Unfreeze", h.Unfreeze(ctx, id), ErrInvalidArgument)
		_, err = h.SettleTransfers(ctx, id)
		check(id, "SettleTransfers", err, ErrInvalidArgument)
		_, err = h.Held(ctx, id, "1")
		check(id, "Held", err, ErrInvalidArgument)
		for _, shards := range []int{0, 3} {
			_, err = h.Load(ctx, Activity{ID: id, Stock: 1, Shards: shards})
			check(id, "Load", err, ErrInvalidArgument)
			check(id, "Reset", h.Reset(ctx, Activity{ID: id, Stock: 1, Shards: shards}), ErrInvalidArgument)
			_, err = h.Rebuild(ctx, Activity{ID: id, Stock: 1, Shards: shards}, nil)
			check(id, "Rebuild", err, ErrInvalidArgument)
		}
		assert.False(t, h.SoldOut(id))
		assert.False(t, h.SoldOutFor(id, "r"))
	}
	assert.Zero(t, cs.n.Load(), "a hostile ID reached Redis")
	assert.Equal(t, before, snapshot(t, rdb, prefix), "a hostile ID wrote something")

	// A Preloader whose source returns a hostile ID reports it, short.
	long := strings.Repeat("9", 5000)
	p, err := NewPreloader(h, Source(func(context.Context, time.Time, time.Time) ([]Activity, error) {
		return []Activity{{ID: long, Stock: 1}, {ID: "a:b", Stock: 1}}, nil
	}))
	require.NoError(t, err)
	_, err = p.Tick(ctx)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotContains(t, err.Error(), long[:MaxIDLen+1])
	assert.Less(t, len(err.Error()), 500)
	assert.Zero(t, cs.n.Load())
}

// TestStringIDsEndToEnd: activity and user IDs of every allowed shape —
// decimal, UUID, ULID, slug with . _ @ + -, 64 bytes — go through Reserve,
// Held, Lookup, Reservations, Release and Rebuild unchanged, on every Redis
// available, sharded or not; counted from the hashes: the buyers hash has
// the user ID as field, the ledger record starts with it, and every key of
// the activity carries the activity's hash tag.
func TestStringIDsEndToEnd(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		d := newTestDeductor(t, rdb, prefix)
		users := []string{"42", uuidOf(1), "01J9Z3K8QW4V6X2N5M7P0R1T3Y", "a.b_c@d+e-f", strings.Repeat("u", MaxIDLen)}
		for _, shards := range []int{0, 3} {
			for _, a := range []string{"7" + strings.Repeat("0", shards), uuidOf(100 + shards), "sale@" + uid(shards) + strings.Repeat("s", MaxIDLen-6)} {
				mustLoad(t, d, Activity{ID: a, Stock: 100, PerUserLimit: 2, Shards: shards})
				for i, u := range users {
					id := "r-" + uid(i)
					res, err := d.Reserve(ctx, Request{Activity: a, User: u, Qty: 2, ReservationID: id})
					require.NoError(t, err)
					require.Equal(t, Reserved, res.Status, "%s %s", a, u)
					held, err := d.Held(ctx, a, u)
					require.NoError(t, err)
					assert.EqualValues(t, 2, held)
					r, ok, err := d.Lookup(ctx, a, id)
					require.NoError(t, err)
					require.True(t, ok)
					assert.Equal(t, u, r.User)

					k := activityKeys(prefix, a)
					if shards > 1 {
						k = shardKeys(prefix, a, shards, shardOf(u, shards))
					}
					assert.Equal(t, "2", hgetall(t, rdb, k.buyers)[u], "buyers field is the user ID")
					assert.Regexp(t, "^"+regexp.QuoteMeta(u)+`:2:R:\d+$`, hgetall(t, rdb, k.ledger)[id])
					tag := hashTag(k.meta)
					require.True(t, strings.HasPrefix(tag, "{a:"+a), tag)
					for _, key := range k.list() {
						assert.Equal(t, tag, hashTag(key))
					}
				}
				l := ledger(t, d, a)
				require.Len(t, l, len(users))
				_, per := heldSum(l)
				for _, u := range users {
					assert.EqualValues(t, 2, per[u], u)
				}
				rr, err := d.Release(ctx, a, "r-1")
				require.NoError(t, err)
				assert.Equal(t, ReleaseDone, rr.Status)
				assert.Equal(t, users[1], rr.User)
				rem, err := d.Remaining(ctx, a)
				require.NoError(t, err)
				assert.EqualValues(t, 100-2*len(users)+2, rem)

				require.NoError(t, d.Freeze(ctx, a))
				live := []Reservation{{ID: "x", User: users[3], Qty: 1}, {ID: "y", User: users[4], Qty: 2}}
				st, err := d.Rebuild(ctx, Activity{ID: a, Stock: 100, PerUserLimit: 2, Shards: shards}, live)
				require.NoError(t, err)
				assert.EqualValues(t, 97, st.Remaining)
				held, err := d.Held(ctx, a, users[4])
				require.NoError(t, err)
				assert.EqualValues(t, 2, held)
				r, ok, err := d.Lookup(ctx, a, "x")
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, users[3], r.User)
			}
		}
	})
}

// TestForeignUserInLedgerIsBadReply: a ledger record whose user part is not
// a valid ID (written by something else) is ErrBadReply, not a user.
func TestForeignUserInLedgerIsBadReply(t *testing.T) {
	t.Parallel()
	_, err := parseRecord("r", "a b:1:R:5")
	assert.ErrorIs(t, err, ErrBadReply)
	_, err = parseRecord("r", "é:1:R:5")
	assert.ErrorIs(t, err, ErrBadReply)
	r, err := parseRecord("r", "3f2b8c1e-9d4a-4b7e-a1c2-5e6f7a8b9c0d:1:X:5:6")
	require.NoError(t, err)
	assert.Equal(t, "3f2b8c1e-9d4a-4b7e-a1c2-5e6f7a8b9c0d", r.User)
	assert.Equal(t, Freed, r.State)
	r, err = parseRecord("r", ":0:T:5")
	require.NoError(t, err)
	assert.Empty(t, r.User)
}
