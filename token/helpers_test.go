package token

import (
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

type fakeClock = testenv.Clock

func newFakeClock(t time.Time) *fakeClock { return testenv.NewClock(t) }

var t0 = time.Date(2026, 11, 11, 20, 0, 0, 0, time.UTC)
