package testenv

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// EpochEnv names the environment variable that moves every test clock.
//
//	unset or ""   the default epoch, a fixed instant (DefaultEpoch)
//	past          PastEpoch, decades before today
//	future        40 years after today's date (so past 2038 too)
//	now           the wall clock at the first call, truncated to the second
//	RFC 3339      that instant, e.g. 2044-02-29T23:59:59Z
//
// CI runs the unit tier once more with "past" and once with "future". A test
// whose fake clock meets real time (a real context deadline or timer built
// from fake time, a fake-time TTL on a real Redis, a signature checked against
// the wall clock) passes on one side of today and fails on the other, so one
// of those runs fails on the day the test is written, not on the day its
// fixed date goes by.
const EpochEnv = "SECKILL_TEST_EPOCH"

// The fixed epochs. DefaultEpoch is what a plain `go test` uses: fixed, so
// failures reproduce, and unrelated to today's date. The future epoch is
// relative to the day of the run, so that it stays in the future.
var (
	DefaultEpoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	PastEpoch    = time.Date(2003, 3, 3, 3, 3, 3, 0, time.UTC)
)

// futureYears is how far ahead "future" stands.
const futureYears = 40

var (
	epochOnce sync.Once
	epochAt   time.Time
	epochErr  error
)

// Epoch returns the instant at which test clocks start. Tests never write a
// calendar date of their own: they start from Epoch (plus an offset where a
// time of day matters) so that one switch, EpochEnv, moves all of them.
// A value of EpochEnv that does not parse panics, naming the variable: a
// guard run that silently fell back to the default would prove nothing.
func Epoch() time.Time {
	epochOnce.Do(func() { epochAt, epochErr = parseEpoch(os.Getenv(EpochEnv), time.Now) })
	if epochErr != nil {
		panic(epochErr)
	}
	return epochAt
}

func parseEpoch(v string, now func() time.Time) (time.Time, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "default":
		return DefaultEpoch, nil
	case "past":
		return PastEpoch, nil
	case "future":
		d := now().UTC().AddDate(futureYears, 0, 0)
		return time.Date(d.Year(), d.Month(), d.Day(), 7, 7, 7, 0, time.UTC), nil
	case "now":
		return now().UTC().Truncate(time.Second), nil
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return time.Time{}, fmt.Errorf("testenv: %s=%q: want past, future, now or an RFC 3339 instant: %w", EpochEnv, v, err)
	}
	return t.UTC(), nil
}

// NewEpochClock returns a Clock standing at Epoch()+offset.
func NewEpochClock(offset time.Duration) *Clock { return NewClock(Epoch().Add(offset)) }

// NewRealClock returns a Clock standing at the wall clock's now. Use it, not
// an Epoch clock, whenever the clock meets real time: a real context deadline
// or timer, a TTL on a real Redis server, a token checked by another process.
func NewRealClock() *Clock { return NewClock(time.Now()) }

// EpochDay returns midnight UTC of Epoch's day plus offset, for tests whose
// subject is a time of day or a calendar boundary.
func EpochDay(offset time.Duration) time.Time {
	e := Epoch()
	return time.Date(e.Year(), e.Month(), e.Day(), 0, 0, 0, 0, time.UTC).Add(offset)
}
