package stock

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatusStrings(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "sold out", SoldOut.String())
	assert.Equal(t, "released", Released.String())
	assert.Equal(t, "frozen", Frozen.String())
	assert.Equal(t, "Status(99)", Status(99).String())
	assert.Equal(t, "duplicate", ReleaseDuplicate.String())
	assert.Equal(t, "tombstone", Tombstone.String())
	assert.ErrorIs(t, Result{}.Err(), ErrBadReply)
	for st, want := range map[Status]error{Reserved: nil, SoldOut: ErrSoldOut, LimitReached: ErrLimitReached,
		NotStarted: ErrNotStarted, Ended: ErrEnded, NotLoaded: ErrNotLoaded, Released: ErrReleased, Frozen: ErrFrozen, Paused: ErrPaused} {
		assert.Equal(t, want, Result{Status: st}.Err(), st.String())
	}
}
