package dbfallback

import (
	"context"
	"strings"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages and outcomes reported to an [observe.Observer] ([WithObserver]).
// They are stable (metric labels); a rename is a breaking change. Activity
// is set on every event.
//
//	stage               outcome             when
//	dbfallback.reserve  reserved, sold_out, limit_reached, not_started,
//	                    ended, not_loaded, released
//	                                        the Result's Status (its
//	                                        String() in snake case)
//	                    error               bad input, a reservation ID
//	                                        conflict, the database failed
//	                                        (Err set)
//	dbfallback.release  released, duplicate, unknown_request, not_loaded
//	                                        the ReleaseResult's Status
//	                    error               (Err set)
//	dbfallback.open     ok                  the pool exists with these terms
//	                    error               (Err set)
//	dbfallback.drain    ok                  Value: the units taken out
//	                    error               (Err set)
//
// "ok" and "error" are [observe.OK] and [observe.Error]. Each event is
// reported once per call, on the caller's goroutine, after the call.
// Without WithObserver nothing is measured.
const (
	StageReserve = "dbfallback.reserve"
	StageRelease = "dbfallback.release"
	StageOpen    = "dbfallback.open"
	StageDrain   = "dbfallback.drain"
)

// observed reports one call of stage, when an observer is set: outcome
// (observe.Error when err is set) and value.
func (s *Store) observed(ctx context.Context, stage, activity string, start time.Time, outcome string, value float64, err error) {
	if s.obs == nil {
		return
	}
	e := observe.Event{Stage: stage, Activity: activity, Duration: time.Since(start), Outcome: outcome, Value: value, Err: err}
	if err != nil {
		e.Outcome = observe.Error
	}
	s.obs.Observe(ctx, e)
}

// snake turns a status name ("sold out") into its outcome ("sold_out").
func snake(name string) string { return strings.ReplaceAll(name, " ", "_") }
