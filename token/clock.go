package token

import "time"

// Clock tells the time. Inject one with [WithClock] to control time in tests.
type Clock interface{ Now() time.Time }

// ClockFunc adapts a function to [Clock].
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
