package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/fused"
)

// subscriber is the one plain-client method [Deductor.Run] uses, when the
// client given to [New] has it (*redis.Client, *redis.ClusterClient and
// *redis.Ring do), to hear that stock came back. A Scripter without it still
// works: Run then relies on the re-check interval alone.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Deductor reserves and releases activity stock in Redis, one Lua call per
// operation. It is safe for concurrent use by multiple goroutines. It
// borrows the Redis client: it never dials, hooks or closes it.
type Deductor struct {
	rdb     redis.Scripter
	o       options
	channel string

	// flags is a copy-on-write map of in-process sold-out flags, read
	// lock-free on the hot path; writers hold mu.
	flags atomic.Pointer[map[string]*soldFlag]
	// states is a copy-on-write map of what this Deductor knows about each
	// ledger (activity or shard) Redis reported as loaded: its KEYS and the
	// fence (fence.go).
	states atomic.Pointer[map[unit]*actState]
	// layouts is a copy-on-write map of the sharded activities this
	// Deductor knows (shard.go); an activity not in it is un-sharded, or
	// not known to be sharded yet.
	layouts atomic.Pointer[map[string]*layout]
	// groups is what this Deductor knows of each limit group's fence
	// (group_fence.go), by group ID; bounded as states is.
	groups groupStates

	mu      sync.Mutex
	running bool
	closed  bool
	cancel  context.CancelFunc
	marked  map[string]time.Time // flags owned by Run, with the time they were set
	missed  map[unit]int64       // ledgers (epoch) ReleaseReserved reported lost (reserved.go)

	co *coalescer // nil unless WithCoalescing

	vars varTable // the variant lists of activities with variants (variant.go)

	// linesStep, when set (tests only), runs in ReserveLines before each
	// step after the first; true stops the call there, as a crash would.
	linesStep func(step int) bool

	// afterPeek, when set (tests only), runs in a sharded withdrawal between
	// the read of every shard and the first step.
	afterPeek func()
}

// New returns a Deductor using rdb, which may be a *redis.Client (also from
// redis.NewFailoverClient), *redis.ClusterClient (also failover), *redis.Ring
// or any redis.UniversalClient.
func New(rdb redis.Scripter, opts ...DeductorOption) (*Deductor, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.applyDeductor(&o)
		}
	}
	switch {
	case o.clock == nil:
		return nil, fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	case o.logger == nil:
		return nil, fmt.Errorf("%w: nil logger", ErrInvalidConfig)
	case o.recheck <= 0:
		return nil, fmt.Errorf("%w: recheck interval %v must be > 0", ErrInvalidConfig, o.recheck)
	case strings.ContainsAny(o.prefix, "{}"):
		return nil, fmt.Errorf("%w: key prefix %q must not contain '{' or '}' (it would move the Cluster hash tag)", ErrInvalidConfig, o.prefix)
	case o.maxIDBytes <= 0 || o.maxIDBytes > MaxReservationIDLen:
		return nil, fmt.Errorf("%w: max reservation ID bytes %d must be in [1, %d] (MaxReservationIDLen)", ErrInvalidConfig, o.maxIDBytes, MaxReservationIDLen)
	case o.grace < 0:
		return nil, fmt.Errorf("%w: transfer grace %v must be >= 0", ErrInvalidConfig, o.grace)
	}
	d := &Deductor{rdb: rdb, o: o, channel: releaseChannel(o.prefix), marked: map[string]time.Time{}}
	if o.coalesce {
		window, maxBatch, err := validCoalescing(o.coWindow, o.coMax)
		if err != nil {
			return nil, err
		}
		d.co = newCoalescer(d, window, maxBatch)
	}
	return d, nil
}

func (d *Deductor) keys(activity string) keys { return activityKeys(d.o.prefix, activity) }

func (d *Deductor) validate(req Request) error {
	if ValidID(req.Activity) && ValidID(req.User) && req.Qty > 0 && req.Qty <= MaxQuantity && len(req.ReservationID) <= d.o.maxIDBytes && ValidReservationID(req.ReservationID) {
		return nil
	}
	if err := checkActivity(req.Activity); err != nil {
		return err
	}
	if err := checkID(ErrInvalidArgument, "user ID", req.User); err != nil {
		return err
	}
	switch {
	case req.Qty <= 0:
		return fmt.Errorf("%w: qty %d must be > 0", ErrInvalidArgument, req.Qty)
	case req.Qty > MaxQuantity:
		return fmt.Errorf("%w: qty %d exceeds 2^53-1, the largest integer a Lua number holds exactly", ErrInvalidArgument, req.Qty)
	}
	if err := d.validateID(req.ReservationID); err != nil {
		return err
	}
	switch {
	case len(req.ReservationID) > d.o.maxIDBytes:
		return fmt.Errorf("%w: reservation ID longer than %d bytes", ErrInvalidArgument, d.o.maxIDBytes)
	case !ValidReservationID(req.ReservationID):
		return fmt.Errorf("%w: reservation ID %s: only printable ASCII without space is allowed (ValidReservationID)",
			ErrInvalidArgument, strconv.Quote(req.ReservationID))
	}
	return nil
}

// validateID checks the reservation ID of a Release or a lookup: 1 to
// [MaxReservationIDLen] bytes, whatever the bytes and the configured
// maximum, so that every entry a ledger may hold (made under an older rule
// or a longer WithMaxReservationIDBytes) can still be found and given back.
// Reserve applies [ValidReservationID] on top (validate).
func (d *Deductor) validateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty reservation ID", ErrInvalidArgument)
	}
	if len(id) > MaxReservationIDLen {
		return fmt.Errorf("%w: reservation ID of %d bytes, longer than %d", ErrInvalidArgument, len(id), MaxReservationIDLen)
	}
	return nil
}

// Reserve atomically reserves req.Qty units of req.Activity for req.User,
// in one Lua call: activity window on Redis TIME, stock >= qty, the per-user
// limit, the decrement, the buyer's held quantity and a ledger entry keyed by
// req.ReservationID.
//
// A denial is a [Result] with a nil error. The error is non-nil only for bad
// input ([ErrInvalidArgument]), a reservation ID reused for another user or qty
// ([ErrIDConflict]), Redis failures ([ErrUnavailable]) and malformed
// replies ([ErrBadReply]); in those cases nothing was written, except that
// after a timeout the script may have run (retry with the same ReservationID: it
// returns the first outcome and never deducts twice).
//
// Idempotence covers deductions: a reservation ID that reserved answers Reserved
// again with Replayed set (or Released once released). Denials are not
// recorded, so a retry of a denied request is decided afresh.
//
// After this process has seen the activity sold out, Reserve answers SoldOut
// with Result.Local set, without calling Redis, until it learns that stock
// came back (see [Deductor.Run]). A reservation ID that was in the ledger when
// the process learnt it (and so any retry of a request that won before the
// sale sold out) still goes to Redis and gets its reservation back (see
// "Sold-out short-circuit" in the package doc for the cost and the one
// window left).
//
// When the reply shows that Redis lost or rolled back the activity's data
// (see "Redis data loss" in the package doc), Reserve answers [Frozen],
// freezes the activity and reports the loss to [WithOnLoss].
//
// With [WithCoalescing] the request joins a batch of its activity, decided
// in one script call with the same outcome (see "Coalescing" in the package
// doc). If ctx ends before the batch is sent, Reserve returns ctx's error
// (wrapped in ErrUnavailable) and the request is never sent; once sent,
// Reserve waits for its outcome whatever ctx does.
func (d *Deductor) Reserve(ctx context.Context, req Request) (Result, error) {
	if d.o.obs != nil {
		return d.reserveObserved(ctx, req)
	}
	// The body is reserveNow's, repeated here: one call less on the
	// in-process refusal path (about 8 ns of its 20).
	if err := d.validate(req); err != nil {
		if d.o.onReserve != nil {
			d.o.onReserve(ctx, req, Result{}, err)
		}
		return Result{}, err
	}
	if d.refuseLocal(ctx, req.Activity, req.ReservationID) {
		if d.o.onReserve != nil {
			d.o.onReserve(ctx, req, Result{Status: SoldOut, Local: true}, nil)
		}
		return Result{Status: SoldOut, Local: true}, nil
	}
	return d.reserveRemote(ctx, req)
}

// reserveNow is Reserve without the observer (for reserveObserved; keep it
// the same as Reserve's body).
func (d *Deductor) reserveNow(ctx context.Context, req Request) (Result, error) {
	if err := d.validate(req); err != nil {
		if d.o.onReserve != nil {
			d.o.onReserve(ctx, req, Result{}, err)
		}
		return Result{}, err
	}
	if d.refuseLocal(ctx, req.Activity, req.ReservationID) {
		if d.o.onReserve != nil {
			d.o.onReserve(ctx, req, Result{Status: SoldOut, Local: true}, nil)
		}
		return Result{Status: SoldOut, Local: true}, nil
	}
	return d.reserveRemote(ctx, req)
}

// reserveRemote is the part of Reserve that calls Redis (and the fallback);
// kept apart so the in-process refusal above stays small.
func (d *Deductor) reserveRemote(ctx context.Context, req Request) (Result, error) {
	// The releases counted before the request is sent: a release that
	// lands between Redis's SoldOut and the flag must keep the flag unset.
	var clears int64
	if !d.o.noCache {
		clears = d.flagFor(req.Activity).clears.Load()
	}
	res, f, err := d.reserve(ctx, req)
	if err != nil && d.o.fallback != nil && errors.Is(err, ErrUnavailable) {
		fres, ferr := d.o.fallback(ctx, req)
		fres.Fallback = true
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("stock: fallback: %w", ferr))
		} else {
			d.o.logger.WarnContext(ctx, "stock: redis unavailable, reserved through fallback",
				"activity", req.Activity, "request", req.ReservationID, "err", err)
			err = nil
		}
		res = fres
	}
	if err != nil {
		d.o.logger.WarnContext(ctx, "stock: reserve failed", "activity", req.Activity, "request", req.ReservationID, "err", err)
	} else if !res.Fallback && !d.o.noCache && res.Status != Frozen && res.Status != Paused {
		switch {
		case res.Status == SoldOut && res.Remaining <= 0:
			d.markSoldOut(ctx, req.Activity, f, clears)
		case res.Remaining > 0:
			d.clearSoldOut(ctx, req.Activity)
		}
	}
	if d.o.onReserve != nil {
		d.o.onReserve(ctx, req, res, err)
	}
	return res, err
}

// reserve runs reserve.lua on the activity (or on the buyer's shard,
// borrowing when it is short: shard.go) and judges the reply with the
// fence. It returns the reply's fence too, which keys the sold-out cache's
// ledger snapshot. With coalescing on, the request joins a batch of its
// ledger instead (coalesce.go), decided by reserve_many.lua and judged the
// same way.
func (d *Deductor) reserve(ctx context.Context, req Request) (Result, fenceReply, error) {
	l := d.layoutOf(req.Activity)
	for range maxLayoutTries {
		if l == nil {
			u := plain(req.Activity)
			r, err := d.reserveUnit(ctx, u, d.keyList(u), req)
			if err != nil || r.dir == 0 {
				return r.res, r.f, err
			}
			if l, err = d.learn(req.Activity, r.dir); err != nil {
				return Result{}, fenceReply{}, err
			}
			continue
		}
		res, f, next, err := d.reserveSharded(ctx, l, req)
		if err != nil || next == l {
			return res, f, err
		}
		l = next
	}
	return Result{}, fenceReply{}, fmt.Errorf("stock: reserve activity %s: %w: its shard layout changed %d times during the call",
		req.Activity, ErrUnavailable, maxLayoutTries)
}

// unitReply is one ledger's answer to a Reserve.
type unitReply struct {
	res Result
	f   fenceReply
	// dir is the number of shards when the key asked was the directory of
	// a sharded activity (reserve.lua code 9): nothing was decided.
	dir int64
	// goneAt is Redis now when a shard answered "not loaded": its fence is
	// judged, against sn, only once the layout is known not to have changed
	// (shard.go judgeGone).
	goneAt int64
	sn     fenceSnap
}

// reserveUnit decides req on one ledger (k are its KEYS): one reserve.lua
// call, or a place in a batch of that ledger with coalescing on.
func (d *Deductor) reserveUnit(ctx context.Context, u unit, k []string, req Request) (unitReply, error) {
	if parent, ok := parentOf(u.activity); ok {
		return d.reserveVariant(ctx, parent, req)
	}
	if d.co != nil {
		return d.co.reserve(ctx, u, k, req)
	}
	st, sn := d.snapOf(u)
	vals, err := reserveScript.Run(ctx, d.rdb, k, req.ReservationID, req.User, req.Qty).Slice()
	if err != nil {
		return unitReply{}, classify("reserve", err)
	}
	r, v, err := d.judge(req, u, &st, sn, vals)
	d.act(ctx, u, v)
	return r, err
}

// judge turns one decision of reserve.lua (or one element of
// reserve_many.lua's reply) on ledger u into the Reserve outcome, and
// judges its fence against sn, the knowledge of the ledger when the call
// was sent. *st is the ledger's state (nil: not known yet; set when the
// reply shows it loaded). The caller carries out the verdict with act.
func (d *Deductor) judge(req Request, u unit, st **actState, sn fenceSnap, vals []any) (unitReply, verdict, error) {
	n, err := ints("reserve", vals, 11)
	if err != nil {
		return unitReply{}, verdict{}, err
	}
	code := reserveCode(n[0])
	if code == reserveDirectory {
		if u.n > 1 || !isShardCount(n[1]) {
			return unitReply{}, verdict{}, badReply("reserve", "%s of activity %s answered as a directory of %d shards",
				ledgerName(u), req.Activity, n[1])
		}
		return unitReply{dir: n[1]}, verdict{}, nil
	}
	r := unitReply{f: fenceReply{epoch: n[6], seq: n[7], exp: n[8], born: n[9], origin: n[10]}, sn: sn}
	var v verdict
	switch {
	case code == reserveNotLoaded && u.n > 1:
		r.goneAt = max(n[3], 1)
	case code == reserveNotLoaded:
		if *st != nil {
			v = (*st).observeGone(sn, n[3])
		}
	default:
		if *st == nil {
			*st = d.remember(u)
		}
		v = (*st).observe(sn, r.f)
	}

	res := Result{Remaining: n[1], Held: n[2], ReservedAt: fromMilli(n[3]), Replayed: n[4] == replyTrue, Limit: n[5]}
	status, ok := code.status()
	switch {
	case code == reserveOverLimit:
		return unitReply{f: r.f}, v, fmt.Errorf("%w: qty %d exceeds the per-user limit %d of activity %s",
			ErrInvalidArgument, req.Qty, n[5], req.Activity)
	case code == reserveConflict:
		return unitReply{f: r.f}, v, fmt.Errorf("%w: reservation ID %q in activity %s", ErrIDConflict, req.ReservationID, req.Activity)
	case !ok:
		return unitReply{f: r.f}, v, badReply("reserve", "status code %d", code)
	case status == NotLoaded:
		res = Result{Status: NotLoaded}
	default:
		res.Status = status
	}
	if v.frozen {
		// Never Reserved (or any other answer) from data Redis lost.
		res = frozenResult(res)
	}
	r.res = res
	return r, v, nil
}

// ledgerName is "activity" or "shard k of n" for messages.
func ledgerName(u unit) string {
	if u.n <= 1 {
		return "the activity"
	}
	return fmt.Sprintf("shard %d of %d", u.k, u.n)
}

// frozenResult is the answer given instead of res when its reply revealed
// (or followed) a loss of the activity's data.
func frozenResult(res Result) Result {
	return Result{Status: Frozen, Remaining: res.Remaining, Limit: res.Limit}
}

// Release gives back the units held by reservationID in activity, exactly once
// however often it is called and however it races with Reserve of the same
// ID: the first call returns ReleaseDone, later ones ReleaseDuplicate.
//
// Releasing an unknown reservation ID is a harmless no-op reported as
// ReleaseUnknown; it leaves a tombstone in the ledger, so a Reserve with that
// ID arriving late (a retry overtaken by the cancellation) deducts nothing
// and answers [Released]. A successful release publishes the activity ID on
// the release channel so other processes drop their sold-out flag.
//
// Release is what order cancellation and the reconciler call. As a
// compensation it is often called with context.WithoutCancel(ctx); after
// an [ErrUnavailable] error it is safe to call again.
func (d *Deductor) Release(ctx context.Context, activity, reservationID string) (ReleaseResult, error) {
	var start time.Time
	if d.o.obs != nil {
		start = time.Now()
	}
	res, err := d.release(ctx, activity, reservationID)
	if d.o.obs != nil {
		d.observeRelease(ctx, start, activity, res, err)
	}
	if err != nil {
		d.o.logger.WarnContext(ctx, "stock: release failed", "activity", showID(activity), "request", reservationID, "err", err)
	} else if res.Status == ReleaseDone && res.Remaining > 0 {
		d.clearSoldOut(ctx, activity)
	}
	if d.o.onRelease != nil {
		d.o.onRelease(ctx, activity, reservationID, res, err)
	}
	return res, err
}

func (d *Deductor) release(ctx context.Context, activity, reservationID string) (ReleaseResult, error) {
	if err := checkActivity(activity); err != nil {
		return ReleaseResult{}, err
	}
	if err := d.validateID(reservationID); err != nil {
		return ReleaseResult{}, err
	}
	return onLayout(d, activity, func(l *layout) (ReleaseResult, *layout, error) {
		if l != nil {
			return d.releaseSharded(ctx, l, reservationID)
		}
		u := plain(activity)
		r, err := d.releaseUnit(ctx, u, d.keyList(u), reservationID, false)
		if err != nil || r.dir == 0 {
			return r.res, nil, err
		}
		next, err := d.learn(activity, r.dir)
		return ReleaseResult{}, next, err
	})
}

// releaseReply is one ledger's answer to a Release.
type releaseReply struct {
	res ReleaseResult
	// dir is the number of shards when the key asked was the directory of
	// a sharded activity (release.lua code 6): nothing was done.
	dir int64
	// goneAt and sn: as in unitReply.
	goneAt int64
	sn     fenceSnap
	// epoch and born of the ledger's copy (0 when not loaded).
	epoch, born int64
}

// releaseUnit runs release.lua on one ledger (k are its KEYS); in probe mode
// an unknown reservation ID is answered releaseAbsent and no tombstone is
// written.
func (d *Deductor) releaseUnit(ctx context.Context, u unit, k []string, reservationID string, probe bool) (releaseReply, error) {
	st, sn := d.snapOf(u)
	mode := "0"
	if probe {
		mode = "1"
	}
	vals, err := releaseScript.Run(ctx, d.rdb, k, reservationID, d.channel, u.activity, mode).Slice()
	if err != nil {
		return releaseReply{}, classify("release", err)
	}
	if len(vals) != 10 {
		return releaseReply{}, badReply("release", "%d values, want 10", len(vals))
	}
	n, err := ints("release", vals[:3], 3)
	if err != nil {
		return releaseReply{}, err
	}
	u8, ok := vals[3].(string)
	if !ok {
		return releaseReply{}, badReply("release", "user of type %T", vals[3])
	}
	fv, err := ints("release", vals[4:], 6)
	if err != nil {
		return releaseReply{}, err
	}
	res := ReleaseResult{Remaining: n[1], Qty: n[2]}
	if u8 != "" && !ValidID(u8) {
		return releaseReply{}, badReply("release", "user %q", u8)
	}
	res.User = u8
	code := releaseCode(n[0])
	status, ok := code.status(probe)
	switch {
	case ok:
		res.Status = status
	case code == releaseDirectory && u.n == 1 && isShardCount(n[1]):
		return releaseReply{dir: n[1]}, nil
	default:
		return releaseReply{}, badReply("release", "status code %d", n[0])
	}
	// The fence: a release changes no answer, but it may reveal a loss.
	r := releaseReply{res: res, sn: sn, epoch: fv[0], born: fv[3]}
	var v verdict
	switch {
	case res.Status == ReleaseNotLoaded && u.n > 1:
		r.goneAt = max(fv[5], 1)
	case res.Status == ReleaseNotLoaded:
		if st != nil {
			v = st.observeGone(sn, fv[5])
		}
	default:
		if st == nil {
			st = d.remember(u)
		}
		v = st.observe(sn, fenceReply{epoch: fv[0], seq: fv[1], exp: fv[2], born: fv[3], origin: fv[4]})
	}
	d.act(ctx, u, v)
	return r, nil
}

// Load loads a into Redis if it is not loaded yet (set-if-absent): a re-run,
// a second preloader or a restarted process never resets a live sale. It
// reports whether this call loaded it. Use [Deductor.Reset] to overwrite.
//
// Set-if-absent cannot tell "never loaded" from "lost": if Redis lost the
// activity's keys, Load reopens the sale at full stock. Deductors that saw
// the sale before detect that (see "Redis data loss" in the package doc),
// a freshly started one does not; a [Preloader] with [WithRecovery]
// rebuilds from the database instead of loading.
func (d *Deductor) Load(ctx context.Context, a Activity) (loaded bool, err error) {
	if err := variantLoad(a.ID); err != nil {
		return false, err
	}
	return d.load(ctx, a, loadPlain)
}

// Reset deletes the activity's stock, buyers and ledger and loads a afresh.
// It is an admin operation: reservations held at that moment are forgotten
// (their later Release answers ReleaseUnknown), so run it only before a sale
// or after reconciling with the database. The reset copy has a new epoch,
// which Deductors accept as a deliberate replacement.
func (d *Deductor) Reset(ctx context.Context, a Activity) error {
	if err := variantLoad(a.ID); err != nil {
		return err
	}
	_, err := d.load(ctx, a, loadReset)
	if err == nil {
		d.clearSoldOut(ctx, a.ID)
	}
	d.resetVars(ctx, a, err == nil)
	return err
}

// Load modes.
const (
	loadPlain       = iota // set-if-absent
	loadReset              // delete and load
	loadPlaceholder        // set-if-absent, frozen, stock 0
)

func (d *Deductor) load(ctx context.Context, a Activity, mode int) (bool, error) {
	if err := a.validate(); err != nil {
		return false, err
	}
	if len(a.Variants) > 0 {
		return d.loadVariants(ctx, a, mode)
	}
	if a.shards() > 1 {
		return d.loadSharded(ctx, a, mode)
	}
	reset, origin, frozen := "0", originLoad, "0"
	var old *layout
	switch mode {
	case loadReset:
		reset, origin = "1", originReset
		var err error
		if old, err = d.oldLayout(ctx, a.ID, 1); err != nil {
			return false, err
		}
	case loadPlaceholder:
		origin, frozen = originPlaceholder, "1"
	}
	vals, err := loadScript.Run(ctx, d.rdb, d.keys(a.ID).list(), a.Stock, a.limit(), unixMilli(a.Start), unixMilli(a.End),
		a.ttl().Milliseconds(), reset, newEpoch(), origin, frozen, a.noRebuyArg()).Slice()
	if err != nil {
		return false, classify("load", err)
	}
	n, err := ints("load", vals, 2)
	if err != nil {
		return false, err
	}
	switch writeCode(n[0]) {
	case writeDone:
		if old != nil {
			d.dropLayout(ctx, old)
		}
		if _, err := d.learn(a.ID, 1); err != nil {
			return false, err
		}
		d.o.logger.InfoContext(ctx, "stock: activity loaded", "activity", a.ID, "stock", n[1],
			"reset", mode == loadReset, "frozen", mode == loadPlaceholder)
		return true, nil
	case writePresent:
		return false, nil
	case writeExpired:
		return false, fmt.Errorf("%w: activity %s: end + TTL is already past in Redis time", ErrInvalidArgument, a.ID)
	}
	return false, badReply("load", "status code %d", n[0])
}

// oldLayout is the first step of a Reset to n shards: when the activity is
// sharded in Redis with another number of shards, it freezes those shards
// (Deductors that still use them answer Frozen, never reserve there, until
// they learn the new layout) and returns them, to be dropped once the new
// layout is written.
func (d *Deductor) oldLayout(ctx context.Context, activity string, n int) (*layout, error) {
	kind, cur, err := d.readLayout(ctx, activity)
	if err != nil || kind != metaDirectory || cur == int64(n) {
		return nil, err
	}
	old := newLayout(d.o.prefix, activity, int(cur))
	if err := d.freezeLayout(ctx, old, true); err != nil && !errors.Is(err, ErrNotLoaded) {
		return nil, err
	}
	return old, nil
}

// Rebuild rebuilds an activity's Redis state from the truth, in one atomic
// script call, after Redis lost or rolled back its data. a is the activity
// with its total (initial) stock; live are the reservations that still hold
// stock in the caller's database (orders created or paid, not cancelled or
// expired), each with its ID, User, Qty and ReservedAt (zero means
// now); State must be zero or [Held].
//
// It writes the meta hash (stock = a.Stock - the sum of live quantities,
// limit, start, end and expiry as Load writes them, a new epoch, seq 0,
// not frozen), the buyers hash (the sum per user) and one held ledger entry
// per live reservation, after deleting the old buyers and ledger. It
// refuses, writing nothing, unless the activity's meta is absent or frozen
// (the error wraps [ErrLive]), and when the input is bad (the error wraps
// [ErrInvalidArgument]): an invalid activity, an empty, over-long or
// duplicate reservation ID, a user ID that is not [ValidID], a qty <= 0 or
// above [MaxQuantity], a user holding more than the per-user limit, or more
// live units than a.Stock.
//
// The caller must make sure that nothing is in flight for the activity
// while it reads live and calls Rebuild (the activity being frozen stops
// new reservations; releases and order writes already under way must have
// landed), or the rebuilt state misses them. Ten thousand live
// reservations go in one call (about 40,000 arguments).
func (d *Deductor) Rebuild(ctx context.Context, a Activity, live []Reservation) (Stats, error) {
	return d.rebuild(ctx, a, live, "")
}

// rebuild is Rebuild with a precondition on the current meta: "" absent or
// frozen, "0" absent, an epoch: frozen with that epoch (un-sharded only; a
// sharded layout is checked shard by shard: absent or frozen).
func (d *Deductor) rebuild(ctx context.Context, a Activity, live []Reservation, expect string) (Stats, error) {
	if err := a.validate(); err != nil {
		return Stats{}, err
	}
	if len(a.Variants) > 0 {
		return Stats{}, fmt.Errorf("%w: rebuild each variant of activity %s on its own (ID VariantOf(activity, variant))", ErrInvalidArgument, a.ID)
	}
	if err := d.validateLive(a, live); err != nil {
		return Stats{}, err
	}
	var kind metaKind
	var cur int64
	if a.shards() > 1 || expect == "" {
		// The current layout may be another one: every ledger of it must
		// be absent or frozen.
		var err error
		if kind, cur, err = d.checkRebuildable(ctx, a.ID); err != nil {
			return Stats{}, err
		}
	}
	var st Stats
	var err error
	if a.shards() > 1 {
		st, err = d.rebuildSharded(ctx, a, live, kind, cur)
	} else {
		st, err = d.rebuildPlain(ctx, a, live, expect)
		if err == nil && kind == metaDirectory {
			d.dropLayout(ctx, newLayout(d.o.prefix, a.ID, int(cur)))
		}
	}
	if err != nil {
		return Stats{}, err
	}
	d.clearSoldOut(ctx, a.ID)
	d.o.logger.InfoContext(ctx, "stock: activity rebuilt", "activity", a.ID, "remaining", st.Remaining,
		"live", len(live), "shards", a.shards(), "epoch", st.Epoch)
	return st, nil
}

// rebuildPlain runs rebuild.lua on the un-sharded keys.
func (d *Deductor) rebuildPlain(ctx context.Context, a Activity, live []Reservation, expect string) (Stats, error) {
	args := make([]any, 0, 10+4*len(live))
	args = append(args, a.Stock, a.limit(), unixMilli(a.Start), unixMilli(a.End), a.ttl().Milliseconds(),
		newEpoch(), expect, len(live), "0", a.noRebuyArg())
	for _, r := range live {
		args = append(args, r.ID, r.User, r.Qty, unixMilli(r.ReservedAt))
	}
	vals, err := rebuildScript.Run(ctx, d.rdb, d.keys(a.ID).list(), args...).Slice()
	if err != nil {
		return Stats{}, classify("rebuild", err)
	}
	n, err := ints("rebuild", vals, 13)
	if err != nil {
		return Stats{}, err
	}
	if err := rebuildErr(a.ID, rebuildCode(n[0])); err != nil {
		return Stats{}, err
	}
	if _, err := d.learn(a.ID, 1); err != nil {
		return Stats{}, err
	}
	return statsOf(n[1:13]), nil
}

// validateLive checks Rebuild's live reservations against a.
func (d *Deductor) validateLive(a Activity, live []Reservation) error {
	seen := make(map[string]struct{}, len(live))
	per := make(map[string]int64, len(live))
	limit := a.limit()
	var sum int64
	for i, r := range live {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: activity %s: live reservation %d (%q): %s", ErrInvalidArgument, a.ID, i, r.ID,
				fmt.Sprintf(format, args...))
		}
		switch {
		case r.ID == "":
			return bad("empty reservation ID")
		case len(r.ID) > MaxReservationIDLen:
			return bad("reservation ID longer than %d bytes", MaxReservationIDLen)
		case !ValidID(r.User):
			return fmt.Errorf("activity %s: live reservation %d (%q): %w", a.ID, i, r.ID,
				idError(ErrInvalidArgument, "user ID", r.User))
		case r.Qty <= 0 || r.Qty > MaxQuantity:
			return bad("qty %d must be in [1, 2^53-1]", r.Qty)
		case r.State != 0 && r.State != Held:
			return bad("state %v: only held reservations are live", r.State)
		case !r.ReservedAt.IsZero() && r.ReservedAt.UnixMilli() <= 0:
			return bad("reserved at %v: must be after 1970", r.ReservedAt)
		}
		if _, dup := seen[r.ID]; dup {
			return bad("duplicate reservation ID")
		}
		seen[r.ID] = struct{}{}
		if per[r.User] += r.Qty; per[r.User] > limit {
			return bad("user %s would hold %d units, above the per-user limit %d", r.User, per[r.User], limit)
		}
		if sum += r.Qty; sum > a.Stock {
			return bad("live reservations hold more than the stock %d", a.Stock)
		}
	}
	return nil
}

// Remaining returns the activity's live stock, for display. It runs a
// read-only script on the activity's meta hash and writes nothing. It
// returns [ErrNotLoaded] when the activity is not loaded. For a sharded
// activity it is the sum over the shards, including units moving between
// two shards (read at once, not one atomic snapshot).
func (d *Deductor) Remaining(ctx context.Context, activity string) (int64, error) {
	if err := checkActivity(activity); err != nil {
		return 0, err
	}
	return onLayout(d, activity, func(l *layout) (int64, *layout, error) {
		if l != nil {
			return d.remainingSharded(ctx, l)
		}
		vals, err := remainingScript.RunRO(ctx, d.rdb, []string{d.keys(activity).meta}).Slice()
		if err != nil {
			return 0, nil, classify("remaining", err)
		}
		n, err := ints("remaining", vals, 4)
		switch {
		case err != nil:
			return 0, nil, err
		case metaKind(n[0]) == metaDirectory:
			next, err := d.learn(activity, n[1])
			return 0, next, err
		case metaKind(n[0]) != metaLoaded:
			return 0, nil, fmt.Errorf("stock: activity %s: %w", activity, ErrNotLoaded)
		}
		return n[1], nil, nil
	})
}

// Stats returns a read-only snapshot of the activity (Loaded is false when
// it is not loaded). For a sharded activity it holds the sums and one
// snapshot per shard (Stats.Shards), read at once, not atomically.
func (d *Deductor) Stats(ctx context.Context, activity string) (Stats, error) {
	if err := checkActivity(activity); err != nil {
		return Stats{}, err
	}
	var root *[16]int64
	return onLayout(d, activity, func(l *layout) (Stats, *layout, error) {
		if l != nil {
			return d.statsSharded(ctx, l, root)
		}
		n, err := d.statsOf(ctx, d.keys(activity).list())
		switch {
		case err != nil:
			return Stats{}, nil, err
		case metaKind(n[0]) == metaDirectory:
			root = &n
			next, err := d.learn(activity, n[1])
			return Stats{}, next, err
		}
		return statsOf(n[:15]), nil, nil
	})
}

// Bits of the flags value of stats.lua and rebuild.lua.
const (
	flagFrozen  = 1
	flagPaused  = 2
	flagNoRebuy = 4
)

// statsOf maps the reply of stats.lua (12 or 15 values; the tail of
// rebuild.lua's reply: 12).
func statsOf(n []int64) Stats {
	s := Stats{
		Loaded: metaKind(n[0]) == metaLoaded, Remaining: n[1], Total: n[2], Limit: n[3],
		Start: fromMilli(n[4]), End: fromMilli(n[5]), ExpiresAt: fromMilli(n[6]),
		Buyers: n[7], LedgerEntries: n[8], Frozen: n[9]&flagFrozen != 0, Paused: n[9]&flagPaused != 0,
		NoRebuy: n[9]&flagNoRebuy != 0, Epoch: n[10], Seq: n[11],
	}
	if len(n) >= 15 {
		s.TransfersIn, s.TransfersOut, s.PendingTransfers = n[12], n[13], n[14]
	}
	return s
}

// Lookup returns the ledger entry of reservationID in activity, and false when
// there is none. Use it after an uncertain Reserve outcome. For a sharded
// activity every shard is asked (a held or freed entry wins over a
// tombstone, which is written in every shard). While the activity (or a
// shard) is frozen an entry that is not found may have been lost with the
// rest of Redis's state, so absence is not an answer then: Lookup fails
// with [ErrFrozen] until the rebuild (an entry that is found is returned).
func (d *Deductor) Lookup(ctx context.Context, activity, reservationID string) (Reservation, bool, error) {
	if err := checkActivity(activity); err != nil {
		return Reservation{}, false, err
	}
	if err := d.validateID(reservationID); err != nil {
		return Reservation{}, false, err
	}
	type found struct {
		r  Reservation
		ok bool
	}
	f, err := onLayout(d, activity, func(l *layout) (found, *layout, error) {
		if l != nil {
			r, ok, next, err := d.lookupSharded(ctx, l, reservationID)
			return found{r, ok}, next, err
		}
		r, ok, shape, err := d.lookupKeys(ctx, d.keys(activity), reservationID)
		if shape == shapeFrozen {
			return found{}, nil, fmt.Errorf("%w: lookup of %q: its ledger may have lost the entry", ErrFrozen, reservationID)
		}
		if err != nil || shape < minShards {
			return found{r, ok}, nil, err
		}
		next, err := d.learn(activity, int64(shape))
		return found{}, next, err
	})
	return f.r, f.ok, err
}

// LookupCheck is [Deductor.Lookup] as a check a composer runs in one
// script with other blocks' checks (package fused): the same Lua, the same
// answers. Its result is the reservation, or the zero Reservation when the
// ID is not in the ledger; it passes only then (an unknown ID in a loaded
// ledger that is not frozen). Any other answer of lookup.lua (not loaded,
// frozen, sharded) is decoded by running Lookup itself. An activity this
// Deductor knows to be sharded has no such check: the error says so, as do
// invalid arguments.
func (d *Deductor) LookupCheck(activity, reservationID string) (fused.Check[Reservation], error) {
	if err := checkActivity(activity); err != nil {
		return fused.Check[Reservation]{}, err
	}
	if err := d.validateID(reservationID); err != nil {
		return fused.Check[Reservation]{}, err
	}
	if d.layoutOf(activity) != nil {
		return fused.Check[Reservation]{}, fmt.Errorf("stock: activity %s is sharded: its lookup reads several ledgers", activity)
	}
	k := d.keys(activity)
	return fused.Check[Reservation]{Lua: lookupLua, Keys: []string{k.ledger, k.meta}, Args: []any{reservationID}, Pass: "not r",
		Decode: func(ctx context.Context, v any) (Reservation, error) {
			switch x := v.(type) {
			case nil:
				return Reservation{}, nil
			case string:
				return parseRecord(reservationID, x)
			}
			r, ok, err := d.Lookup(ctx, activity, reservationID)
			if !ok {
				r = Reservation{}
			}
			return r, err
		}}, nil
}

// lookupKeys runs lookup.lua on one ledger. shape is lookup.lua's answer
// when the ID is not there: the directory's number of shards,
// shapeNotLoaded, or shapeLoaded (also when the ID is there).
func (d *Deductor) lookupKeys(ctx context.Context, k keys, reservationID string) (Reservation, bool, ledgerShape, error) {
	v, err := lookupScript.RunRO(ctx, d.rdb, []string{k.ledger, k.meta}, reservationID).Result()
	if errors.Is(err, redis.Nil) {
		return Reservation{}, false, shapeLoaded, nil
	}
	if err != nil {
		return Reservation{}, false, 0, classify("lookup", err)
	}
	switch x := v.(type) {
	case string:
		r, err := parseRecord(reservationID, x)
		return r, err == nil, shapeLoaded, err
	case int64:
		if ledgerShape(x) == shapeNotLoaded || ledgerShape(x) == shapeFrozen || isShardCount(x) && k.xout == "" {
			return Reservation{}, false, ledgerShape(x), nil
		}
		return Reservation{}, false, 0, badReply("lookup", "answer %d", x)
	}
	return Reservation{}, false, 0, badReply("lookup", "record of type %T", v)
}

// Reservations returns one page of the activity's ledger (HSCAN semantics:
// start with cursor 0, stop when the returned cursor is 0; an entry may be
// returned more than once, and count is a hint). Entries in every state are
// returned: Held, Freed and Tombstone. The reconciler uses it to compare
// Redis with the database.
//
// For a sharded activity the pages walk the shards one after the other: the
// top 8 bits of the cursor name the shard, the other 56 its HSCAN cursor.
func (d *Deductor) Reservations(ctx context.Context, activity string, cursor uint64, count int64) ([]Reservation, uint64, error) {
	if err := checkActivity(activity); err != nil {
		return nil, 0, err
	}
	if count <= 0 {
		count = 100
	}
	type page struct {
		rs   []Reservation
		next uint64
	}
	p, err := onLayout(d, activity, func(l *layout) (page, *layout, error) {
		if l != nil {
			rs, next, nl, err := d.reservationsSharded(ctx, l, cursor, count)
			return page{rs, next}, nl, err
		}
		rs, next, shape, err := d.scanPage(ctx, d.keys(activity), cursor, count)
		if err != nil || shape < minShards {
			return page{rs, next}, nil, err
		}
		nl, err := d.learn(activity, int64(shape))
		return page{}, nl, err
	})
	return p.rs, p.next, err
}

// scanPage reads one HSCAN page of one ledger. shape is scan.lua's third
// value: the directory's number of shards, shapeNotLoaded or shapeLoaded.
func (d *Deductor) scanPage(ctx context.Context, k keys, cursor uint64, count int64) ([]Reservation, uint64, ledgerShape, error) {
	vals, err := scanScript.RunRO(ctx, d.rdb, []string{k.ledger, k.meta}, strconv.FormatUint(cursor, 10), count).Slice()
	if err != nil {
		return nil, 0, 0, classify("reservations", err)
	}
	if len(vals) != 3 {
		return nil, 0, 0, badReply("reservations", "%d values, want 3", len(vals))
	}
	cs, ok := vals[0].(string)
	if !ok {
		return nil, 0, 0, badReply("reservations", "cursor of type %T", vals[0])
	}
	next, err := strconv.ParseUint(cs, 10, 64)
	if err != nil {
		return nil, 0, 0, badReply("reservations", "cursor %q", cs)
	}
	x, ok := vals[2].(int64)
	shape := ledgerShape(x)
	if !ok || shape >= minShards && (shape > maxShards || k.xout != "") {
		return nil, 0, 0, badReply("reservations", "layout %v", vals[2])
	}
	kv, ok := vals[1].([]any)
	if !ok || len(kv)%2 != 0 {
		return nil, 0, 0, badReply("reservations", "page of type %T", vals[1])
	}
	out := make([]Reservation, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		id, ok1 := kv[i].(string)
		rec, ok2 := kv[i+1].(string)
		if !ok1 || !ok2 {
			return nil, 0, 0, badReply("reservations", "entry of types %T, %T", kv[i], kv[i+1])
		}
		r, err := parseRecord(id, rec)
		if err != nil {
			return nil, 0, 0, err
		}
		out = append(out, r)
	}
	return out, next, shape, nil
}

// parseRecord parses a ledger value "user:qty:state:atMs[:relMs]".
func parseRecord(id, rec string) (Reservation, error) {
	f := strings.Split(rec, ":")
	if len(f) < 4 || len(f) > 5 {
		return Reservation{}, badReply("ledger", "record %q", rec)
	}
	r := Reservation{ID: id}
	var err error
	switch f[2] {
	case "R":
		r.State = Held
	case "X":
		r.State = Freed
	case "T":
		r.State = Tombstone
	default:
		return Reservation{}, badReply("ledger", "record %q", rec)
	}
	if f[0] != "" && !ValidID(f[0]) {
		return Reservation{}, badReply("ledger", "record %q", rec)
	}
	r.User = f[0]
	if r.Qty, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return Reservation{}, badReply("ledger", "record %q", rec)
	}
	at, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return Reservation{}, badReply("ledger", "record %q", rec)
	}
	r.ReservedAt = fromMilli(at)
	if len(f) == 5 {
		rel, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			return Reservation{}, badReply("ledger", "record %q", rec)
		}
		r.ReleasedAt = fromMilli(rel)
	}
	return r, nil
}

// ints checks that vals holds exactly n (<= 16) integers; it returns them
// in a fixed array so the hot path does not allocate.
func ints(op string, vals []any, n int) ([16]int64, error) {
	var out [16]int64
	if len(vals) != n || n > len(out) {
		return out, badReply(op, "%d values, want %d", len(vals), n)
	}
	for i, v := range vals {
		x, ok := v.(int64)
		if !ok {
			return out, badReply(op, "value %d of type %T", i, v)
		}
		out[i] = x
	}
	return out, nil
}
