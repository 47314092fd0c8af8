// Package observe is the one observer shape every seckill package reports
// to, for the code that listens: every package's WithObserver takes an
// [Observer] and reports an [Event], so one implementation serves every
// package, [Multi] fans out to several, and an adapter (contrib/prometheus,
// contrib/otel) is written once.
//
// The building blocks do not import this package (they stay independent of
// each other); they take the same types from the library's internal seam,
// of which these are aliases: an observe.Observer is what stock.WithObserver,
// limiter.WithObserver, … take. The contract (stage and outcome names, when
// an observer is called) is documented on [Event].
package observe

import "github.com/seckillkit/seckill/internal/observe"

type (
	// Event is one observed operation, or one gauge reading.
	Event = observe.Event
	// Observer receives events.
	Observer = observe.Observer
	// Func adapts a function to [Observer].
	Func = observe.Func
	// Multi tells every observer of the list about each event.
	Multi = observe.Multi
)

// The two outcomes every stage may report.
const (
	OK    = observe.OK
	Error = observe.Error
)

// ValidStage reports whether s is a valid stage name ("<package>.<op>").
func ValidStage(s string) bool { return observe.ValidStage(s) }

// ValidWord reports whether s is a valid lower-case snake word (an outcome).
func ValidWord(s string) bool { return observe.ValidWord(s) }
