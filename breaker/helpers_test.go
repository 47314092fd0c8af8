package breaker_test

import "github.com/seckillkit/seckill/internal/testenv"

type fakeClock = testenv.Clock

// newFakeClock returns a fake clock standing at the test epoch. A breaker
// on it measures time only from the clock's reading at New; the tests build
// no real deadline or timer from it.
func newFakeClock() *fakeClock { return testenv.NewEpochClock(0) }
