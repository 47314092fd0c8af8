package breaker_test

import (
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

type fakeClock = testenv.Clock

func newFakeClock() *fakeClock {
	return testenv.NewClock(time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC))
}
