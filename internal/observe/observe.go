// Package observe defines the one observer shape every seckill package
// reports to: every package's WithObserver takes an [Observer] and reports
// an [Event], so one implementation serves every package, [Multi] fans out
// to several, and an adapter (contrib/prometheus, contrib/otel) is written
// once.
//
// Contract for packages that report:
//   - Stage is "<package>.<operation>" in lower case ("stock.reserve",
//     "limiter.allow"); Outcome is a lower-case snake word ("ok",
//     "sold_out", "error"). Both are stable: they are metric labels, and a
//     rename is a breaking change listed in the CHANGELOG.
//   - The observer is called synchronously, after the operation, on the
//     caller's goroutine and with the caller's context (so a tracing adapter
//     can parent a span to it). It must be fast and must not block; a nil
//     Observer option is ignored.
//   - A gauge report (Gauge true) carries a level in Value (a lag, an age in
//     seconds, a count, a breaker state) and no Duration.
package observe

import (
	"context"
	"strings"
	"time"
)

// Event is one observed operation, or one gauge reading.
type Event struct {
	// Stage is "<package>.<operation>", stable.
	Stage string
	// Outcome is the result class, a stable lower-case snake word.
	Outcome string
	// Activity is the activity (sale) ID the operation concerned, "" when
	// none.
	Activity string
	// Name tells instances of one stage apart when a service runs several
	// (a breaker's or a limiter's name), "" otherwise.
	Name string
	// Duration is how long the operation took (0 for a gauge reading).
	Duration time.Duration
	// Gauge is true when the event is a level reading in Value rather than
	// an operation to be counted.
	Gauge bool
	// Value is the level of a gauge reading (or a count that belongs to the
	// operation, such as the rows of a batch); 0 otherwise.
	Value float64
	// Err is the error behind an "error" outcome, nil otherwise. Adapters
	// must not use its text as a label.
	Err error
}

// Observer receives events. Implementations must be safe for concurrent
// use, fast and non-blocking.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// Func adapts a function to [Observer].
type Func func(ctx context.Context, e Event)

// Observe calls f.
func (f Func) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Multi fans an event out to several observers, in order; nil entries are
// skipped.
type Multi []Observer

// Observe calls every non-nil observer in m.
func (m Multi) Observe(ctx context.Context, e Event) {
	for _, o := range m {
		if o != nil {
			o.Observe(ctx, e)
		}
	}
}

// Standard outcomes shared by every package (packages add their own, such
// as "sold_out" or "limited").
const (
	OK    = "ok"
	Error = "error"
)

// ValidStage reports whether s is a well-formed stage name: lower-case
// words of [a-z0-9_], each starting with a letter, joined by single dots,
// at least two of them, at most 100 bytes in all ("stock.reserve"). Every
// such name is a valid metric name once its dots become underscores.
func ValidStage(s string) bool {
	if len(s) > 100 {
		return false
	}
	words := 0
	for w := range strings.SplitSeq(s, ".") {
		if !ValidWord(w) {
			return false
		}
		words++
	}
	return words >= 2
}

// ValidWord reports whether s is a lower-case snake word, as outcomes are:
// [a-z][a-z0-9_]*, at most 64 bytes.
func ValidWord(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
