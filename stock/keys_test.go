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
func TestKeysShareOneTag(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"seckill:", "", "app:v2:"} {
		for _, a := range []int64{1, 42, 1 << 62} {
			k := activityKeys(prefix, a)
			want := "{a:" + strconv.FormatInt(a, 10) + "}"
			for _, key := range k.list() {
				assert.Equal(t, want, hashTag(key), key)
			}
		}
	}
}

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
	for _, a := range []int64{1, 42, 987654321} {
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
	assert.Equal(t, "seckill:stock:released", releaseChannel(DefaultKeyPrefix))
	assert.Equal(t, activityKeys("p:", 7), keys{meta: "p:{a:7}:meta", buyers: "p:{a:7}:buyers", ledger: "p:{a:7}:resv"})
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
		for _, a := range []int64{1, 42, 987654321, 1 << 62} {
			for _, n := range []int{2, 3, 6, MaxShards} {
				seen := map[string]bool{}
				for k := range n {
					ks := shardKeys(prefix, a, n, k)
					tg := hashTag(ks.meta)
					assert.True(t, strings.HasPrefix(tg, "{a:"+strconv.FormatInt(a, 10)+":s"+strconv.Itoa(k)+"/"+strconv.Itoa(n)+":"), tg)
					for _, key := range ks.list() {
						assert.Equal(t, tg, hashTag(key), key)
						assert.True(t, strings.HasPrefix(key, prefix+tg+":"), key)
					}
					assert.False(t, seen[tg], "tag %s twice", tg)
					seen[tg] = true
					lo, hi := k*clusterSlots/n, (k+1)*clusterSlots/n
					s := keySlot(ks.meta)
					assert.True(t, s >= lo+(hi-lo)/4 && s < hi-(hi-lo)/4, "activity %d shard %d/%d slot %d", a, k, n, s)
				}
			}
		}
	}
	assert.Len(t, shardKeys("p:", 1, 3, 0).list(), 5)
	assert.NotEqual(t, shardKeys("p:", 1, 3, 0).meta, shardKeys("p:", 1, 6, 0).meta, "layouts of another n never share keys")

	counts := make([]int, 6)
	for u := int64(1); u <= 60000; u++ {
		counts[shardOf(u, 6)]++
	}
	for k, c := range counts {
		assert.InDelta(t, 10000, c, 500, "shard %d", k)
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
	for _, a := range []int64{1, 42, 987654321} {
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
				assert.Len(t, per, 3, "activity %d, %d shards: %v", a, n, per)
				for m, cnt := range per {
					assert.Equal(t, n/3, cnt, "master %s", m)
				}
			}
		}
	}
}
