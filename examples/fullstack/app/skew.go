package app

import "time"

// skewClock is the process's own clock moved by -clock-skew (tests only:
// the fault battery skews two api processes against each other): the
// signer's clock. The stock's sale window runs on Redis TIME; the token
// pool and every TTL are not moved.
type skewClock time.Duration

// Now is the wall clock plus the skew.
func (c skewClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// now is this process's clock for its own time decisions (checkout's
// sale-window check, Config.Now); see Config.ClockSkew.
func (a *App) now() time.Time { return skewClock(a.cfg.ClockSkew).Now() }
