package stock

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages and outcomes reported to an [observe.Observer]. They are stable (metric
// labels); a rename is a breaking change. Activity is set on every event.
// "ok" and "error" are [observe.OK] and [observe.Error]; the outcome of a
// Status or a ReleaseStatus is its String() in snake case ("sold out" →
// "sold_out").
//
//	stage          outcome             when
//	stock.reserve  reserved, sold_out, limit_reached, not_started, ended,
//	               not_loaded, released, frozen, paused
//	                                   the Result's Status (a local sold-out
//	                                   refusal and a fallback answer too)
//	               error               no outcome: bad input, a reservation ID
//	                                   conflict, Redis failed (Err set)
//	stock.release  released, duplicate, unknown_request, not_loaded,
//	               rebuilt             the ReleaseResult's Status (rebuilt:
//	                                   ReleaseReserved only)
//	               error               (Err set)
//	stock.adjust   ok                  applied now (Value: the units applied,
//	                                   negative for a withdrawal)
//	               replayed            the ID was applied before
//	               insufficient        a withdrawal refused, or applied in
//	                                   part (Value: the units applied)
//	               error               (Err set)
//	stock.pause,   ok                  the flag is set (cleared)
//	stock.resume   not_loaded          the activity (or a shard) is not in
//	                                   Redis (Err set)
//	               error               (Err set)
//
// Each event is reported once per call, on the caller's goroutine, after
// the call. Without [WithObserver] nothing is measured: the hot path pays
// one nil check.
const (
	StageReserve = "stock.reserve"
	StageRelease = "stock.release"
	StageAdjust  = "stock.adjust"
	StagePause   = "stock.pause"
	StageResume  = "stock.resume"
)

// Outcomes other than a Status's or a ReleaseStatus's (see statusOutcomes,
// releaseOutcomes).
const (
	outcomeReplayed     = "replayed"
	outcomeInsufficient = "insufficient"
	outcomeNotLoaded    = "not_loaded"
)

// WithObserver reports every Reserve, Release, Adjust, Pause and Resume to
// o (see the stage table at [StageReserve]). A nil o is ignored. Default:
// none.
func WithObserver(o observe.Observer) DeductorOption {
	return deductorOption(func(opt *options) {
		if o != nil {
			opt.obs = o
		}
	})
}

// reserveObserved is Reserve with the observer.
func (d *Deductor) reserveObserved(ctx context.Context, req Request) (Result, error) {
	start := time.Now()
	res, err := d.reserveNow(ctx, req)
	e := observe.Event{Stage: StageReserve, Activity: req.Activity, Duration: time.Since(start), Outcome: observe.Error, Err: err}
	if err == nil && int(res.Status) < len(statusOutcomes) {
		e.Outcome = statusOutcomes[res.Status]
	}
	d.o.obs.Observe(ctx, e)
	return res, err
}

// releaseOutcomes are the observer outcomes of the release statuses.
var releaseOutcomes = [...]string{observe.Error, "released", "duplicate", "unknown_request", outcomeNotLoaded, "rebuilt"}

// observeRelease reports one Release.
func (d *Deductor) observeRelease(ctx context.Context, start time.Time, activity string, res ReleaseResult, err error) {
	e := observe.Event{Stage: StageRelease, Activity: activity, Duration: time.Since(start), Outcome: observe.Error, Err: err}
	if err == nil && int(res.Status) < len(releaseOutcomes) {
		e.Outcome = releaseOutcomes[res.Status]
	}
	d.o.obs.Observe(ctx, e)
}

// observeFlag runs setFlag and reports it under stage.
func (d *Deductor) observeFlag(ctx context.Context, stage, activity, field string, on bool) error {
	if d.o.obs == nil {
		return d.setFlag(ctx, activity, field, on)
	}
	start := time.Now()
	err := d.setFlag(ctx, activity, field, on)
	e := observe.Event{Stage: stage, Activity: activity, Duration: time.Since(start), Outcome: observe.OK, Err: err}
	switch {
	case errors.Is(err, ErrNotLoaded):
		e.Outcome = outcomeNotLoaded
	case err != nil:
		e.Outcome = observe.Error
	}
	d.o.obs.Observe(ctx, e)
	return err
}

// observeAdjust reports one Adjust.
func (d *Deductor) observeAdjust(ctx context.Context, start time.Time, activity string, a Adjustment, err error) {
	e := observe.Event{Stage: StageAdjust, Activity: activity, Duration: time.Since(start), Value: float64(a.Applied), Err: err}
	switch {
	case errors.Is(err, ErrInsufficient):
		e.Outcome = outcomeInsufficient
	case err != nil:
		e.Outcome = observe.Error
	case a.Replayed:
		e.Outcome = outcomeReplayed
	default:
		e.Outcome = observe.OK
	}
	d.o.obs.Observe(ctx, e)
}
