package stock

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Borrowing between the shards of a sharded activity.
//
// When the buyer's shard has fewer units than asked, the Reserve borrows:
// it reads every shard (probe.lua: stock, frozen, transfers in flight and
// how old), and moves units from the fullest shards to its own until it has
// enough, then asks its shard again. Only one borrow per shard runs at a
// time in a process: the other Reserves of that shard that find it short
// wait for it (gate) and then ask again.
//
// A transfer touches two slots, which one script cannot do on a Cluster,
// so it takes three steps, each one atomic script on one shard:
//
//  1. give.lua, on the donor: take q units (half its stock rounded up, at
//     least the units wanted, at most its stock) out of its stock into a
//     pending record xout[id] = "to:q:epochTo:at" (out += q).
//  2. credit.lua, on the recipient: if the recipient has no decision for id
//     yet and still has the epoch the record names, apply it: stock += q
//     and xin[id] = "A:…" (in += q). Once xin holds A or V for id, that is
//     final: a repeated step 2 does nothing, a later void finds A.
//  3. settle.lua, on the donor: delete xout[id]; if the recipient voided it
//     (or was of another epoch), give the q units back (out -= q).
//
// Recovery of a transfer cut short (a crash, a timeout between the steps):
// for each pending record older than the grace, ask the recipient to void
// id (credit.lua "void": A if it was applied, else V, written now), then
// settle it at the donor accordingly. A late step 2 after the void finds V
// and credits nothing. So no unit is ever created or lost: at every
// moment, Σ stock + Σ held + (Σ out − Σ in) = the loaded stock, where
// Σ out − Σ in counts exactly the units of transfers neither credited nor
// refunded. A borrow finishes stale transfers by itself before it decides
// that the other shards are empty, so their units are never stranded while
// buyers want them; so does each Preloader pass; SettleTransfers finishes
// every one at once.
//
// Every step increments the shard's seq and returns its fence, judged like
// a reservation's.

// transferTimeout bounds one borrow (all its steps); it runs whatever the
// caller's context does, since a transfer once started should finish.
const transferTimeout = 5 * time.Second

// gate lets one borrow per shard run at a time in this process.
type gate struct {
	mu  sync.Mutex
	cur *borrowCall
}

type borrowCall struct {
	done chan struct{}
	out  borrowOutcome
}

// borrowOutcome is what a borrow for one shard did and saw.
type borrowOutcome struct {
	moved int64 // units credited to the shard
	// left is the units not held anywhere, as the probe saw them: every
	// shard's stock plus the units in transfer (0: the activity is empty).
	left int64
	// fence digests every shard's (epoch, seq): it keys the sold-out
	// cache's ledger snapshot.
	fence fenceReply
	// frozen: a frozen shard holds units, or a shard is missing (its data
	// lost): if nothing could be borrowed, the activity is not sold out but
	// waits for a rebuild or an unfreeze.
	frozen bool
	// paused: a paused shard holds units (a Pause in progress, or cut
	// short): if nothing could be borrowed, the answer is Paused.
	paused bool
	err    error
}

// borrowFor borrows at least need units for shard k of l (whose epoch, seen
// by the Reserve that found it short, is epochK), or waits for the borrow
// of that shard already running in this process and shares its outcome.
func (d *Deductor) borrowFor(ctx context.Context, l *layout, k int, need, epochK int64) borrowOutcome {
	g := &l.gates[k]
	g.mu.Lock()
	if c := g.cur; c != nil {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.out
		case <-ctx.Done():
			return borrowOutcome{err: classify("reserve", ctx.Err())}
		}
	}
	c := &borrowCall{done: make(chan struct{})}
	g.cur = c
	g.mu.Unlock()
	c.out = d.borrow(ctx, l, k, need, epochK)
	g.mu.Lock()
	g.cur = nil
	g.mu.Unlock()
	close(c.done)
	return c.out
}

// probe is one shard's answer to probe.lua.
type probe struct {
	loaded, frozen, paused                bool
	stock, pending, stale, epoch, seq, in int64
	out                                   int64
	err                                   error
}

func (d *Deductor) probeAll(ctx context.Context, l *layout) []probe {
	ps := make([]probe, l.n)
	grace := d.o.grace.Milliseconds()
	fanOut(l.n, func(k int) {
		p := &ps[k]
		vals, err := probeScript.Run(ctx, d.rdb, []string{l.keys[k].meta, l.keys[k].xout}, grace).Slice()
		if err != nil {
			p.err = classify("probe", err)
			return
		}
		n, err := ints("probe", vals, 10)
		if err != nil {
			p.err = err
			return
		}
		p.loaded, p.stock, p.frozen, p.pending, p.stale = metaKind(n[0]) == metaLoaded, n[1], n[2] == replyTrue, n[3], n[4]
		p.epoch, p.seq, p.in, p.out, p.paused = n[5], n[6], n[7], n[8], n[9] == replyTrue
	})
	return ps
}

// borrow runs one borrow for shard k (see borrowFor).
func (d *Deductor) borrow(ctx context.Context, l *layout, k int, need, epochK int64) borrowOutcome {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), transferTimeout)
	defer cancel()
	need = max(need, 1)
	ps := d.probeAll(ctx, l)
	if slices.ContainsFunc(ps, func(p probe) bool { return p.err == nil && p.stale > 0 }) {
		// Transfers cut short: finish them first, their units may be the
		// ones this shard needs.
		for i, p := range ps {
			if p.err == nil && p.stale > 0 {
				if _, err := d.settleShard(ctx, l, i, d.o.grace); err != nil {
					d.o.logger.WarnContext(ctx, "stock: finishing stale transfers failed", "activity", l.activity,
						"shard", i, "err", err)
				}
			}
		}
		ps = d.probeAll(ctx, l)
	}
	var donors []int
	for i, p := range ps {
		if i != k && p.err == nil && p.loaded && !p.frozen && !p.paused && p.stock > 0 {
			donors = append(donors, i)
		}
	}
	slices.SortFunc(donors, func(a, b int) int { return cmp.Compare(ps[b].stock, ps[a].stock) })

	var out borrowOutcome
	var errs []error
	for _, i := range donors {
		if out.moved >= need {
			break
		}
		q, err := d.transfer(ctx, l, i, k, need-out.moved, epochK)
		out.moved += q
		if err != nil {
			errs = append(errs, err)
		}
	}
	var in, sent int64
	for _, p := range ps {
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		out.left += p.stock
		in += p.in
		sent += p.out
		out.frozen = out.frozen || p.frozen && p.stock > 0 || !p.loaded
		out.paused = out.paused || p.paused && p.stock > 0
	}
	out.left += sent - in
	out.fence = digest(ps)
	if out.moved == 0 && len(errs) > 0 {
		// Units may sit in a shard that could not be read or lend: not
		// sold out, but not reserved either.
		out.err = fmt.Errorf("stock: reserve: borrow for shard %d of %d of activity %s: %w", k, l.n, l.activity, errors.Join(errs...))
	} else if out.moved > 0 {
		d.o.logger.DebugContext(ctx, "stock: borrowed units between shards", "activity", l.activity, "shard", k, "units", out.moved)
	}
	return out
}

// digest folds every shard's (epoch, seq) into one fenceReply: a change in
// any ledger changes it.
func digest(ps []probe) fenceReply {
	h := uint64(1469598103934665603)
	var seq int64
	for _, p := range ps {
		h = (h ^ uint64(p.epoch)) * 1099511628211
		h = (h ^ uint64(p.seq)) * 1099511628211
		seq += p.seq
	}
	return fenceReply{epoch: int64(h>>12) | 1, seq: seq}
}

// newTransferID returns a random transfer ID (16 hex digits).
func newTransferID() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// transfer moves up to want units from shard from to shard to (whose epoch
// is epochTo): the three steps. It returns the units credited to to. A
// transfer it cannot finish is left pending for the recovery.
func (d *Deductor) transfer(ctx context.Context, l *layout, from, to int, want, epochTo int64) (int64, error) {
	id := newTransferID()
	q, err := d.give(ctx, l, from, to, id, want, epochTo)
	if err != nil || q == 0 {
		// After a timeout step 1 may have run: the recovery finishes it.
		return 0, err
	}
	applied, err := d.credit(ctx, l, to, from, id, q, epochTo, true)
	if err != nil {
		// Unknown whether step 2 ran: let the recipient decide now.
		if applied, err = d.credit(ctx, l, to, from, id, q, epochTo, false); err != nil {
			return 0, fmt.Errorf("stock: transfer %s of %d units from shard %d to %d of activity %s left for the recovery: %w",
				id, q, from, to, l.activity, err)
		}
	}
	if err := d.settle(ctx, l, from, id, applied); err != nil {
		d.o.logger.WarnContext(ctx, "stock: settling a transfer failed; left for the recovery", "activity", l.activity,
			"transfer", id, "from", from, "to", to, "units", q, "applied", applied, "err", err)
	}
	if !applied {
		return 0, nil
	}
	return q, nil
}

// give is step 1 on shard from: it returns the units taken (0 when it had
// none, is frozen, paused or not loaded).
func (d *Deductor) give(ctx context.Context, l *layout, from, to int, id string, want, epochTo int64) (int64, error) {
	u := l.unit(from)
	st, sn := d.snapOf(u)
	vals, err := giveScript.Run(ctx, d.rdb, []string{l.keys[from].meta, l.keys[from].xout}, id, to, want, epochTo).Slice()
	if err != nil {
		return 0, classify("transfer", err)
	}
	n, err := ints("transfer", vals, 8)
	if err != nil {
		return 0, err
	}
	code := giveCode(n[0])
	switch code {
	case giveTaken, giveEmpty, giveFrozen, givePaused:
		d.observeUnit(ctx, u, st, sn, fenceReply{epoch: n[3], seq: n[4], exp: n[5], born: n[6], origin: n[7]})
	case giveNotLoaded:
	default:
		return 0, badReply("transfer", "give status code %d", n[0])
	}
	if code != giveTaken {
		return 0, nil
	}
	if n[1] <= 0 || n[1] > MaxQuantity {
		return 0, badReply("transfer", "gave %d units", n[1])
	}
	return n[1], nil
}

// credit is step 2 on shard to (apply), or the recovery's decision there
// (void). It reports whether the transfer is applied there.
func (d *Deductor) credit(ctx context.Context, l *layout, to, from int, id string, q, epochTo int64, apply bool) (bool, error) {
	u := l.unit(to)
	mode := "void"
	if apply {
		mode = "apply"
	}
	st, sn := d.snapOf(u)
	vals, err := creditScript.Run(ctx, d.rdb, []string{l.keys[to].meta, l.keys[to].xin}, id, from, q,
		strconv.FormatInt(epochTo, 10), mode).Slice()
	if err != nil {
		return false, classify("transfer", err)
	}
	n, err := ints("transfer", vals, 7)
	if err != nil {
		return false, err
	}
	switch code := creditCode(n[0]); code {
	case creditApplied, creditBefore, creditVoid:
		d.observeUnit(ctx, u, st, sn, fenceReply{epoch: n[2], seq: n[3], exp: n[4], born: n[5], origin: n[6]})
		return code != creditVoid, nil
	case creditStale:
		return false, nil
	}
	return false, badReply("transfer", "credit status code %d", n[0])
}

// settle is step 3 on shard from.
func (d *Deductor) settle(ctx context.Context, l *layout, from int, id string, applied bool) error {
	u := l.unit(from)
	outcome := "V"
	if applied {
		outcome = "A"
	}
	st, sn := d.snapOf(u)
	vals, err := settleScript.Run(ctx, d.rdb, []string{l.keys[from].meta, l.keys[from].xout}, id, outcome).Slice()
	if err != nil {
		return classify("transfer", err)
	}
	n, err := ints("transfer", vals, 7)
	if err != nil {
		return err
	}
	switch settleCode(n[0]) {
	case settleGone, settleApplied, settleRefunded:
		d.observeUnit(ctx, u, st, sn, fenceReply{epoch: n[2], seq: n[3], exp: n[4], born: n[5], origin: n[6]})
		return nil
	case settleNotLoaded:
		return nil
	}
	return badReply("transfer", "settle status code %d", n[0])
}

// settleShard finishes the transfers out of shard i of l started at least
// minAge ago: void at the recipient unless applied there, then settled (or
// refunded) here. It returns how many it finished.
func (d *Deductor) settleShard(ctx context.Context, l *layout, i int, minAge time.Duration) (int, error) {
	vals, err := pendingScript.Run(ctx, d.rdb, []string{l.keys[i].xout}, minAge.Milliseconds()).Slice()
	if err != nil {
		return 0, classify("settle transfers", err)
	}
	if len(vals)%2 != 0 {
		return 0, badReply("settle transfers", "%d values", len(vals))
	}
	done := 0
	var errs []error
	for j := 0; j < len(vals); j += 2 {
		id, ok1 := vals[j].(string)
		rec, ok2 := vals[j+1].(string)
		if !ok1 || !ok2 {
			return done, badReply("settle transfers", "entry of types %T, %T", vals[j], vals[j+1])
		}
		to, q, epochTo, err := parseTransfer(rec, l.n)
		if err != nil {
			return done, err
		}
		applied, err := d.credit(ctx, l, to, i, id, q, epochTo, false)
		if err == nil {
			err = d.settle(ctx, l, i, id, applied)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done++
		d.o.logger.InfoContext(ctx, "stock: finished an interrupted transfer", "activity", l.activity, "transfer", id,
			"from", i, "to", to, "units", q, "applied", applied)
	}
	return done, errors.Join(errs...)
}

// parseTransfer parses a pending record "to:qty:epochTo:atMs".
func parseTransfer(rec string, n int) (to int, q, epochTo int64, err error) {
	f := strings.Split(rec, ":")
	if len(f) != 4 {
		return 0, 0, 0, badReply("settle transfers", "record %q", rec)
	}
	t, err1 := strconv.Atoi(f[0])
	q, err2 := strconv.ParseInt(f[1], 10, 64)
	epochTo, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || t < 0 || t >= n || q <= 0 {
		return 0, 0, 0, badReply("settle transfers", "record %q", rec)
	}
	return t, q, epochTo, nil
}

// SettleTransfers finishes every transfer between the shards of a sharded
// activity that has not finished, whatever its age: applied where the
// recipient applied it, refunded to the donor otherwise (the recipient
// records the decision first, so a late step of the interrupted transfer
// changes nothing). It returns how many it finished. A transfer still in
// progress in some process is finished too (safely: that process's own
// step then finds it decided); Reserve and the [Preloader] finish the ones
// older than the grace ([WithTransferGrace]) by themselves, so call this
// after a crash or before a final count. An un-sharded or absent activity
// has none (0, nil).
func (d *Deductor) SettleTransfers(ctx context.Context, activity string) (int, error) {
	return d.settleTransfers(ctx, activity, 0)
}

// settleTransfers finishes the activity's transfers older than minAge.
func (d *Deductor) settleTransfers(ctx context.Context, activity string, minAge time.Duration) (int, error) {
	if err := checkActivity(activity); err != nil {
		return 0, err
	}
	l := d.layoutOf(activity)
	if l == nil {
		var err error
		if l, err = d.refreshLayout(ctx, activity); err != nil || l == nil {
			return 0, err
		}
	}
	total := 0
	var errs []error
	for i := range l.n {
		n, err := d.settleShard(ctx, l, i, minAge)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}
