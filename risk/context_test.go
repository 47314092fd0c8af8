package risk

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUserContext(t *testing.T) {
	t.Parallel()
	_, ok := UserFrom(context.Background())
	assert.False(t, ok)
	_, ok = UserFrom(WithUser(context.Background(), ""))
	assert.False(t, ok)
	u, ok := UserFrom(WithUser(context.Background(), "7"))
	assert.True(t, ok)
	assert.Equal(t, "7", u)
	_, ok = DecisionFrom(context.Background())
	assert.False(t, ok)
	d, ok := DecisionFrom(withDecision(context.Background(), Decision{Action: Challenge}))
	assert.True(t, ok)
	assert.Equal(t, Challenge, d.Action)
}
