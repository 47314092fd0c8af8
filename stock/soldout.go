package stock

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The in-process sold-out cache.
//
// When a Reserve answers SoldOut with nothing left, the process reads the
// reservation IDs of the activity's ledger (ids.lua, HSCAN pages of 1,000, on
// the master), then sets a flag for the activity and refuses that activity
// in-process (Result.Local) with one atomic load and one map lookup: no
// Redis call, no allocation. A request whose ID is in that set is not
// refused: it goes to Redis, which answers it from the ledger, so the retry
// of a request that won gets its reservation back. The flag is dropped when
//
//   - this process releases stock of the activity (Release), or a Reserve
//     sees stock again;
//   - while [Deductor.Run] is active: a release message arrives on the pub/sub
//     channel "<prefix>stock:released" (published by release.lua in the same
//     atomic step that gives the stock back), or, once per re-check interval,
//     Redis no longer confirms the flag (the backstop for a message lost
//     during a reconnect): Run reads the activity's Stats and keeps the flag
//     only while nothing is left and the ledger's (epoch, seq) is still the
//     one the ID set below was read at. A sharded activity's flag is not
//     confirmed that way and is dropped once per interval;
//   - without Run: the re-check interval passes, measured on the injected
//     clock on each refusal (one extra clock read per refusal).
//
// Dropping the flag only means the next Reserve asks Redis again; if the
// activity is still sold out the flag is set again. So the cost of the
// backstop is at most one Redis call per activity per interval per process.
//
// The ID set is keyed by the (epoch, seq) of the SoldOut reply that set the
// flag: seq counts every ledger write, so when the flag is set again and
// nothing was written since, the set is reused without a scan. A scan costs
// one round trip per 1,000 ledger entries (the ledger holds about as many
// entries as the activity had stock, plus releases and tombstones) and the
// set about 100 bytes per entry while the activity is sold out; it is paid
// once per sell-out per process, and again after each release that was sold
// again. While the scan runs nothing is refused locally. If it fails, the
// flag is not set and every Reserve keeps asking Redis.
//
// What stays inexact: a reservation made after the scan (possible only
// once stock came back through a release elsewhere) is not in the set, so
// its retry can be refused locally until this process drops the flag, the
// same window in which the flag itself is stale (pub/sub under Run, the
// re-check interval otherwise). Lookup is the authority.

const forever = math.MaxInt64

// idsPage is the COUNT hint of the ledger scan behind the sold-out cache.
const idsPage = 1000

type soldFlag struct {
	// until is 0 when not sold out, forever while Run owns the flag, or the
	// clock's UnixNano deadline of the flag otherwise.
	until atomic.Int64
	// ids are the reservation IDs in the ledger when the flag was set.
	ids atomic.Pointer[idSet]
	// loading is held by the one Reserve that reads the ledger.
	loading atomic.Bool
	// clears counts clearSoldOut calls, so a flag is not set from a scan
	// that a release overtook.
	clears atomic.Int64
}

// idSet is a snapshot of a ledger's reservation IDs, taken after a SoldOut
// reply with this epoch and seq: a set, and the same IDs sorted (for
// SoldOutForPrefix).
type idSet struct {
	epoch, seq int64
	ids        map[string]struct{}
	sorted     []string
}

func newIDSet(epoch, seq int64, ids map[string]struct{}) *idSet {
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	return &idSet{epoch: epoch, seq: seq, ids: ids, sorted: sorted}
}

// hasPrefix reports whether an ID of the set starts with prefix.
func (s *idSet) hasPrefix(prefix string) bool {
	i, _ := slices.BinarySearch(s.sorted, prefix)
	return i < len(s.sorted) && strings.HasPrefix(s.sorted[i], prefix)
}

func (d *Deductor) flag(activity string) *soldFlag {
	m := d.flags.Load()
	if m == nil {
		return nil
	}
	return (*m)[activity]
}

// refuseLocal reports whether the process knows the activity is sold out
// and reservationID was not in its ledger.
func (d *Deductor) refuseLocal(ctx context.Context, activity, reservationID string) bool {
	set := d.soldOutSet(ctx, activity)
	if set == nil {
		return false
	}
	_, known := set.ids[reservationID]
	return !known
}

// soldOutSet returns the ledger's ID set when the process refuses activity
// in-process, nil when it does not (dropping a flag that has expired).
func (d *Deductor) soldOutSet(ctx context.Context, activity string) *idSet {
	f := d.flag(activity)
	if f == nil {
		return nil
	}
	u := f.until.Load()
	switch {
	case u == 0:
		return nil
	case u == forever, d.o.clock.Now().UnixNano() < u:
		return f.ids.Load()
	}
	if f.until.CompareAndSwap(u, 0) && d.o.onSoldOut != nil {
		d.o.onSoldOut(ctx, activity, false)
	}
	return nil
}

// SoldOut reports whether this process currently refuses the activity
// in-process (it has learnt that the activity is sold out and not yet learnt
// that stock came back). For an activity with variants ([Activity.Variants],
// addressed by its plain ID) it is true when this process refuses every
// variant of the list it last learnt (from a Reserve of a variant,
// [Deductor.Variants] or [Deductor.Held]); false while it knows no list. It
// never calls Redis and does not allocate.
func (d *Deductor) SoldOut(activity string) bool {
	if d.soldOut(activity) {
		return true
	}
	acts := d.varsOf(activity).acts
	for _, a := range acts {
		if !d.soldOut(a) {
			return false
		}
	}
	return len(acts) > 0
}

// soldOut reports whether the flag of one ledger is set and not expired.
func (d *Deductor) soldOut(activity string) bool {
	f := d.flag(activity)
	if f == nil {
		return false
	}
	u := f.until.Load()
	return u == forever || (u != 0 && d.o.clock.Now().UnixNano() < u)
}

// flagFor returns the flag of activity, creating it.
func (d *Deductor) flagFor(activity string) *soldFlag {
	if f := d.flag(activity); f != nil {
		return f
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.flag(activity); f != nil {
		return f
	}
	old := d.flags.Load()
	m := make(map[string]*soldFlag, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	f := &soldFlag{}
	m[activity] = f
	d.flags.Store(&m)
	return f
}

// markSoldOut sets the flag after a SoldOut reply with fence r, once the
// ledger's reservation IDs are known. clears is the flag's count of
// releases read before the request was sent: if this process released
// stock of the activity since, the reply is stale and no flag is set. A
// flag already set is left as it is (it expires on its first schedule, and
// the next sell-out takes a new look).
func (d *Deductor) markSoldOut(ctx context.Context, activity string, r fenceReply, clears int64) {
	f := d.flagFor(activity)
	if f.until.Load() != 0 || !f.loading.CompareAndSwap(false, true) {
		return
	}
	defer f.loading.Store(false)
	if f.until.Load() != 0 {
		return
	}
	if f.clears.Load() != clears {
		return // stock came back after Redis answered
	}
	set := f.ids.Load()
	if set == nil || set.epoch != r.epoch || set.seq != r.seq || r.epoch == 0 {
		ids, err := d.ledgerIDs(ctx, activity)
		if err != nil {
			d.o.logger.WarnContext(ctx, "stock: sold out, but the ledger could not be read: not refusing in-process",
				"activity", activity, "err", err)
			return
		}
		set = newIDSet(r.epoch, r.seq, ids)
		f.ids.Store(set)
	}
	now := d.o.clock.Now()
	d.mu.Lock()
	if f.clears.Load() != clears {
		d.mu.Unlock()
		return // stock came back while the ledger was read
	}
	var prev int64
	if d.running {
		prev = f.until.Swap(forever)
		d.marked[activity] = now
	} else {
		prev = f.until.Swap(now.Add(d.o.recheck).UnixNano())
	}
	d.mu.Unlock()
	if prev == 0 {
		d.o.logger.Info("stock: activity sold out, refusing in-process", "activity", activity, "ledger", len(set.ids))
		if d.o.onSoldOut != nil {
			d.o.onSoldOut(ctx, activity, true)
		}
	}
}

// ledgerIDs reads every reservation ID of the activity's ledger (of every
// shard's ledger, for a sharded activity). It runs on the master (EVALSHA,
// not EVALSHA_RO): a replica may not have the reservation whose retry the
// set is there to let through.
func (d *Deductor) ledgerIDs(ctx context.Context, activity string) (map[string]struct{}, error) {
	ledgers := []string{d.keys(activity).ledger}
	if l := d.layoutOf(activity); l != nil {
		ledgers = ledgers[:0]
		for _, k := range l.keys {
			ledgers = append(ledgers, k.ledger)
		}
	}
	ids := map[string]struct{}{}
	for _, ledger := range ledgers {
		if err := d.scanIDs(ctx, ledger, ids); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// scanIDs adds the reservation IDs of one ledger to ids.
func (d *Deductor) scanIDs(ctx context.Context, ledger string, ids map[string]struct{}) error {
	key := []string{ledger}
	cursor := scanEnd
	for {
		vals, err := idsScript.Run(ctx, d.rdb, key, cursor, idsPage).Slice()
		if err != nil {
			return classify("ledger ids", err)
		}
		if len(vals) != 2 {
			return badReply("ledger ids", "%d values, want 2", len(vals))
		}
		next, ok1 := vals[0].(string)
		page, ok2 := vals[1].([]any)
		if !ok1 || !ok2 {
			return badReply("ledger ids", "reply of types %T, %T", vals[0], vals[1])
		}
		for _, v := range page {
			id, ok := v.(string)
			if !ok {
				return badReply("ledger ids", "ID of type %T", v)
			}
			ids[id] = struct{}{}
		}
		if next == scanEnd {
			return nil
		}
		cursor = next
	}
}

func (d *Deductor) clearSoldOut(ctx context.Context, activity string) {
	f := d.flag(activity)
	if f == nil {
		return
	}
	f.clears.Add(1)
	if f.ids.Load() != nil {
		f.ids.Store(nil) // stock came back: the ledger changes, the set goes
	}
	if f.until.Load() == 0 {
		return
	}
	if f.until.Swap(0) != 0 {
		d.o.logger.Info("stock: stock came back, asking redis again", "activity", activity)
		if d.o.onSoldOut != nil {
			d.o.onSoldOut(ctx, activity, false)
		}
	}
}

// Run keeps the in-process sold-out cache fresh until ctx is done or Close is
// called, and then returns nil. It subscribes to the release channel when the
// client has a Subscribe(ctx, channels...) *redis.PubSub method, as
// *redis.Client, *redis.ClusterClient and *redis.Ring do (messages clear the flag at once; go-redis
// resubscribes after a reconnect) and, every re-check interval, re-checks
// the flags older than the interval against Redis (one Stats call each),
// dropping those Redis no longer confirms. Run is optional: without it
// flags expire after the re-check interval, checked on the clock at each
// refusal. Run returns
// [ErrClosed] if the Deductor is closed and [ErrRunning] if Run is already
// active.
func (d *Deductor) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	if d.running {
		d.mu.Unlock()
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	d.running = true
	d.cancel = cancel
	d.mu.Unlock()

	defer func() {
		cancel()
		d.mu.Lock()
		d.running = false
		d.cancel = nil
		// Hand the flags Run owned back to the clock-checked mode.
		deadline := d.o.clock.Now().Add(d.o.recheck).UnixNano()
		for a := range d.marked {
			if f := d.flag(a); f != nil {
				f.until.CompareAndSwap(forever, deadline)
			}
			delete(d.marked, a)
		}
		d.mu.Unlock()
	}()

	var msgs <-chan *redis.Message
	if sub, ok := d.rdb.(subscriber); ok {
		ps := sub.Subscribe(ctx, d.channel)
		defer ps.Close()
		msgs = ps.Channel()
	}
	t := time.NewTicker(d.o.recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			a := m.Payload
			if !ValidID(a) && !validVariant(a) {
				d.o.logger.Warn("stock: bad release message", "bytes", len(a))
				continue
			}
			d.mu.Lock()
			delete(d.marked, a)
			d.mu.Unlock()
			d.clearSoldOut(ctx, a)
		case <-t.C:
			d.expireMarks(ctx)
		}
	}
}

// expireMarks re-checks the flags Run owns that are older than the
// interval. A flag of an un-sharded activity stays while Redis still says
// so: Stats finds it loaded, neither frozen nor paused, nothing left, and
// the (epoch, seq) of the ledger the flag's ID set was read from (no write
// since, so no reservation the set lacks). Any other flag is dropped, and
// the next Reserve asks Redis. Before, every flag was dropped on schedule:
// a caller that checks SoldOut before steps of its own that may refuse (an
// app's rate limits, captcha, access token) then sent buys through those
// steps until one of them reached Reserve and set the flag again.
func (d *Deductor) expireMarks(ctx context.Context) {
	now := d.o.clock.Now()
	var due []string
	d.mu.Lock()
	for a, at := range d.marked {
		if now.Sub(at) >= d.o.recheck {
			due = append(due, a)
		}
	}
	d.mu.Unlock()
	for _, a := range due {
		f := d.flag(a)
		if f == nil {
			continue
		}
		clears := f.clears.Load()
		if d.stillSoldOut(ctx, a, f) {
			d.mu.Lock()
			if _, ok := d.marked[a]; ok && f.clears.Load() == clears {
				d.marked[a] = now // verified: trusted for another interval
				d.mu.Unlock()
				continue
			}
			d.mu.Unlock()
		}
		d.mu.Lock()
		delete(d.marked, a)
		d.mu.Unlock()
		if f.until.CompareAndSwap(forever, 0) && d.o.onSoldOut != nil {
			d.o.onSoldOut(ctx, a, false)
		}
	}
}

// stillSoldOut reports whether Redis confirms the flag f of activity: see
// expireMarks. A sharded activity is never confirmed (its flag's ID set is
// keyed by the borrow's fence, which Stats does not report), nor is one
// whose Stats cannot be read.
func (d *Deductor) stillSoldOut(ctx context.Context, activity string, f *soldFlag) bool {
	set := f.ids.Load()
	if set == nil || set.epoch == 0 || d.layoutOf(activity) != nil {
		return false
	}
	st, err := d.Stats(ctx, activity)
	if err != nil {
		d.o.logger.WarnContext(ctx, "stock: sold-out re-check failed: asking redis again on the next reserve",
			"activity", activity, "err", err)
		return false
	}
	return st.Loaded && st.Shards == nil && !st.Frozen && !st.Paused && st.Remaining <= 0 &&
		st.Epoch == set.epoch && st.Seq == set.seq
}

// Close stops [Deductor.Run] and makes later Run calls fail with ErrClosed.
// Reserve, Release and the other calls keep working. It never closes the
// Redis client.
func (d *Deductor) Close() error {
	d.mu.Lock()
	d.closed = true
	cancel := d.cancel
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}
