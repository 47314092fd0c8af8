package status

import (
	"regexp"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderid"
)

var (
	_ Client          = (*redis.Client)(nil)
	_ Client          = (*redis.ClusterClient)(nil)
	_ Client          = (*redis.Ring)(nil)
	_ order.IDSource  = (*orderid.Generator)(nil)
	_ order.Scheduler = (*Canceller)(nil)
)

var tagRe = regexp.MustCompile(`\{[^}]*\}`)

// Miniredis cannot check slots: assert every script's keys share one tag.
func TestScriptKeysShareTag(t *testing.T) {
	t.Parallel()
	for _, keys := range [][]string{
		{resultKey("seckill:", "42", "7")},
		{cancelQueueKey("seckill:")},
	} {
		tag := tagRe.FindString(keys[0])
		require.NotEmpty(t, tag, keys[0])
		for _, k := range keys[1:] {
			assert.Equal(t, tag, tagRe.FindString(k), k)
		}
	}
	assert.Equal(t, "seckill:{a:42}:result:7", resultKey("seckill:", "42", "7"))
}
