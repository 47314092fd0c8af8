package stock

import (
	"context"
	"strconv"
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
