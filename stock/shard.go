package stock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Sharding (Activity.Shards).
//
// A sharded activity is n sub-ledgers ("shards"), each with the keys of an
// un-sharded activity (meta, buyers, ledger) plus two transfer hashes, under
// its own hash tag {a:<id>:s<k>/<n>:<salt>} (keys.go), so each lives in its
// own Cluster slot; and a directory, the hash <prefix>{a:<id>}:meta holding
// shards = n (and the activity's total, limit, window, expiry and a layout
// epoch) but no stock field. The scripts that an un-sharded activity runs
// on that key recognise the directory and answer with the number of shards
// (reserve.lua code 9, release.lua 6, …): a Deductor that did not know the
// layout learns it from its first call, keeps it, and sends the call again
// to the shard. A Deductor that knew a layout which has since changed
// (Reset or Rebuild with another number of shards) learns it when a shard
// it asks answers "not loaded": it reads the directory again (layout.lua)
// before judging that answer with the fence.
//
// A buyer's shard is shardOf(user, n): every request of a buyer goes to one
// slot, which decides the per-user limit. Reserve, Held and the coalescing
// batches go to that shard only. Release, Lookup, Remaining, Stats, Freeze
// and Rebuild ask every shard (at once, one goroutine per shard); the
// reservation ID does not name its shard, so Release finds the entry by asking
// every shard in probe mode (no tombstone) and, when no shard has it, asks
// every shard again in tombstone mode.
//
// When the buyer's shard is short, the Reserve borrows (transfer.go) and
// tries again.

// unit names one ledger: an un-sharded activity (n 1, k 0) or shard k of an
// activity split into n.
type unit struct {
	activity string
	n, k     int
}

func plain(activity string) unit { return unit{activity: activity, n: 1} }

// layout is what a Deductor knows of a sharded activity: the number of
// shards, their keys and a borrowing gate per shard. Immutable but for the
// gates.
type layout struct {
	activity string
	n        int
	keys     []keys
	lists    [][]string
	gates    []gate
}

func newLayout(prefix, activity string, n int) *layout {
	l := &layout{activity: activity, n: n, keys: make([]keys, n), lists: make([][]string, n), gates: make([]gate, n)}
	for k := range n {
		l.keys[k] = shardKeys(prefix, activity, n, k)
		l.lists[k] = l.keys[k].list()
	}
	return l
}

func (l *layout) unit(k int) unit { return unit{activity: l.activity, n: l.n, k: k} }

// shardOf returns the shard of a buyer: the splitmix64 finalizer of the user
// ID, modulo n. A user ID in canonical decimal form is taken as the int64 it
// spells (so a buyer keeps the shard it had when user IDs were int64), any
// other ID as its FNV-1a hash. Stable across processes and releases
// (changing it would move buyers between shards of a live sale).
func shardOf(user string, n int) int {
	var x uint64
	if v, ok := decimalID(user); ok {
		x = uint64(v)
	} else {
		x = 14695981039346656037
		for i := 0; i < len(user); i++ {
			x ^= uint64(user[i])
			x *= 1099511628211
		}
	}
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(n))
}

// maxLayouts bounds the layouts a Deductor keeps; when full it starts afresh
// (a forgotten layout is learnt again from the directory).
const maxLayouts = 1024

// maxLayoutTries bounds how often one call follows a layout change.
const maxLayoutTries = 3

// layoutOf returns the known layout of a sharded activity, or nil (not
// sharded, or not known to be).
func (d *Deductor) layoutOf(activity string) *layout {
	if m := d.layouts.Load(); m != nil {
		return (*m)[activity]
	}
	return nil
}

// learn records that activity has n shards (n <= 1: not sharded) and returns
// its layout (nil when not sharded). The same n returns the known layout.
func (d *Deductor) learn(activity string, n int64) (*layout, error) {
	if n < 0 || n > maxShards {
		return nil, badReply("layout", "activity %s has %d shards", activity, n)
	}
	cur := d.layoutOf(activity)
	switch {
	case n <= 1 && cur == nil:
		return nil, nil
	case cur != nil && int64(cur.n) == n:
		return cur, nil
	}
	var l *layout
	if n > 1 {
		l = newLayout(d.o.prefix, activity, int(n))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.layouts.Load()
	if old != nil {
		if c := (*old)[activity]; c != nil && int64(c.n) == n {
			return c, nil
		}
	}
	m := make(map[string]*layout, 8)
	if old != nil && len(*old) < maxLayouts {
		for k, v := range *old {
			m[k] = v
		}
	}
	if l == nil {
		delete(m, activity)
	} else {
		m[activity] = l
	}
	d.layouts.Store(&m)
	return l, nil
}

// readLayout reads the activity's layout from its directory key (on the
// master): the kind (metaLoaded: un-sharded) and the number of shards.
func (d *Deductor) readLayout(ctx context.Context, activity string) (kind metaKind, n int64, err error) {
	vals, err := layoutScript.Run(ctx, d.rdb, []string{d.keys(activity).meta}).Slice()
	if err != nil {
		return 0, 0, classify("layout", err)
	}
	v, err := ints("layout", vals, 2)
	if err != nil {
		return 0, 0, err
	}
	kind = metaKind(v[0])
	if kind < metaAbsent || kind > metaDirectory || kind == metaDirectory && !isShardCount(v[1]) {
		return 0, 0, badReply("layout", "kind %d, %d shards", v[0], v[1])
	}
	return kind, v[1], nil
}

// refreshLayout reads the layout again and records it; nil when the
// activity is not sharded (or absent).
func (d *Deductor) refreshLayout(ctx context.Context, activity string) (*layout, error) {
	kind, n, err := d.readLayout(ctx, activity)
	if err != nil {
		return d.layoutOf(activity), err
	}
	if kind != metaDirectory {
		n = 1
	}
	return d.learn(activity, n)
}

// onLayout runs op with the activity's known layout (nil: not sharded), and
// again with another layout when op returns one (it learnt that the layout
// changed).
func onLayout[T any](d *Deductor, activity string, op func(l *layout) (T, *layout, error)) (T, error) {
	l := d.layoutOf(activity)
	for range maxLayoutTries {
		v, next, err := op(l)
		if err != nil || next == l {
			return v, err
		}
		l = next
	}
	var zero T
	return zero, fmt.Errorf("stock: activity %s: %w: its shard layout changed %d times during the call",
		activity, ErrUnavailable, maxLayoutTries)
}

// fanOut runs f for each of n shards at once (shard 0 on this goroutine)
// and waits for all of them.
func fanOut(n int, f func(k int)) {
	var wg sync.WaitGroup
	for k := 1; k < n; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(k)
		}()
	}
	f(0)
	wg.Wait()
}

// maxBorrowRounds bounds how often one Reserve borrows for its shard and
// asks it again; a round is lost only when other buyers of the shard took
// the borrowed units first (or another shard borrowed them back).
const maxBorrowRounds = 4

// reserveSharded decides req on the buyer's shard of l, borrowing from the
// other shards when it is short. It returns another layout when it learnt
// that the layout changed (the caller sends the request again).
func (d *Deductor) reserveSharded(ctx context.Context, l *layout, req Request) (Result, fenceReply, *layout, error) {
	k := shardOf(req.User, l.n)
	u := l.unit(k)
	r, err := d.reserveUnit(ctx, u, l.lists[k], req)
	if err != nil {
		return Result{}, r.f, l, err
	}
	var left int64 // what the last borrow saw in all shards
	for round := 0; ; round++ {
		switch r.res.Status {
		case NotLoaded:
			next, gone := d.judgeGone(ctx, l, []unitGone{{u: u, sn: r.sn, at: r.goneAt}})
			if next != l {
				return Result{}, fenceReply{}, next, nil
			}
			if gone[0] {
				return frozenResult(r.res), r.f, l, nil
			}
			return r.res, r.f, l, nil
		case SoldOut:
		default:
			return r.res, r.f, l, nil
		}
		if round == maxBorrowRounds {
			// Others of this shard took the borrowed units first, every
			// round: this answer does not say that every shard is empty.
			res := r.res
			res.Remaining = max(res.Remaining, left, 1)
			return res, r.f, l, nil
		}
		b := d.borrowFor(ctx, l, k, req.Qty-max(r.res.Remaining, 0), r.f.epoch)
		if b.err != nil {
			return Result{}, r.f, l, b.err
		}
		if b.moved == 0 {
			r.res.Remaining = b.left
			if b.frozen {
				// Units are left in a frozen shard, or a shard is
				// missing: busy, not sold out.
				return frozenResult(r.res), r.f, l, nil
			}
			if b.paused {
				// Units are left in a paused shard: paused, not sold out.
				return Result{Status: Paused, Remaining: r.res.Remaining, Limit: r.res.Limit}, r.f, l, nil
			}
			return r.res, b.fence, l, nil
		}
		left = b.left
		if r, err = d.reserveUnit(ctx, u, l.lists[k], req); err != nil {
			return Result{}, r.f, l, err
		}
	}
}

// unitGone is a shard's "not loaded" answer whose fence is judged once the
// layout is known not to have changed.
type unitGone struct {
	u  unit
	sn fenceSnap
	at int64 // Redis now of the answer; 0: this shard did not answer "not loaded"
}

// judgeGone handles shards of l that answered "not loaded": if the layout
// changed it returns the new one (nothing is judged: the shards were dropped
// on purpose); otherwise it judges each with the fence and reports which
// revealed a loss.
func (d *Deductor) judgeGone(ctx context.Context, l *layout, gs []unitGone) (*layout, []bool) {
	lost := make([]bool, len(gs))
	next, err := d.refreshLayout(ctx, l.activity)
	if err != nil {
		// Cannot tell: do not judge (no false alarm), answer "not loaded".
		return l, lost
	}
	if next != l {
		return next, lost
	}
	for i, g := range gs {
		if g.at == 0 {
			continue
		}
		if st := d.state(g.u); st != nil {
			v := st.observeGone(g.sn, g.at)
			d.act(ctx, g.u, v)
			lost[i] = v.frozen
		}
	}
	return l, lost
}

// Ranks of a shard's answer to a sharded Release: the best answer wins.
func releaseRank(r ReleaseResult) int {
	switch {
	case r.Status == ReleaseDone:
		return 5
	case r.Status == ReleaseDuplicate && r.Qty > 0: // released before
		return 4
	case r.Status == ReleaseUnknown: // tombstoned now
		return 3
	case r.Status == ReleaseDuplicate: // tombstoned before
		return 2
	case r.Status == ReleaseNotLoaded:
		return 1
	}
	return 0 // releaseAbsent
}

// releaseSharded releases reservationID in whichever shard of l holds it: every
// shard is asked in probe mode (nothing written where it is absent); when
// none holds it (or only tombstones do), every shard is asked again in
// tombstone mode, so that a Reserve of that ID arriving later, on whatever
// shard, deducts nothing.
func (d *Deductor) releaseSharded(ctx context.Context, l *layout, reservationID string) (ReleaseResult, *layout, error) {
	res, next, done, err := d.releasePass(ctx, l, reservationID, true)
	if done || err != nil || next != l {
		return res, next, err
	}
	res, next, _, err = d.releasePass(ctx, l, reservationID, false)
	return res, next, err
}

// releasePass asks every shard of l to release reservationID, in probe mode or
// in tombstone mode. done reports that the answer is final (the ID was
// found, or the activity is not loaded); the answer of the tombstone pass
// always is.
func (d *Deductor) releasePass(ctx context.Context, l *layout, reservationID string, probe bool) (ReleaseResult, *layout, bool, error) {
	rs := make([]releaseReply, l.n)
	errs := make([]error, l.n)
	fanOut(l.n, func(k int) { rs[k], errs[k] = d.releaseUnit(ctx, l.unit(k), l.lists[k], reservationID, probe) })
	best := -1
	var gs []unitGone
	for k := range rs {
		if errs[k] != nil {
			continue
		}
		if best < 0 || releaseRank(rs[k].res) > releaseRank(rs[best].res) {
			best = k
		}
		if rs[k].goneAt > 0 {
			gs = append(gs, unitGone{u: l.unit(k), sn: rs[k].sn, at: rs[k].goneAt})
		}
	}
	if best >= 0 && releaseRank(rs[best].res) >= 4 {
		return rs[best].res, l, true, nil // found: released now or before
	}
	if err := errors.Join(errs...); err != nil {
		return ReleaseResult{}, l, true, fmt.Errorf("stock: release %q in activity %s: %w", reservationID, l.activity, err)
	}
	if len(gs) > 0 {
		if next, _ := d.judgeGone(ctx, l, gs); next != l {
			return ReleaseResult{}, next, true, nil
		}
	}
	if len(gs) == l.n {
		return ReleaseResult{Status: ReleaseNotLoaded}, l, true, nil
	}
	return rs[best].res, l, !probe, nil
}

// reservationsSharded reads one page of one shard's ledger. The cursor
// names the shard in its top 8 bits and the shard's HSCAN cursor in the
// other 56.
func (d *Deductor) reservationsSharded(ctx context.Context, l *layout, cursor uint64, count int64) ([]Reservation, uint64, *layout, error) {
	k := int(cursor >> 56)
	c := cursor & (1<<56 - 1)
	if k >= l.n {
		return nil, 0, l, fmt.Errorf("%w: cursor %d names shard %d of %d", ErrInvalidArgument, cursor, k, l.n)
	}
	out, next, shape, err := d.scanPage(ctx, l.keys[k], c, count)
	if err != nil {
		return nil, 0, l, err
	}
	if shape == shapeNotLoaded && cursor == 0 {
		if nl, err := d.refreshLayout(ctx, l.activity); err == nil && nl != l {
			return nil, 0, nl, nil
		}
	}
	switch {
	case next >= 1<<56:
		return nil, 0, l, badReply("reservations", "shard %d cursor %d above 2^56", k, next)
	case next != 0:
		return out, uint64(k)<<56 | next, l, nil
	case k+1 < l.n:
		return out, uint64(k+1) << 56, l, nil
	}
	return out, 0, l, nil
}

// lookupSharded finds reservationID in the shards of l. A shard's held or freed
// entry wins over another's tombstone.
func (d *Deductor) lookupSharded(ctx context.Context, l *layout, reservationID string) (Reservation, bool, *layout, error) {
	type found struct {
		r     Reservation
		ok    bool
		shape ledgerShape
		err   error
	}
	fs := make([]found, l.n)
	fanOut(l.n, func(k int) {
		f := &fs[k]
		f.r, f.ok, f.shape, f.err = d.lookupKeys(ctx, l.keys[k], reservationID)
	})
	best, gone, frozen := -1, 0, 0
	var errs []error
	for k, f := range fs {
		switch {
		case f.err != nil:
			errs = append(errs, f.err)
		case f.ok && (best < 0 || fs[best].r.State == Tombstone):
			best = k
		case f.shape == shapeNotLoaded:
			gone++
		case f.shape == shapeFrozen:
			frozen++
		}
	}
	if best >= 0 {
		return fs[best].r, true, l, nil
	}
	if len(errs) > 0 {
		return Reservation{}, false, l, errors.Join(errs...)
	}
	if frozen > 0 {
		return Reservation{}, false, l, fmt.Errorf("%w: lookup of %q: %d of %d shards frozen, their ledgers may have lost the entry", ErrFrozen, reservationID, frozen, l.n)
	}
	if gone == l.n {
		if nl, err := d.refreshLayout(ctx, l.activity); err == nil && nl != l {
			return Reservation{}, false, nl, nil
		}
	}
	return Reservation{}, false, l, nil
}

// remainingSharded sums the shards' stock and the units in transfer.
func (d *Deductor) remainingSharded(ctx context.Context, l *layout) (int64, *layout, error) {
	ns := make([][16]int64, l.n)
	errs := make([]error, l.n)
	fanOut(l.n, func(k int) {
		vals, err := remainingScript.RunRO(ctx, d.rdb, []string{l.keys[k].meta}).Slice()
		if err != nil {
			errs[k] = classify("remaining", err)
			return
		}
		ns[k], errs[k] = ints("remaining", vals, 4)
	})
	if err := errors.Join(errs...); err != nil {
		return 0, l, err
	}
	var sum, in, out, loaded int64
	for _, n := range ns {
		if metaKind(n[0]) == metaLoaded {
			loaded++
			sum += n[1]
			in += n[2]
			out += n[3]
		}
	}
	if loaded == 0 {
		if nl, err := d.refreshLayout(ctx, l.activity); err == nil && nl != l {
			return 0, nl, nil
		}
		return 0, l, fmt.Errorf("stock: activity %s: %w", l.activity, ErrNotLoaded)
	}
	return sum + out - in, l, nil
}

// statsSharded reads the directory and every shard of l.
func (d *Deductor) statsSharded(ctx context.Context, l *layout, root *[16]int64) (Stats, *layout, error) {
	top, ns, err := d.readShardStats(ctx, l, root)
	if err != nil {
		return Stats{}, l, err
	}
	loaded := 0
	for _, n := range ns {
		if metaKind(n[0]) == metaLoaded {
			loaded++
		}
	}
	switch kind := metaKind(top[0]); {
	case kind == metaDirectory && top[1] != int64(l.n), kind == metaLoaded, kind == metaAbsent && loaded == 0:
		// The layout changed (or the activity is gone): read it again.
		n := int64(1)
		if kind == metaDirectory {
			n = top[1]
		}
		nl, err := d.learn(l.activity, n)
		if err != nil || nl != l {
			return Stats{}, nl, err
		}
	}
	return sumShardStats(l.n, top, ns, loaded), l, nil
}

// readShardStats runs stats.lua on the directory of l (unless root, its
// reply, is known) and on every shard, at once.
func (d *Deductor) readShardStats(ctx context.Context, l *layout, root *[16]int64) ([16]int64, [][16]int64, error) {
	ns := make([][16]int64, l.n)
	errs := make([]error, l.n+1)
	var top [16]int64
	fanOut(l.n+1, func(k int) {
		if k == l.n {
			if root != nil {
				top = *root
				return
			}
			top, errs[k] = d.statsOf(ctx, d.keys(l.activity).list())
			return
		}
		ns[k], errs[k] = d.statsOf(ctx, l.lists[k])
	})
	return top, ns, errors.Join(errs...)
}

// sumShardStats folds the stats.lua replies of a directory (top) and of
// its n shards (ns, loaded of them loaded) into one Stats.
func sumShardStats(n int, top [16]int64, ns [][16]int64, loaded int) Stats {
	dir := metaKind(top[0]) == metaDirectory
	st := Stats{
		Loaded: dir && loaded == n, Total: top[2], Limit: top[3], NoRebuy: top[9]&flagNoRebuy != 0,
		Start: fromMilli(top[4]), End: fromMilli(top[5]), ExpiresAt: fromMilli(top[6]), Epoch: top[10],
		Shards: make([]Stats, n),
	}
	for k, v := range ns {
		s := statsOf(v[:15])
		st.Shards[k] = s
		st.Remaining += s.Remaining
		st.Buyers += s.Buyers
		st.LedgerEntries += s.LedgerEntries
		st.Frozen = st.Frozen || s.Frozen
		st.Paused = st.Paused || s.Paused
		st.Seq += s.Seq
		st.TransfersIn += s.TransfersIn
		st.TransfersOut += s.TransfersOut
		st.PendingTransfers += s.PendingTransfers
		if !dir && s.Loaded {
			// No directory (a load cut short): the shards' own settings.
			st.Limit, st.Start, st.End, st.ExpiresAt = s.Limit, s.Start, s.End, s.ExpiresAt
			st.Total += s.Total
		}
	}
	st.InTransfer = st.TransfersOut - st.TransfersIn
	if loaded == n {
		// The shards' totals move with Adjust; the directory keeps the
		// loaded total.
		st.Total = 0
		for _, s := range st.Shards {
			st.Total += s.Total
		}
	}
	return st
}

// statsOf runs stats.lua on one ledger's keys (read-only).
func (d *Deductor) statsOf(ctx context.Context, k []string) ([16]int64, error) {
	vals, err := statsScript.RunRO(ctx, d.rdb, k).Slice()
	if err != nil {
		return [16]int64{}, classify("stats", err)
	}
	return ints("stats", vals, 15)
}

// heldSharded reads what user holds in its shard of l.
func (d *Deductor) heldSharded(ctx context.Context, l *layout, user string) (int64, *layout, error) {
	k := l.keys[shardOf(user, l.n)]
	n, err := d.heldKeys(ctx, k, user)
	if err != nil {
		return 0, l, err
	}
	if metaKind(n[0]) != metaLoaded {
		if nl, err := d.refreshLayout(ctx, l.activity); err == nil && nl != l {
			return 0, nl, nil
		}
		return 0, l, fmt.Errorf("stock: activity %s: %w", l.activity, ErrNotLoaded)
	}
	return n[1], l, nil
}

// loadSharded writes a sharded activity: its shards first (each
// set-if-absent, or reset), then its directory, so that a directory present
// means a complete layout. A Load that finds the activity loaded in any
// layout writes nothing. A load cut short (a crash between the shards and
// the directory) is completed by the next Load. A Reset freezes the shards
// of an older layout first and drops them after writing the new directory.
func (d *Deductor) loadSharded(ctx context.Context, a Activity, mode int) (bool, error) {
	n := a.shards()
	kind, cur, err := d.readLayout(ctx, a.ID)
	if err != nil {
		return false, err
	}
	switch {
	case mode == loadPlain && kind != metaAbsent,
		mode == loadPlaceholder && (kind == metaLoaded || kind == metaDirectory && cur != int64(n)):
		// Loaded already (a placeholder only fills the missing shards of
		// this very layout).
		_, err := d.learn(a.ID, max(cur, 1))
		return false, err
	}
	reset, origin, frozen := "0", originLoad, "0"
	var old *layout
	switch mode {
	case loadReset:
		reset, origin = "1", originReset
		if old, err = d.oldLayout(ctx, a.ID, n); err != nil {
			return false, err
		}
	case loadPlaceholder:
		origin, frozen = originPlaceholder, "1"
	}
	if err := d.loadShards(ctx, a, newLayout(d.o.prefix, a.ID, n), reset, origin, frozen); err != nil {
		return false, err
	}
	written, n2, err := d.writeDirectory(ctx, a, n, mode == loadReset, origin)
	if err != nil {
		return false, err
	}
	if _, err := d.learn(a.ID, n2); err != nil {
		return false, err
	}
	if written && old != nil {
		d.dropLayout(ctx, old)
	}
	if written {
		d.o.logger.InfoContext(ctx, "stock: activity loaded", "activity", a.ID, "stock", a.Stock, "shards", n,
			"reset", mode == loadReset, "frozen", mode == loadPlaceholder)
	}
	return written, nil
}

// loadShards runs load.lua on every shard of l, each with its even part of
// a's stock (reset, origin and frozen: load.lua's ARGV[6], [8] and [9]).
func (d *Deductor) loadShards(ctx context.Context, a Activity, l *layout, reset string, origin int, frozen string) error {
	alloc := split(a.Stock, l.n)
	errs := make([]error, l.n)
	fanOut(l.n, func(k int) {
		vals, err := loadScript.Run(ctx, d.rdb, l.lists[k], alloc[k], a.limit(), unixMilli(a.Start), unixMilli(a.End),
			a.ttl().Milliseconds(), reset, newEpoch(), origin, frozen, a.noRebuyArg()).Slice()
		if err != nil {
			errs[k] = classify("load", err)
			return
		}
		v, err := ints("load", vals, 2)
		switch {
		case err != nil:
			errs[k] = err
		case writeCode(v[0]) == writeExpired:
			errs[k] = fmt.Errorf("%w: activity %s: end + TTL is already past in Redis time", ErrInvalidArgument, a.ID)
		case writeCode(v[0]) != writePresent && writeCode(v[0]) != writeDone:
			errs[k] = badReply("load", "status code %d", v[0])
		}
	})
	return errors.Join(errs...)
}

// writeDirectory runs directory.lua: set-if-absent, or overwrite. It reports
// whether it wrote, and the number of shards the activity now has (1: an
// un-sharded activity was there).
func (d *Deductor) writeDirectory(ctx context.Context, a Activity, n int, overwrite bool, origin int) (bool, int64, error) {
	ow := "0"
	if overwrite {
		ow = "1"
	}
	vals, err := directoryScript.Run(ctx, d.rdb, d.keys(a.ID).list(), n, a.Stock, a.limit(), unixMilli(a.Start),
		unixMilli(a.End), a.ttl().Milliseconds(), ow, newEpoch(), origin, a.noRebuyArg()).Slice()
	if err != nil {
		return false, 0, classify("load", err)
	}
	v, err := ints("load", vals, 2)
	if err != nil {
		return false, 0, err
	}
	switch writeCode(v[0]) {
	case writeDone:
		return true, int64(n), nil
	case writePresent:
		return false, v[1], nil
	case writeExpired:
		return false, 0, fmt.Errorf("%w: activity %s: end + TTL is already past in Redis time", ErrInvalidArgument, a.ID)
	}
	return false, 0, badReply("load", "directory status code %d", v[0])
}

// dropLayout deletes the keys of every shard of an old layout (best effort:
// they expire anyway).
func (d *Deductor) dropLayout(ctx context.Context, l *layout) {
	fanOut(l.n, func(k int) {
		if err := dropScript.Run(ctx, d.rdb, l.lists[k]).Err(); err != nil {
			d.o.logger.WarnContext(ctx, "stock: dropping a shard of an old layout failed (it expires by itself)",
				"activity", l.activity, "shard", k, "shards", l.n, "err", classify("drop", err))
		}
	})
}

// checkRebuildable refuses (ErrLive) unless every ledger of the activity's
// current layout is absent or frozen. It returns that layout's kind and
// number of shards.
func (d *Deductor) checkRebuildable(ctx context.Context, activity string) (metaKind, int64, error) {
	kind, cur, err := d.readLayout(ctx, activity)
	if err != nil {
		return 0, 0, err
	}
	var lists [][]string
	switch kind {
	case metaLoaded:
		lists = [][]string{d.keys(activity).list()}
	case metaDirectory:
		lists = newLayout(d.o.prefix, activity, int(cur)).lists
	}
	ns := make([][16]int64, len(lists))
	errs := make([]error, len(lists))
	if len(lists) > 0 {
		fanOut(len(lists), func(k int) {
			// On the master: a replica may still show a shard unfrozen, or frozen.
			vals, err := statsScript.Run(ctx, d.rdb, lists[k]).Slice()
			if err != nil {
				errs[k] = classify("rebuild", err)
				return
			}
			ns[k], errs[k] = ints("rebuild", vals, 15)
		})
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	for k, n := range ns {
		if metaKind(n[0]) == metaLoaded && n[9]&flagFrozen == 0 {
			return 0, 0, fmt.Errorf("stock: rebuild activity %s: %w (ledger %d of %d is not frozen: freeze it first)",
				activity, ErrLive, k, len(ns))
		}
	}
	return kind, cur, nil
}

// rebuildSharded rebuilds a sharded activity from live: each shard with the
// live reservations of its buyers and an even split of the units left (each
// left frozen), then the directory, then every shard unfrozen; the shards
// of an older layout are dropped last. A failure part way leaves the
// rebuilt shards frozen: the next Rebuild starts again.
func (d *Deductor) rebuildSharded(ctx context.Context, a Activity, live []Reservation, kind metaKind, cur int64) (Stats, error) {
	n := a.shards()
	per := make([][]Reservation, n)
	heldBy := make([]int64, n)
	var sum int64
	for _, r := range live {
		k := shardOf(r.User, n)
		per[k] = append(per[k], r)
		heldBy[k] += r.Qty
		sum += r.Qty
	}
	alloc := split(a.Stock-sum, n)
	l := newLayout(d.o.prefix, a.ID, n)
	ns := make([][16]int64, n)
	errs := make([]error, n)
	fanOut(n, func(k int) {
		args := make([]any, 0, 10+4*len(per[k]))
		args = append(args, alloc[k]+heldBy[k], a.limit(), unixMilli(a.Start), unixMilli(a.End), a.ttl().Milliseconds(),
			newEpoch(), "", len(per[k]), "1", a.noRebuyArg())
		for _, r := range per[k] {
			args = append(args, r.ID, r.User, r.Qty, unixMilli(r.ReservedAt))
		}
		vals, err := rebuildScript.Run(ctx, d.rdb, l.lists[k], args...).Slice()
		if err != nil {
			errs[k] = classify("rebuild", err)
			return
		}
		if ns[k], errs[k] = ints("rebuild", vals, 13); errs[k] == nil {
			errs[k] = rebuildErr(a.ID, rebuildCode(ns[k][0]))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return Stats{}, err
	}
	if _, _, err := d.writeDirectory(ctx, a, n, true, originRebuild); err != nil {
		return Stats{}, err
	}
	if _, err := d.learn(a.ID, int64(n)); err != nil {
		return Stats{}, err
	}
	if err := d.freezeLayout(ctx, l, false); err != nil {
		return Stats{}, fmt.Errorf("stock: rebuild activity %s: unfreeze the rebuilt shards: %w", a.ID, err)
	}
	if kind == metaDirectory && cur != int64(n) {
		d.dropLayout(ctx, newLayout(d.o.prefix, a.ID, int(cur)))
	}
	st := Stats{Loaded: true, Total: a.Stock, Limit: a.limit(), Start: a.Start, End: a.End, Shards: make([]Stats, n)}
	for k, v := range ns {
		sh := statsOf(v[1:13])
		sh.Frozen = false
		st.Shards[k] = sh
		st.Remaining += sh.Remaining
		st.Buyers += sh.Buyers
		st.LedgerEntries += sh.LedgerEntries
		st.ExpiresAt = sh.ExpiresAt
	}
	return st, nil
}

// rebuildErr maps a rebuild.lua status code to its error.
func rebuildErr(activity string, code rebuildCode) error {
	switch code {
	case rebuildDone:
		return nil
	case rebuildExpired:
		return fmt.Errorf("%w: activity %s: end + TTL is already past in Redis time", ErrInvalidArgument, activity)
	case rebuildLive:
		return fmt.Errorf("stock: rebuild activity %s: %w (freeze it first)", activity, ErrLive)
	case rebuildChanged:
		return fmt.Errorf("stock: rebuild activity %s: %w (it changed since it was checked)", activity, ErrLive)
	case rebuildOverTotal, rebuildOverLimit, rebuildDuplicate:
		return fmt.Errorf("%w: activity %s: live reservations rejected by redis (code %d)", ErrInvalidArgument, activity, code)
	}
	return badReply("rebuild", "status code %d", code)
}
