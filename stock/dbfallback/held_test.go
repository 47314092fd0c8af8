package dbfallback

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/stock"
)

// Held follows the pool's held rows of one buyer through reserve and
// release, and agrees with the rows read with SQL.
func TestHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.open(t, "1", 10, 3)
	held := func() int64 {
		n, err := e.s.Held(bg, "1", "7")
		require.NoError(t, err)
		require.Equal(t, e.rawHeldByUser(t, "1")["7"], n, "Held = the held rows")
		return n
	}
	require.Zero(t, held())
	res, err := e.s.Reserve(bg, req("1", "7", 2, "h1"))
	require.NoError(t, err)
	require.Equal(t, stock.Reserved, res.Status)
	require.EqualValues(t, 2, held())
	_, err = e.s.Release(bg, "1", "h1")
	require.NoError(t, err)
	require.Zero(t, held())
	_, err = e.s.Held(bg, "", "7")
	require.ErrorIs(t, err, stock.ErrInvalidArgument)
	_, err = e.s.Held(bg, "1", "7}")
	require.ErrorIs(t, err, stock.ErrInvalidArgument)
}
