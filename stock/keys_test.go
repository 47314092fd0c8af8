package stock

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeysShareOneTag is the unit check miniredis cannot make: every key a
// script receives carries the same {a:<id>} tag.
// TestVariantKeysShareTheActivityTag: every key of every variant of an
// activity, its vars hash, and the plain keys carry the activity's tag, so
// a multi-line reserve within one activity is one slot; a limit group has
// its own tag.
func TestVariantKeysShareTheActivityTag(t *testing.T) {
	t.Parallel()
	for _, a := range testActivityIDs {
		want := "{a:" + a + "}"
		assert.Equal(t, want, hashTag(varsKey("p:", a)))
		for _, v := range []string{"S", "M", "42", "red.128GB"} {
			k := activityKeys("p:", VariantOf(a, v))
			for _, key := range append(k.list(), k.ext) {
				assert.Equal(t, want, hashTag(key), key)
				assert.Equal(t, keySlot(varsKey("p:", a)), keySlot(key), key)
			}
			assert.Equal(t, "p:{a:"+a+"}:v:"+v+":meta", k.meta)
		}
	}
	for _, key := range groupKeys("p:", "sneaker-1") {
		assert.Equal(t, "{g:sneaker-1}", hashTag(key))
	}
}

func TestKeysShareOneTag(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"seckill:", "", "app:v2:"} {
		for _, a := range testActivityIDs {
			k := activityKeys(prefix, a)
			want := "{a:" + a + "}"
			for _, key := range k.list() {
				assert.Equal(t, want, hashTag(key), key)
			}
		}
	}
}

// testActivityIDs mixes numeric IDs (as a shop with int64 IDs formats
// them), a UUID, a ULID and a slug.
var testActivityIDs = []string{"1", "42", "987654321", "4611686018427387904",
	"3f2b8c1e-9d4a-4b7e-a1c2-5e6f7a8b9c0d", "01J9Z3K8QW4V6X2N5M7P0R1T3Y", "summer.sale_2026+eu@shop-1"}

// hashTag extracts the Cluster hash tag of key the way Redis does.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j == i+1 {
						return ""
					}
					return key[i : j+1]
				}
			}
			return ""
		}
	}
	return ""
}

// TestClusterOneSlot asks the real Cluster for the slot of every key of an activity.
func TestClusterOneSlot(t *testing.T) {
	t.Parallel()
	c := testenv.RealCluster(t)
	ctx := context.Background()
	for _, a := range testActivityIDs {
		k := activityKeys(testenv.Prefix(t), a)
		var slots []int64
		for _, key := range k.list() {
			s, err := c.ClusterKeySlot(ctx, key).Result()
			require.NoError(t, err)
			slots = append(slots, s)
		}
		for _, s := range slots {
			assert.Equal(t, slots[0], s)
		}
	}
}

func TestReleaseChannel(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "seckill:stock:released", releaseChannel(defaultKeyPrefix))
	assert.Equal(t, activityKeys("p:", "7"), keys{meta: "p:{a:7}:meta", buyers: "p:{a:7}:buyers", ledger: "p:{a:7}:resv",
		ever: "p:{a:7}:ever", adj: "p:{a:7}:adj", ext: "p:{a:7}:ext"})
}

// TestNumericKeysUnchanged: since IDs became strings, a numeric ID given in
// decimal keeps the exact keys and the buyer shard it had when IDs were
// int64 (the golden values below were produced by the int64 code), so the
// keys of a running deployment stay valid across the upgrade.
func TestNumericKeysUnchanged(t *testing.T) {
	t.Parallel()
	assert.Equal(t, keys{meta: "seckill:{a:7}:meta", buyers: "seckill:{a:7}:buyers", ledger: "seckill:{a:7}:resv",
		ever: "seckill:{a:7}:ever", adj: "seckill:{a:7}:adj", ext: "seckill:{a:7}:ext"},
		activityKeys(defaultKeyPrefix, strconv.FormatInt(7, 10)))
	assert.Equal(t, "seckill:{a:987654321}:resv", activityKeys(defaultKeyPrefix, "987654321").ledger)
	for _, g := range []struct {
		a    string
		n, k int
		meta string
	}{
		{"7", 4, 0, "seckill:{a:7:s0/4:3}:meta"},
		{"7", 4, 1, "seckill:{a:7:s1/4:22}:meta"},
		{"7", 4, 2, "seckill:{a:7:s2/4:21}:meta"},
		{"7", 4, 3, "seckill:{a:7:s3/4:2}:meta"},
		{"987654321", 4, 0, "seckill:{a:987654321:s0/4:12}:meta"},
		{"987654321", 4, 1, "seckill:{a:987654321:s1/4:2}:meta"},
		{"987654321", 4, 2, "seckill:{a:987654321:s2/4:3}:meta"},
		{"987654321", 4, 3, "seckill:{a:987654321:s3/4:11}:meta"},
	} {
		assert.Equal(t, g.meta, shardKeys(defaultKeyPrefix, g.a, g.n, g.k).meta)
	}
	for _, g := range []struct {
		user      int64
		of6, of64 int
	}{
		{1, 1, 37}, {2, 4, 10}, {3, 2, 48}, {10, 5, 57}, {999, 0, 8}, {123456789, 2, 32}, {1 << 62, 3, 5},
	} {
		u := strconv.FormatInt(g.user, 10)
		assert.Equal(t, g.of6, shardOf(u, 6), "user %s of 6", u)
		assert.Equal(t, g.of64, shardOf(u, 64), "user %s of 64", u)
	}
	// Not the canonical decimal form: hashed as a string, not as the number.
	for _, u := range []string{"007", "+7", "-0", "7.0", ""} {
		_, ok := decimalID(u)
		assert.False(t, ok, u)
	}
	v, ok := decimalID("-9223372036854775808")
	assert.True(t, ok)
	assert.Equal(t, int64(-1<<63), v)
	_, ok = decimalID("9223372036854775808")
	assert.False(t, ok, "above int64")
}

// TestKeySlot checks the CRC16 slot function against values Redis documents
// (CLUSTER KEYSLOT) and the hash-tag rule.
func TestKeySlot(t *testing.T) {
	t.Parallel()
	assert.EqualValues(t, 0x31C3, crc16([]byte("123456789")), "CRC-16/XMODEM check value")
	assert.Equal(t, 12182, keySlot("foo"))
	assert.Equal(t, 11058, keySlot("somekey"))
	assert.Equal(t, keySlot("user1000"), keySlot("{user1000}.following"))
	assert.Equal(t, keySlot("{}x"), int(crc16([]byte("{}x"))%clusterSlots), "an empty tag hashes the whole key")
	assert.Equal(t, keySlot("{a:1}:meta"), keySlot("a:1"))
}

// TestShardKeys: each shard's keys share one tag; the n tags are distinct
// and their slots fall in the middle half of the k-th n-th of the slot
// space (so n shards land on distinct slots and, on evenly split masters,
// on min(n, masters) masters); the keys of one shard count differ from those
// of another; shardOf spreads users evenly.
func TestShardKeys(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"seckill:", "", "app:v2:"} {
		for _, a := range testActivityIDs {
			for _, n := range []int{2, 3, 6, maxShards} {
				seen := map[string]bool{}
				for k := range n {
					ks := shardKeys(prefix, a, n, k)
					tg := hashTag(ks.meta)
					assert.True(t, strings.HasPrefix(tg, "{a:"+a+":s"+strconv.Itoa(k)+"/"+strconv.Itoa(n)+":"), tg)
					for _, key := range ks.list() {
						assert.Equal(t, tg, hashTag(key), key)
						assert.True(t, strings.HasPrefix(key, prefix+tg+":"), key)
					}
					assert.False(t, seen[tg], "tag %s twice", tg)
					seen[tg] = true
					lo, hi := k*clusterSlots/n, (k+1)*clusterSlots/n
					s := keySlot(ks.meta)
					assert.True(t, s >= lo+(hi-lo)/4 && s < hi-(hi-lo)/4, "activity %s shard %d/%d slot %d", a, k, n, s)
				}
			}
		}
	}
	assert.Len(t, shardKeys("p:", "1", 3, 0).list(), 7)
	assert.NotEqual(t, shardKeys("p:", "1", 3, 0).meta, shardKeys("p:", "1", 6, 0).meta, "layouts of another n never share keys")

	for name, id := range map[string]func(int) string{"numeric": uid[int], "uuid": uuidOf[int]} {
		counts := make([]int, 6)
		for u := 1; u <= 60000; u++ {
			counts[shardOf(id(u), 6)]++
		}
		for k, c := range counts {
			assert.InDelta(t, 10000, c, 500, "%s users: shard %d", name, k)
		}
	}
}

// TestClusterShardSlots asks the real Cluster for the slot of every key of
// every shard (CLUSTER KEYSLOT) and for the master serving it (CLUSTER
// SLOTS): 3 shards on 3 distinct masters, 6 shards two per master.
func TestClusterShardSlots(t *testing.T) {
	t.Parallel()
	c := testenv.RealCluster(t)
	ctx := context.Background()
	ranges, err := c.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	masterOf := func(slot int64) string {
		for _, r := range ranges {
			if slot >= int64(r.Start) && slot <= int64(r.End) {
				return r.Nodes[0].Addr
			}
		}
		t.Fatalf("slot %d not served", slot)
		return ""
	}
	masters := len(ranges)
	require.GreaterOrEqual(t, masters, 3)
	prefix := testenv.Prefix(t)
	for _, a := range testActivityIDs {
		for _, n := range []int{3, 6} {
			per := map[string]int{}
			slots := map[int64]bool{}
			for k := range n {
				ks := shardKeys(prefix, a, n, k)
				var first int64 = -1
				for _, key := range ks.list() {
					s, err := c.ClusterKeySlot(ctx, key).Result()
					require.NoError(t, err)
					assert.EqualValues(t, keySlot(key), s, key)
					if first < 0 {
						first = s
					}
					assert.Equal(t, first, s, "one slot per shard")
				}
				assert.False(t, slots[first], "two shards in slot %d", first)
				slots[first] = true
				per[masterOf(first)]++
			}
			if masters == 3 {
				assert.Len(t, per, 3, "activity %s, %d shards: %v", a, n, per)
				for m, cnt := range per {
					assert.Equal(t, n/3, cnt, "master %s", m)
				}
			}
		}
	}
}
