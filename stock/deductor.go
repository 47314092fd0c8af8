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
)

// Subscriber is the one plain-client method [Deductor.Run] uses, when the
// client given to [New] has it (*redis.Client, *redis.ClusterClient and
// *redis.Ring do), to hear that stock came back. A Scripter without it still
// works: Run then relies on the re-check interval alone.
type Subscriber interface {
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
	flags atomic.Pointer[map[int64]*soldFlag]
	// keyCache is a copy-on-write map of KEYS slices of loaded activities.
	keyCache atomic.Pointer[map[int64][]string]

	mu      sync.Mutex
	running bool
	closed  bool
	cancel  context.CancelFunc
	marked  map[int64]time.Time // flags owned by Run, with the time they were set
}

// New returns a Deductor using rdb, which may be a *redis.Client (also from
// redis.NewFailoverClient), *redis.ClusterClient (also failover), *redis.Ring
// or any redis.UniversalClient.
func New(rdb redis.Scripter, opts ...Option) (*Deductor, error) {
	if rdb == nil {
		return nil, errors.New("stock: nil redis client")
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.clock == nil:
		return nil, errors.New("stock: nil clock")
	case o.logger == nil:
		return nil, errors.New("stock: nil logger")
	case o.recheck <= 0:
		return nil, fmt.Errorf("stock: recheck interval %v must be > 0", o.recheck)
	case strings.ContainsAny(o.prefix, "{}"):
		return nil, fmt.Errorf("stock: key prefix %q must not contain '{' or '}' (it would move the Cluster hash tag)", o.prefix)
	case o.maxIDBytes <= 0:
		return nil, fmt.Errorf("stock: max request ID bytes %d must be > 0", o.maxIDBytes)
	}
	d := &Deductor{rdb: rdb, o: o, channel: releaseChannel(o.prefix), marked: map[int64]time.Time{}}
	return d, nil
}

func (d *Deductor) keys(activity int64) keys { return activityKeys(d.o.prefix, activity) }

// maxCachedKeys bounds the key cache; it only holds activities Redis knew.
const maxCachedKeys = 1024

// keyList returns the KEYS of an activity, from the cache when the activity
// was seen loaded before (saves five allocations per Reserve). The returned
// slice is shared and must not be modified.
func (d *Deductor) keyList(activity int64) []string {
	if m := d.keyCache.Load(); m != nil {
		if k, ok := (*m)[activity]; ok {
			return k
		}
	}
	return d.keys(activity).list()
}

// rememberKeys caches the keys of an activity Redis reported as loaded, so
// activity IDs made up by clients cannot grow the cache.
func (d *Deductor) rememberKeys(activity int64) {
	if m := d.keyCache.Load(); m != nil {
		if _, ok := (*m)[activity]; ok {
			return
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.keyCache.Load()
	m := make(map[int64][]string, 8)
	if old != nil && len(*old) < maxCachedKeys {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[activity] = d.keys(activity).list()
	d.keyCache.Store(&m)
}

func (d *Deductor) validate(req Request) error {
	if req.Activity > 0 && req.User > 0 && req.Qty > 0 && req.RequestID != "" && len(req.RequestID) <= d.o.maxIDBytes {
		return nil
	}
	switch {
	case req.Activity <= 0:
		return fmt.Errorf("%w: activity ID %d must be > 0", ErrInvalidRequest, req.Activity)
	case req.User <= 0:
		return fmt.Errorf("%w: user ID %d must be > 0", ErrInvalidRequest, req.User)
	case req.Qty <= 0:
		return fmt.Errorf("%w: qty %d must be > 0", ErrInvalidRequest, req.Qty)
	}
	return d.validateID(req.RequestID)
}

func (d *Deductor) validateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty request ID", ErrInvalidRequest)
	}
	if len(id) > d.o.maxIDBytes {
		return fmt.Errorf("%w: request ID longer than %d bytes", ErrInvalidRequest, d.o.maxIDBytes)
	}
	return nil
}

// Reserve atomically reserves req.Qty units of req.Activity for req.User,
// in one Lua call: activity window on Redis TIME, stock >= qty, the per-user
// limit, the decrement, the buyer's held quantity and a ledger entry keyed by
// req.RequestID.
//
// A denial is a [Result] with a nil error. The error is non-nil only for bad
// input ([ErrInvalidRequest]), a request ID reused for another user or qty
// ([ErrRequestConflict]), Redis failures ([ErrUnavailable]) and malformed
// replies ([ErrBadReply]); in those cases nothing was written, except that
// after a timeout the script may have run (retry with the same RequestID: it
// returns the first outcome and never deducts twice).
//
// Idempotence covers deductions: a request ID that reserved answers Reserved
// again with Replayed set (or Released once released). Denials are not
// recorded, so a retry of a denied request is decided afresh.
//
// After this process has seen the activity sold out, Reserve answers SoldOut
// with Result.Local set, without calling Redis, until it learns that stock
// came back (see [Deductor.Run]). A local refusal skips the ledger, so a
// retry of a request that had in fact reserved can be told SoldOut; use
// [Deductor.Lookup] after an uncertain outcome to know for sure.
func (d *Deductor) Reserve(ctx context.Context, req Request) (Result, error) {
	if err := d.validate(req); err != nil {
		if d.o.onReserve != nil {
			d.o.onReserve(ctx, req, Result{}, err)
		}
		return Result{}, err
	}
	if d.refuseLocal(req.Activity) {
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
	res, err := d.reserve(ctx, req)
	if err != nil && d.o.fallback != nil && errors.Is(err, ErrUnavailable) {
		fres, ferr := d.o.fallback.Reserve(ctx, req)
		fres.Fallback = true
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("stock: fallback: %w", ferr))
		} else {
			d.o.logger.WarnContext(ctx, "stock: redis unavailable, reserved through fallback",
				"activity", req.Activity, "request", req.RequestID, "err", err)
			err = nil
		}
		res = fres
	}
	if err != nil {
		d.o.logger.WarnContext(ctx, "stock: reserve failed", "activity", req.Activity, "request", req.RequestID, "err", err)
	} else if !res.Fallback && !d.o.noCache {
		switch {
		case res.Status == SoldOut && res.Remaining <= 0:
			d.markSoldOut(req.Activity)
		case res.Remaining > 0:
			d.clearSoldOut(req.Activity)
		}
	}
	if d.o.onReserve != nil {
		d.o.onReserve(ctx, req, res, err)
	}
	return res, err
}

func (d *Deductor) reserve(ctx context.Context, req Request) (Result, error) {
	vals, err := reserveScript.Run(ctx, d.rdb, d.keyList(req.Activity), req.RequestID, req.User, req.Qty).Slice()
	if err != nil {
		return Result{}, classify("reserve", err)
	}
	n, err := ints("reserve", vals, 6)
	if err != nil {
		return Result{}, err
	}
	res := Result{Remaining: n[1], Held: n[2], ReservedAt: fromMilli(n[3]), Replayed: n[4] == 1, Limit: n[5]}
	if n[0] != 6 {
		d.rememberKeys(req.Activity)
	}
	switch code := n[0]; code {
	case -1:
		return Result{}, fmt.Errorf("%w: qty %d exceeds the per-user limit %d of activity %d",
			ErrInvalidRequest, req.Qty, n[5], req.Activity)
	case -2:
		return Result{}, fmt.Errorf("%w: request ID %q in activity %d", ErrRequestConflict, req.RequestID, req.Activity)
	case 1, 2, 3, 4, 5, 6, 7:
		res.Status = Status(code)
	default:
		return Result{}, badReply("reserve", "status code %d", code)
	}
	return res, nil
}

// Release gives back the units held by requestID in activity, exactly once
// however often it is called and however it races with Reserve of the same
// ID: the first call returns ReleaseDone, later ones ReleaseDuplicate.
//
// Releasing an unknown request ID is a harmless no-op reported as
// ReleaseUnknown; it leaves a tombstone in the ledger, so a Reserve with that
// ID arriving late (a retry overtaken by the cancellation) deducts nothing
// and answers [Released]. A successful release publishes the activity ID on
// the release channel so other processes drop their sold-out flag.
//
// Release is what order cancellation and the reconciler call. As a
// compensation it is often called with context.WithoutCancel(ctx); after
// an [ErrUnavailable] error it is safe to call again.
func (d *Deductor) Release(ctx context.Context, activity int64, requestID string) (ReleaseResult, error) {
	res, err := d.release(ctx, activity, requestID)
	if err != nil {
		d.o.logger.WarnContext(ctx, "stock: release failed", "activity", activity, "request", requestID, "err", err)
	} else if res.Status == ReleaseDone && res.Remaining > 0 {
		d.clearSoldOut(activity)
	}
	if d.o.onRelease != nil {
		d.o.onRelease(ctx, activity, requestID, res, err)
	}
	return res, err
}

func (d *Deductor) release(ctx context.Context, activity int64, requestID string) (ReleaseResult, error) {
	if activity <= 0 {
		return ReleaseResult{}, fmt.Errorf("%w: activity ID %d must be > 0", ErrInvalidRequest, activity)
	}
	if err := d.validateID(requestID); err != nil {
		return ReleaseResult{}, err
	}
	k := d.keys(activity)
	vals, err := releaseScript.Run(ctx, d.rdb, k.list(), requestID, d.channel, activity).Slice()
	if err != nil {
		return ReleaseResult{}, classify("release", err)
	}
	if len(vals) != 4 {
		return ReleaseResult{}, badReply("release", "%d values, want 4", len(vals))
	}
	n, err := ints("release", vals[:3], 3)
	if err != nil {
		return ReleaseResult{}, err
	}
	u, ok := vals[3].(string)
	if !ok {
		return ReleaseResult{}, badReply("release", "user of type %T", vals[3])
	}
	res := ReleaseResult{Remaining: n[1], Qty: n[2]}
	if u != "" {
		if res.User, err = strconv.ParseInt(u, 10, 64); err != nil {
			return ReleaseResult{}, badReply("release", "user %q", u)
		}
	}
	switch n[0] {
	case 1, 2, 3, 4:
		res.Status = ReleaseStatus(n[0])
	default:
		return ReleaseResult{}, badReply("release", "status code %d", n[0])
	}
	return res, nil
}

// Load loads a into Redis if it is not loaded yet (set-if-absent): a re-run,
// a second preloader or a restarted process never resets a live sale. It
// reports whether this call loaded it. Use [Deductor.Reset] to overwrite.
func (d *Deductor) Load(ctx context.Context, a Activity) (loaded bool, err error) {
	return d.load(ctx, a, false)
}

// Reset deletes the activity's stock, buyers and ledger and loads a afresh.
// It is an admin operation: reservations held at that moment are forgotten
// (their later Release answers ReleaseUnknown), so run it only before a sale
// or after reconciling with the database.
func (d *Deductor) Reset(ctx context.Context, a Activity) error {
	_, err := d.load(ctx, a, true)
	if err == nil {
		d.clearSoldOut(a.ID)
	}
	return err
}

func (d *Deductor) load(ctx context.Context, a Activity, force bool) (bool, error) {
	if err := a.validate(); err != nil {
		return false, err
	}
	forceArg := "0"
	if force {
		forceArg = "1"
	}
	k := d.keys(a.ID)
	vals, err := loadScript.Run(ctx, d.rdb, k.list(), a.Stock, a.limit(), unixMilli(a.Start), unixMilli(a.End),
		a.ttl().Milliseconds(), forceArg).Slice()
	if err != nil {
		return false, classify("load", err)
	}
	n, err := ints("load", vals, 2)
	if err != nil {
		return false, err
	}
	switch n[0] {
	case 1:
		d.o.logger.InfoContext(ctx, "stock: activity loaded", "activity", a.ID, "stock", a.Stock, "reset", force)
		return true, nil
	case 0:
		return false, nil
	case -1:
		return false, fmt.Errorf("%w: activity %d: end + TTL is already past in Redis time", ErrInvalidActivity, a.ID)
	}
	return false, badReply("load", "status code %d", n[0])
}

// Remaining returns the activity's live stock, for display. It runs a
// read-only script on the activity's meta hash and writes nothing. It
// returns [ErrNotLoaded] when the activity is not loaded.
func (d *Deductor) Remaining(ctx context.Context, activity int64) (int64, error) {
	if activity <= 0 {
		return 0, fmt.Errorf("%w: activity ID %d must be > 0", ErrInvalidRequest, activity)
	}
	k := d.keys(activity)
	vals, err := remainingScript.RunRO(ctx, d.rdb, []string{k.meta}).Slice()
	if err != nil {
		return 0, classify("remaining", err)
	}
	n, err := ints("remaining", vals, 2)
	if err != nil {
		return 0, err
	}
	if n[0] != 1 {
		return 0, fmt.Errorf("stock: activity %d: %w", activity, ErrNotLoaded)
	}
	return n[1], nil
}

// Stats returns a read-only snapshot of the activity (Loaded is false when
// it is not loaded).
func (d *Deductor) Stats(ctx context.Context, activity int64) (Stats, error) {
	if activity <= 0 {
		return Stats{}, fmt.Errorf("%w: activity ID %d must be > 0", ErrInvalidRequest, activity)
	}
	vals, err := statsScript.RunRO(ctx, d.rdb, d.keys(activity).list()).Slice()
	if err != nil {
		return Stats{}, classify("stats", err)
	}
	n, err := ints("stats", vals, 9)
	if err != nil {
		return Stats{}, err
	}
	return Stats{
		Loaded: n[0] == 1, Remaining: n[1], Total: n[2], Limit: n[3],
		Start: fromMilli(n[4]), End: fromMilli(n[5]), ExpiresAt: fromMilli(n[6]),
		Buyers: n[7], LedgerEntries: n[8],
	}, nil
}

// Lookup returns the ledger entry of requestID in activity, and false when
// there is none. Use it after an uncertain Reserve outcome.
func (d *Deductor) Lookup(ctx context.Context, activity int64, requestID string) (Reservation, bool, error) {
	if activity <= 0 {
		return Reservation{}, false, fmt.Errorf("%w: activity ID %d must be > 0", ErrInvalidRequest, activity)
	}
	if err := d.validateID(requestID); err != nil {
		return Reservation{}, false, err
	}
	v, err := lookupScript.RunRO(ctx, d.rdb, []string{d.keys(activity).ledger}, requestID).Result()
	if errors.Is(err, redis.Nil) {
		return Reservation{}, false, nil
	}
	if err != nil {
		return Reservation{}, false, classify("lookup", err)
	}
	rec, ok := v.(string)
	if !ok {
		return Reservation{}, false, badReply("lookup", "record of type %T", v)
	}
	r, err := parseRecord(requestID, rec)
	return r, err == nil, err
}

// Reservations returns one page of the activity's ledger (HSCAN semantics:
// start with cursor 0, stop when the returned cursor is 0; an entry may be
// returned more than once, and count is a hint). Entries in every state are
// returned: Held, Freed and Tombstone. The reconciler uses it to compare
// Redis with the database.
func (d *Deductor) Reservations(ctx context.Context, activity int64, cursor uint64, count int64) ([]Reservation, uint64, error) {
	if activity <= 0 {
		return nil, 0, fmt.Errorf("%w: activity ID %d must be > 0", ErrInvalidRequest, activity)
	}
	if count <= 0 {
		count = 100
	}
	vals, err := scanScript.RunRO(ctx, d.rdb, []string{d.keys(activity).ledger}, strconv.FormatUint(cursor, 10), count).Slice()
	if err != nil {
		return nil, 0, classify("reservations", err)
	}
	if len(vals) != 2 {
		return nil, 0, badReply("reservations", "%d values, want 2", len(vals))
	}
	cs, ok := vals[0].(string)
	if !ok {
		return nil, 0, badReply("reservations", "cursor of type %T", vals[0])
	}
	next, err := strconv.ParseUint(cs, 10, 64)
	if err != nil {
		return nil, 0, badReply("reservations", "cursor %q", cs)
	}
	kv, ok := vals[1].([]any)
	if !ok || len(kv)%2 != 0 {
		return nil, 0, badReply("reservations", "page of type %T", vals[1])
	}
	out := make([]Reservation, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		id, ok1 := kv[i].(string)
		rec, ok2 := kv[i+1].(string)
		if !ok1 || !ok2 {
			return nil, 0, badReply("reservations", "entry of types %T, %T", kv[i], kv[i+1])
		}
		r, err := parseRecord(id, rec)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, next, nil
}

// parseRecord parses a ledger value "user:qty:state:atMs[:relMs]".
func parseRecord(id, rec string) (Reservation, error) {
	f := strings.Split(rec, ":")
	if len(f) < 4 || len(f) > 5 {
		return Reservation{}, badReply("ledger", "record %q", rec)
	}
	r := Reservation{RequestID: id}
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
	if f[0] != "" {
		if r.User, err = strconv.ParseInt(f[0], 10, 64); err != nil {
			return Reservation{}, badReply("ledger", "record %q", rec)
		}
	}
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

// ints checks that vals holds exactly n (<= 9) integers; it returns them in
// a fixed array so the hot path does not allocate.
func ints(op string, vals []any, n int) ([9]int64, error) {
	var out [9]int64
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
