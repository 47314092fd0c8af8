package waitroom

import "time"

// Clock tells the time. Inject one with [WithClock] to control time in tests.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
