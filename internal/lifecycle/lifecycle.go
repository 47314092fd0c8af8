// Package lifecycle holds the two sentinels every seckill package uses for
// the life of a long-running part (a relay, a consumer, a preloader, a
// lease): each package re-exports them (stock.ErrClosed is
// lifecycle.ErrClosed, and so is outbox.ErrClosed), so one errors.Is works
// whichever package answered.
package lifecycle

import "errors"

var (
	// ErrRunning: Run (or Start) was called while the part already runs.
	ErrRunning = errors.New("seckill: already running")
	// ErrClosed: the part was closed; it runs no more and takes no work.
	ErrClosed = errors.New("seckill: closed")
)
