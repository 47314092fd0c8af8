package stock

import (
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
)

func TestActivityDefaults(t *testing.T) {
	t.Parallel()
	a := Activity{ID: "1"}
	assert.NoError(t, a.validate())
	assert.EqualValues(t, 1, a.limit(), "per-user limit defaults to 1")
	assert.Equal(t, defaultTTL, a.ttl())
	a = Activity{ID: "1", PerUserLimit: 4, TTL: time.Minute}
	assert.EqualValues(t, 4, a.limit())
	assert.Equal(t, time.Minute, a.ttl())
	assert.Zero(t, unixMilli(time.Time{}))
	assert.True(t, fromMilli(0).IsZero())
	now := testenv.Epoch().Add(123 * time.Millisecond)
	assert.True(t, now.Equal(fromMilli(unixMilli(now))))
	// Only a start, or only an end, is valid.
	assert.NoError(t, Activity{ID: "1", Start: now}.validate())
	assert.NoError(t, Activity{ID: "1", End: now}.validate())
	assert.ErrorIs(t, Activity{ID: "1", Start: time.Unix(-5, 0)}.validate(), ErrInvalidArgument)
}
