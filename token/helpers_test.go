package token

import (
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

type fakeClock = testenv.Clock

func newFakeClock(t time.Time) *fakeClock { return testenv.NewClock(t) }

// t0 is where the fake clocks of this package's tests start: the test epoch
// (SECKILL_TEST_EPOCH moves it), never a date of our own. A clock started at
// t0 must only meet other fake time: the pool's injected "now" (its
// deadlines are sorted-set scores compared with that "now", never Redis TTLs
// or Redis TIME), miniredis with SetTime / FastForward, or a Signer without
// a real Redis behind it. Tests that put a TTL on a real server start their
// clock at the wall clock's now instead (testenv.NewRealClock). Truncated to
// the second, as signed URLs carry whole seconds.
var t0 = testenv.Epoch().Truncate(time.Second)

// clockFunc adapts a function to Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// defaultMaxNodeSkew is the documented default of WithMaxNodeSkew.
const defaultMaxNodeSkew = 30 * time.Second
