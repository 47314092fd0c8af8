package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Source lists the activities a [Preloader] should load: every activity whose
// sale overlaps [from, to], that is Start <= to and (End is zero or End > from).
// It is typically a query on the activity table; a type with such a
// method passes its method value (repo.Upcoming).
type Source func(ctx context.Context, from, to time.Time) ([]Activity, error)

const (
	defaultLeadTime     = 10 * time.Minute
	defaultPollInterval = 30 * time.Second
)

type preloaderOptions struct {
	lead, poll  time.Duration
	clock       Clock
	logger      *slog.Logger
	recovery    func(context.Context, Activity) ([]Reservation, bool, error)
	recoverySet bool
	onRecover   func(ctx context.Context, activity string, rebuilt bool)
}

// WithLeadTime sets how long before its start an activity is loaded.
// Default 10 minutes.
func WithLeadTime(d time.Duration) PreloaderOption {
	return preloaderOption(func(o *preloaderOptions) { o.lead = d })
}

// WithPollInterval sets how often Run asks the Source. Default 30s.
func WithPollInterval(d time.Duration) PreloaderOption {
	return preloaderOption(func(o *preloaderOptions) { o.poll = d })
}

// WithRecovery makes the Preloader rebuild, instead of load, every listed
// activity that is absent from Redis or frozen, from what the caller's
// database holds: r returns the activity's live reservations, one per
// order that still holds stock (created or paid, not cancelled or
// expired), with its reservation ID (its Reserve's Request.ReservationID),
// buyer, quantity and reservation time; ready reports that nothing is in
// flight for the activity in the caller's pipeline: no reservation between
// Redis and the database (a message not yet turned into an order), no
// cancellation or expiry whose Release has not run. An error is reported
// by Tick and retried on the next pass.
//
// When r reports ready, the Preloader calls [Deductor.Rebuild] with the
// live reservations (a never-loaded activity has none, so this is also how
// it is loaded the first time); when r is not ready it keeps the activity
// frozen (buyers get [Frozen]), writing a frozen placeholder (stock 0)
// when the keys are missing so that buyers get Frozen rather than
// [NotLoaded], and asks again on the next pass. A frozen activity is
// rebuilt as soon as r is ready, whoever froze it. Several preloaders may
// run side by side: a rebuild only applies to the state it examined. A
// sharded activity that is incomplete or has a frozen shard is frozen as a
// whole (every shard, so that nothing changes while r reads the truth) and
// rebuilt as a whole. A nil r is an [ErrInvalidConfig] error of
// [NewPreloader]. Default: none; activities are loaded with
// [Deductor.Load], which reopens a sale whose keys Redis lost at full
// stock. An activity with variants is recovered variant by variant: r is
// asked with each variant's Activity (ID [VariantOf](activity, variant),
// its Stock and PerUserLimit) and returns that variant's live
// reservations.
func WithRecovery(r func(ctx context.Context, a Activity) (live []Reservation, ready bool, err error)) PreloaderOption {
	return preloaderOption(func(o *preloaderOptions) { o.recovery, o.recoverySet = r, true })
}

// WithOnRecover sets a hook called after the Preloader rebuilt an activity
// (rebuilt true) or kept it frozen because its [WithRecovery] function was not ready (false).
// It runs on the Tick goroutine with Tick's ctx (Run's under [Preloader.Run]).
// Default: none (both are logged).
func WithOnRecover(f func(ctx context.Context, activity string, rebuilt bool)) PreloaderOption {
	return preloaderOption(func(o *preloaderOptions) { o.onRecover = f })
}

// Preloader warms Redis up before sales start: every poll interval it asks a
// [Source] for the activities starting within the lead time and loads each
// with [Deductor.Load] (set-if-absent, so it never resets a live sale and
// several preloaders may run side by side), or, with [WithRecovery],
// rebuilds each one that is missing or frozen from the caller's database.
// For a sharded activity ([Activity.Shards]) each pass also finishes the
// transfers between its shards older than the grace ([WithTransferGrace]).
// It is safe for concurrent use.
type Preloader struct {
	d   *Deductor
	src Source
	o   preloaderOptions
}

// NewPreloader returns a Preloader loading activities from src into d.
func NewPreloader(d *Deductor, src Source, opts ...PreloaderOption) (*Preloader, error) {
	if d == nil || src == nil {
		return nil, fmt.Errorf("%w: NewPreloader needs a deductor and a source", ErrInvalidConfig)
	}
	o := preloaderOptions{lead: defaultLeadTime, poll: defaultPollInterval, clock: d.o.clock, logger: d.o.logger}
	for _, opt := range opts {
		if opt != nil {
			opt.applyPreloader(&o)
		}
	}
	switch {
	case o.lead < 0:
		return nil, fmt.Errorf("%w: lead time %v must be >= 0", ErrInvalidConfig, o.lead)
	case o.poll <= 0:
		return nil, fmt.Errorf("%w: poll interval %v must be > 0", ErrInvalidConfig, o.poll)
	case o.clock == nil:
		return nil, fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	case o.logger == nil:
		return nil, fmt.Errorf("%w: nil logger", ErrInvalidConfig)
	case o.recoverySet && o.recovery == nil:
		return nil, fmt.Errorf("%w: nil recovery", ErrInvalidConfig)
	}
	return &Preloader{d: d, src: src, o: o}, nil
}

// Tick runs one pass: it lists the activities overlapping [now, now+lead]
// and loads (or, with [WithRecovery], rebuilds) each one, and finishes the
// stale transfers of the sharded ones. It returns how many this pass loaded
// or rebuilt (those already live are not counted) and the joined errors of
// the source, the loads, the recoveries and the transfers; one bad activity
// does not stop the others.
func (p *Preloader) Tick(ctx context.Context) (int, error) {
	now := p.o.clock.Now()
	acts, err := p.src(ctx, now, now.Add(p.o.lead))
	if err != nil {
		return 0, fmt.Errorf("stock: preload source: %w", err)
	}
	var errs []error
	n := 0
	for _, a := range acts {
		var done bool
		if p.o.recovery != nil {
			done, err = p.recover(ctx, a)
		} else {
			done, err = p.d.Load(ctx, a)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stock: preload activity %s: %w", showID(a.ID), err))
			continue
		}
		if done {
			n++
		}
		if a.Shards > 1 {
			if _, err := p.d.settleTransfers(ctx, a.ID, p.d.o.grace); err != nil {
				errs = append(errs, fmt.Errorf("stock: preload activity %s: %w", showID(a.ID), err))
			}
		}
	}
	return n, errors.Join(errs...)
}

// recover rebuilds a missing or frozen activity from the recovery, or keeps
// it frozen until the recovery is ready. It reports whether it rebuilt.
func (p *Preloader) recover(ctx context.Context, a Activity) (bool, error) {
	if err := a.validate(); err != nil {
		return false, err
	}
	if len(a.Variants) > 0 {
		return p.recoverVariants(ctx, a)
	}
	st, err := p.d.Stats(ctx, a.ID)
	if err != nil {
		return false, err
	}
	if st.Loaded && !st.Frozen {
		return false, nil // live
	}
	if a.shards() > 1 || len(st.Shards) > 0 {
		return p.recoverSharded(ctx, a, st)
	}
	// The rebuild applies only to the state examined here: absent, or
	// frozen with this epoch (another preloader may act meanwhile).
	expect := "0"
	if st.Loaded {
		expect = ""
		if st.Epoch != 0 {
			expect = strconv.FormatInt(st.Epoch, 10)
		}
	}
	live, ready, err := p.o.recovery(ctx, a)
	if err != nil {
		return false, fmt.Errorf("recover: %w", err)
	}
	if !ready {
		if !st.Loaded {
			if _, err := p.d.load(ctx, a, loadPlaceholder); err != nil {
				return false, err
			}
		}
		p.o.logger.WarnContext(ctx, "stock: activity missing or frozen in redis; kept frozen until recovery is ready", "activity", a.ID)
		if p.o.onRecover != nil {
			p.o.onRecover(ctx, a.ID, false)
		}
		return false, nil
	}
	rst, err := p.d.rebuild(ctx, a, live, expect)
	if errors.Is(err, ErrLive) {
		p.o.logger.InfoContext(ctx, "stock: activity changed while it was recovered; next pass", "activity", a.ID)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	level, msg := rebuildMessage(st.Loaded, len(live))
	p.o.logger.Log(ctx, level, msg, "activity", a.ID,
		"live", len(live), "remaining", rst.Remaining, "total", rst.Total)
	if p.o.onRecover != nil {
		p.o.onRecover(ctx, a.ID, true)
	}
	return true, nil
}

// recoverVariants is recover for an activity with variants: its vars hash
// is written if absent, then each variant is recovered as an activity of
// its own (the recovery is asked with the variant's Activity, ID
// VariantOf(a.ID, v.ID), and returns that variant's live reservations).
func (p *Preloader) recoverVariants(ctx context.Context, a Activity) (bool, error) {
	if _, err := p.d.writeVars(ctx, a, false); err != nil {
		return false, err
	}
	done := false
	var errs []error
	for _, v := range a.Variants {
		ok, err := p.recover(ctx, a.variantActivity(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("variant %s: %w", v.ID, err))
		}
		done = done || ok
	}
	return done, errors.Join(errs...)
}

// recoverSharded is recover when the activity is, or is to be, sharded:
// every ledger of the current layout and of a's layout is frozen first
// (a shard lost, or a load cut short, leaves the others live and their
// units moving; the truth read next must not change under the rebuild),
// then the activity is rebuilt as a whole, or kept frozen with frozen
// placeholders for the missing ledgers.
func (p *Preloader) recoverSharded(ctx context.Context, a Activity, st Stats) (bool, error) {
	if err := p.freezeAll(ctx, a, st); err != nil {
		return false, err
	}
	live, ready, err := p.o.recovery(ctx, a)
	if err != nil {
		return false, fmt.Errorf("recover: %w", err)
	}
	if !ready {
		if _, err := p.d.load(ctx, a, loadPlaceholder); err != nil {
			return false, err
		}
		p.o.logger.WarnContext(ctx, "stock: activity missing or frozen in redis; kept frozen until recovery is ready",
			"activity", a.ID, "shards", a.shards())
		if p.o.onRecover != nil {
			p.o.onRecover(ctx, a.ID, false)
		}
		return false, nil
	}
	rst, err := p.d.rebuild(ctx, a, live, "")
	if errors.Is(err, ErrLive) {
		p.o.logger.InfoContext(ctx, "stock: activity changed while it was recovered; next pass", "activity", a.ID)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	level, msg := rebuildMessage(st.Loaded || len(st.Shards) > 0, len(live))
	p.o.logger.Log(ctx, level, msg, "activity", a.ID, "shards", a.shards(),
		"live", len(live), "remaining", rst.Remaining, "total", rst.Total)
	if p.o.onRecover != nil {
		p.o.onRecover(ctx, a.ID, true)
	}
	return true, nil
}

// rebuildMessage names what a rebuild did, for the log. An activity that
// was absent from Redis, with no live reservation in the recovery, is a
// first load (Info): every sale starts so. Absent with live reservations,
// Redis lost a running sale; loaded, it was frozen (a loss the fence
// noticed, or a load cut short): both are recoveries (Warn).
func rebuildMessage(wasInRedis bool, live int) (slog.Level, string) {
	switch {
	case wasInRedis:
		return slog.LevelWarn, "stock: frozen activity rebuilt from recovery"
	case live > 0:
		return slog.LevelWarn, "stock: activity missing from redis with live reservations; rebuilt from recovery"
	default:
		return slog.LevelInfo, "stock: activity loaded into redis"
	}
}

// freezeAll freezes every loaded ledger of the activity's current layout
// (st) and of a's layout (a load cut short leaves shards without a
// directory, which nobody else would freeze).
func (p *Preloader) freezeAll(ctx context.Context, a Activity, st Stats) error {
	freeze := func(err error) error {
		if err != nil && !errors.Is(err, ErrNotLoaded) {
			return err
		}
		return nil
	}
	if st.Loaded || len(st.Shards) > 0 {
		if err := freeze(p.d.Freeze(ctx, a.ID)); err != nil {
			return err
		}
	}
	if a.shards() > 1 && (len(st.Shards) != a.shards()) {
		if err := freeze(p.d.freezeLayout(ctx, newLayout(p.d.o.prefix, a.ID, a.shards()), true)); err != nil {
			return err
		}
	}
	return nil
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
			p.o.logger.InfoContext(ctx, "stock: preloaded activities", "loaded", n, "recovery", p.o.recovery != nil)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
