package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Source lists the activities a [Preloader] should load: every activity whose
// sale overlaps [from, to], that is Start <= to and (End is zero or End > from).
// It is typically a query on the activity table.
type Source interface {
	Upcoming(ctx context.Context, from, to time.Time) ([]Activity, error)
}

// SourceFunc adapts a function to [Source].
type SourceFunc func(ctx context.Context, from, to time.Time) ([]Activity, error)

// Upcoming calls f.
func (f SourceFunc) Upcoming(ctx context.Context, from, to time.Time) ([]Activity, error) {
	return f(ctx, from, to)
}

// Default preloader settings.
const (
	DefaultLeadTime     = 10 * time.Minute
	DefaultPollInterval = 30 * time.Second
)

// PreloaderOption configures a [Preloader].
type PreloaderOption func(*preloaderOptions)

type preloaderOptions struct {
	lead, poll time.Duration
	clock      Clock
	logger     *slog.Logger
}

// WithLeadTime sets how long before its start an activity is loaded.
// Default 10 minutes ([DefaultLeadTime]).
func WithLeadTime(d time.Duration) PreloaderOption {
	return func(o *preloaderOptions) { o.lead = d }
}

// WithPollInterval sets how often Run asks the Source. Default 30s
// ([DefaultPollInterval]).
func WithPollInterval(d time.Duration) PreloaderOption {
	return func(o *preloaderOptions) { o.poll = d }
}

// WithPreloadClock sets the clock that decides the lead-time window.
// Default: the system clock.
func WithPreloadClock(c Clock) PreloaderOption {
	return func(o *preloaderOptions) { o.clock = c }
}

// WithPreloadLogger sets the logger. Default: the Deductor's logger.
func WithPreloadLogger(l *slog.Logger) PreloaderOption {
	return func(o *preloaderOptions) { o.logger = l }
}

// Preloader warms Redis up before sales start: every poll interval it asks a
// [Source] for the activities starting within the lead time and loads each
// with [Deductor.Load] (set-if-absent, so it never resets a live sale and
// several preloaders may run side by side). It is safe for concurrent use.
type Preloader struct {
	d   *Deductor
	src Source
	o   preloaderOptions
}

// NewPreloader returns a Preloader loading activities from src into d.
func NewPreloader(d *Deductor, src Source, opts ...PreloaderOption) (*Preloader, error) {
	if d == nil || src == nil {
		return nil, errors.New("stock: preloader needs a deductor and a source")
	}
	o := preloaderOptions{lead: DefaultLeadTime, poll: DefaultPollInterval, clock: d.o.clock, logger: d.o.logger}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.lead < 0:
		return nil, fmt.Errorf("stock: lead time %v must be >= 0", o.lead)
	case o.poll <= 0:
		return nil, fmt.Errorf("stock: poll interval %v must be > 0", o.poll)
	case o.clock == nil || o.logger == nil:
		return nil, errors.New("stock: nil clock or logger")
	}
	return &Preloader{d: d, src: src, o: o}, nil
}

// Tick runs one pass: it lists the activities overlapping [now, now+lead]
// and loads each one. It returns how many this pass loaded (those already
// loaded are not counted) and the joined errors of the source and of the
// loads; one bad activity does not stop the others.
func (p *Preloader) Tick(ctx context.Context) (int, error) {
	now := p.o.clock.Now()
	acts, err := p.src.Upcoming(ctx, now, now.Add(p.o.lead))
	if err != nil {
		return 0, fmt.Errorf("stock: preload source: %w", err)
	}
	var errs []error
	n := 0
	for _, a := range acts {
		loaded, err := p.d.Load(ctx, a)
		if err != nil {
			errs = append(errs, fmt.Errorf("stock: preload activity %d: %w", a.ID, err))
			continue
		}
		if loaded {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// Run calls Tick now and then every poll interval until ctx is done, and
// returns nil then. Errors of a pass are logged and the next pass retries.
func (p *Preloader) Run(ctx context.Context) error {
	t := time.NewTicker(p.o.poll)
	defer t.Stop()
	for {
		n, err := p.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			p.o.logger.WarnContext(ctx, "stock: preload pass failed", "loaded", n, "err", err)
		} else if n > 0 {
			p.o.logger.InfoContext(ctx, "stock: preloaded activities", "loaded", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
