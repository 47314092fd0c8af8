package risk

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Keys touched by one script must share one hash tag (miniredis cannot see
// slots, so this is checked here).
func TestKeysShareHashTag(t *testing.T) {
	t.Parallel()
	tag := func(k string) string {
		i := strings.IndexByte(k, '{')
		j := strings.IndexByte(k[i+1:], '}')
		if i < 0 || j < 0 {
			return ""
		}
		return k[i+1 : i+1+j]
	}
	for _, id := range []string{"42", "a}b", "{x}", "1.2.3.4", "2001:db8::1", ""} {
		for _, kind := range []Kind{KindUser, KindIP, KindDevice} {
			b, n := banKey("p:", kind, id), offenceKey("p:", kind, id)
			assert.NotEqual(t, b, n)
			assert.Equal(t, tag(b), tag(n), "kind %s id %q", kind, id)
			assert.NotEmpty(t, tag(b))
			assert.True(t, strings.HasPrefix(b, "p:risk:"))
		}
	}
	assert.Equal(t, "seckill:risk:{u:7}:beh", behaviourKey("seckill:", "7"))
	assert.Equal(t, "seckill:risk:{d:dev}:owner", deviceKey("seckill:", "dev"))
}
