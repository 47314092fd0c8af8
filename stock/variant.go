package stock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// variantSep separates an activity ID from a variant ID in the activity
// string of a variant ("42/M"); '/' is not in [ValidID]'s alphabet, so the
// split is unambiguous.
const variantSep = '/'

// maxVariants is the largest number of variants of one activity.
const maxVariants = 256

// Variant is one keyed sub-stock of an [Activity] (a size, a colour, a
// capacity): its own counter, per-user limit and ledger, under the
// activity's hash tag. Address it with [VariantOf] wherever an activity ID
// is taken (Reserve, Release, Lookup, Reservations, Adjust, Pause, Resume,
// Freeze, Stats, Remaining, Rebuild).
type Variant struct {
	// ID of the variant: 1..MaxIDLen bytes of [A-Za-z0-9._@+-] (ValidID),
	// unique within the activity.
	ID string
	// Stock is the variant's units on sale, in [0, MaxQuantity]. From
	// [Deductor.Variants], the units left now.
	Stock int64
	// PerUserLimit is how many units of this variant one buyer may hold;
	// 0 means the activity's PerUserLimit.
	PerUserLimit int64
}

// VariantOf returns the activity string of variant v of activity a,
// "a/v": the Activity of a [Request], a [Line] or any call that takes an
// activity ID. Both parts must be [ValidID].
func VariantOf(activity, variant string) string {
	return activity + string(variantSep) + variant
}

// validVariant reports whether s is "<activity>/<variant>" with both parts
// ValidID.
func validVariant(s string) bool {
	i := strings.IndexByte(s, variantSep)
	return i > 0 && ValidID(s[:i]) && ValidID(s[i+1:])
}

// parentOf returns the activity of a variant's activity string, and false
// for a plain activity ID.
func parentOf(s string) (string, bool) {
	if i := strings.IndexByte(s, variantSep); i >= 0 {
		return s[:i], true
	}
	return s, false
}

func (a Activity) validateVariants() error {
	if len(a.Variants) == 0 {
		return nil
	}
	var sum int64
	seen := make(map[string]bool, len(a.Variants))
	for _, v := range a.Variants {
		if err := checkID(ErrInvalidArgument, "variant ID", v.ID); err != nil {
			return err
		}
		switch {
		case seen[v.ID]:
			return fmt.Errorf("%w: variant %s given twice", ErrInvalidArgument, v.ID)
		case v.Stock < 0 || v.Stock > MaxQuantity:
			return fmt.Errorf("%w: variant %s: stock %d must be in [0, 2^53-1]", ErrInvalidArgument, v.ID, v.Stock)
		case v.PerUserLimit < 0 || v.PerUserLimit > MaxQuantity:
			return fmt.Errorf("%w: variant %s: per-user limit %d must be in [0, 2^53-1]", ErrInvalidArgument, v.ID, v.PerUserLimit)
		}
		seen[v.ID] = true
		sum += v.Stock
		if sum > MaxQuantity {
			return fmt.Errorf("%w: the variants' stock exceeds 2^53-1", ErrInvalidArgument)
		}
	}
	switch {
	case !ValidID(a.ID):
		return fmt.Errorf("%w: an activity with variants has a plain ID (ValidID), not %s", ErrInvalidArgument, showID(a.ID))
	case len(a.Variants) > maxVariants:
		return fmt.Errorf("%w: %d variants, at most %d", ErrInvalidArgument, len(a.Variants), maxVariants)
	case a.Shards > 1:
		return fmt.Errorf("%w: an activity with variants is not sharded (shards %d)", ErrInvalidArgument, a.Shards)
	case a.Stock != 0 && a.Stock != sum:
		return fmt.Errorf("%w: stock %d is neither 0 nor the variants' sum %d", ErrInvalidArgument, a.Stock, sum)
	}
	return nil
}

// variantActivity is the ledger of variant v of a, loaded as an activity
// of its own (load.lua on the variant's keys).
func (a Activity) variantActivity(v Variant) Activity {
	lim := v.PerUserLimit
	if lim == 0 {
		lim = a.limit()
	}
	return Activity{ID: VariantOf(a.ID, v.ID), Stock: v.Stock, PerUserLimit: lim, Start: a.Start, End: a.End,
		TTL: a.TTL, NoRebuy: a.NoRebuy}
}

// varInfo is an activity's variant list as this Deductor last saw it: the
// list string of its vars hash, and the activity string, buyers key and
// meta key of each variant (the KEYS of reserve_lines.lua's per-activity
// cap, of vstock.lua and of vheld.lua). Immutable.
type varInfo struct {
	list   string
	ids    []string
	acts   []string // VariantOf(activity, id), in list order: the sizes' sold-out flags
	has    map[string]bool
	buyers []string
	metas  []string
}

// noVars is the varInfo of an activity whose list is not known.
var noVars = &varInfo{}

// varTable holds the varInfo of each activity with variants seen: a
// copy-on-write map read lock-free (the sold-out answer of an activity in
// sizes reads it on every request); writers hold mu.
type varTable struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string]*varInfo]
}

// varsOf returns the variant list of activity as last learnt (noVars when
// none): no lock, no allocation.
func (d *Deductor) varsOf(activity string) *varInfo {
	if m := d.vars.m.Load(); m != nil {
		if v := (*m)[activity]; v != nil {
			return v
		}
	}
	return noVars
}

// learnVars records list as the variant list of activity ("" forgets it).
func (d *Deductor) learnVars(activity, list string) *varInfo {
	v := &varInfo{list: list, has: map[string]bool{}}
	if list != "" {
		v.ids = strings.Split(list, ",")
	}
	for _, id := range v.ids {
		v.has[id] = true
		act := VariantOf(activity, id)
		k := activityKeys(d.o.prefix, act)
		v.acts = append(v.acts, act)
		v.buyers = append(v.buyers, k.buyers)
		v.metas = append(v.metas, k.meta)
	}
	d.vars.mu.Lock()
	defer d.vars.mu.Unlock()
	old := d.vars.m.Load()
	m := map[string]*varInfo{}
	if old != nil {
		m = make(map[string]*varInfo, len(*old)+1)
		for k, x := range *old {
			m[k] = x
		}
	}
	if list == "" {
		delete(m, activity)
	} else {
		m[activity] = v
	}
	d.vars.m.Store(&m)
	if list == "" {
		return noVars
	}
	return v
}

// forgetVars drops the variant list of activity, which Redis no longer
// has (its vars hash is gone: expired, or reset to a plain activity).
func (d *Deductor) forgetVars(activity string) {
	if d.varsOf(activity).list != "" {
		d.learnVars(activity, "")
	}
}

// resetVars is the in-process side of a Reset of activity a: the sold-out
// flags of every size this Deductor knew and of every size of a are
// dropped (a Reset loads each size afresh, so what they said is stale),
// and, when the Reset went through, a's list is learnt (or forgotten for
// an activity reset without variants).
func (d *Deductor) resetVars(ctx context.Context, a Activity, done bool) {
	for _, act := range d.varsOf(a.ID).acts {
		d.clearSoldOut(ctx, act)
	}
	ids := make([]string, len(a.Variants))
	for i, v := range a.Variants {
		d.clearSoldOut(ctx, VariantOf(a.ID, v.ID))
		ids[i] = v.ID
	}
	if !done {
		return
	}
	if list := strings.Join(ids, ","); list != d.varsOf(a.ID).list {
		d.learnVars(a.ID, list)
	}
}

// loadVariants loads an activity with variants: its vars hash first (so a
// variant is never reservable without the activity's limit), then each
// variant's ledger as Load would load an activity. It reports whether this
// call wrote any of them; a Load cut short is completed by the next.
func (d *Deductor) loadVariants(ctx context.Context, a Activity, mode int) (bool, error) {
	loaded, err := d.writeVars(ctx, a, mode == loadReset)
	if err != nil {
		return false, err
	}
	for _, v := range a.Variants {
		ok, err := d.load(ctx, a.variantActivity(v), mode)
		if err != nil {
			return loaded, err
		}
		loaded = loaded || ok
	}
	return loaded, nil
}

// writeVars writes the vars hash of a (set-if-absent, or overwritten when
// reset) and reports whether it wrote it.
func (d *Deductor) writeVars(ctx context.Context, a Activity, reset bool) (bool, error) {
	ids := make([]string, len(a.Variants))
	for i, v := range a.Variants {
		ids[i] = v.ID
	}
	r := "0"
	if reset {
		r = "1"
	}
	vals, err := vloadScript.Run(ctx, d.rdb, []string{varsKey(d.o.prefix, a.ID)}, strings.Join(ids, ","), a.limit(),
		unixMilli(a.End), a.ttl().Milliseconds(), r).Slice()
	if err != nil {
		return false, classify("load", err)
	}
	n, err := ints("load", vals, 2)
	if err != nil {
		return false, err
	}
	switch writeCode(n[0]) {
	case writeDone:
		return true, nil
	case writePresent:
		return false, nil
	case writeExpired:
		return false, fmt.Errorf("%w: activity %s: end + TTL is already past in Redis time", ErrInvalidArgument, a.ID)
	}
	return false, badReply("load", "status code %d", n[0])
}

// Variants returns the variants of an activity loaded with
// [Activity.Variants], in load order, each with the units left now
// (Stock; -1 for a variant whose ledger is not loaded) and its per-user
// limit: the page shows each size, and the activity is sold out overall
// when every Stock is 0. The error wraps [ErrNotLoaded] when the activity
// has no variants in Redis. One read-only script call (two when this
// Deductor has not seen the activity's variant list yet).
func (d *Deductor) Variants(ctx context.Context, activity string) ([]Variant, error) {
	if err := checkID(ErrInvalidArgument, "activity ID", activity); err != nil {
		return nil, err
	}
	vi := d.varsOf(activity)
	for range 3 {
		ks := append([]string{varsKey(d.o.prefix, activity)}, vi.metas...)
		vals, err := vstockScript.RunRO(ctx, d.rdb, ks, vi.list).Slice()
		if err != nil {
			return nil, classify("variants", err)
		}
		if len(vals) < 2 {
			return nil, badReply("variants", "%d values", len(vals))
		}
		code, ok := vals[0].(int64)
		if !ok {
			return nil, badReply("variants", "code of type %T", vals[0])
		}
		switch varsCode(code) {
		case varsLearn:
			list, ok := vals[1].(string)
			if !ok {
				return nil, badReply("variants", "list of type %T", vals[1])
			}
			if list == "" {
				d.forgetVars(activity)
				return nil, fmt.Errorf("stock: activity %s: %w (no variants)", activity, ErrNotLoaded)
			}
			vi = d.learnVars(activity, list)
			continue
		case varsDecided:
			if len(vals) != 3 {
				return nil, badReply("variants", "%d values, want 3", len(vals))
			}
			xs, ok := vals[2].([]any)
			if !ok || len(xs) != 2*len(vi.ids) {
				return nil, badReply("variants", "%d stock values for %d variants", len(xs), len(vi.ids))
			}
			out := make([]Variant, len(vi.ids))
			for i, id := range vi.ids {
				s, ok1 := xs[2*i].(int64)
				l, ok2 := xs[2*i+1].(int64)
				if !ok1 || !ok2 {
					return nil, badReply("variants", "values of types %T, %T", xs[2*i], xs[2*i+1])
				}
				out[i] = Variant{ID: id, Stock: s, PerUserLimit: l}
			}
			return out, nil
		default:
			return nil, badReply("variants", "status code %d", code)
		}
	}
	return nil, fmt.Errorf("stock: variants of activity %s: %w: the variant list changed during the call", activity, ErrUnavailable)
}

// reserveVariant decides req, a Reserve of one variant, as a one-line
// reserve_lines.lua call: the variant's own checks, then the activity's
// per-user limit over all its variants.
func (d *Deductor) reserveVariant(ctx context.Context, parent string, req Request) (unitReply, error) {
	rs, err := d.linesCall(ctx, parent, []Request{req})
	if err != nil {
		return unitReply{}, err
	}
	return rs[0], nil
}

// linesCall decides reqs, lines of distinct variants of activity parent for
// one user, all or nothing in one reserve_lines.lua call, and judges each
// line's fence. A line that was not tried (another line was refused) has
// a zero res.Status.
func (d *Deductor) linesCall(ctx context.Context, parent string, reqs []Request) ([]unitReply, error) {
	vi := d.varsOf(parent)
	n := len(reqs)
	units := make([]unit, n)
	for i, r := range reqs {
		units[i] = plain(r.Activity)
	}
	for range 3 {
		if vi.list != "" {
			// A variant not in the list (dropped by a Reset to fewer
			// variants) is not for sale, whatever keys it left: the script
			// checks that the list is still this one.
			for i, r := range reqs {
				if _, v, _ := strings.Cut(r.Activity, string(variantSep)); !vi.has[v] {
					out := make([]unitReply, n)
					out[i].res = Result{Status: NotLoaded}
					return out, nil
				}
			}
		}
		ks := make([]string, 0, 1+4*n+len(vi.buyers))
		ks = append(ks, varsKey(d.o.prefix, parent))
		sts := make([]*actState, n)
		sns := make([]fenceSnap, n)
		for i, u := range units {
			kl := d.keyList(u)
			ks = append(ks, kl[0], kl[1], kl[2], kl[3])
			sts[i], sns[i] = d.snapOf(u)
		}
		ks = append(ks, vi.buyers...)
		args := make([]any, 0, 4+2*n)
		args = append(args, n, len(vi.buyers), vi.list, reqs[0].User)
		for _, r := range reqs {
			args = append(args, r.ReservationID)
		}
		for _, r := range reqs {
			args = append(args, r.Qty)
		}
		vals, err := reserveLinesScript.Run(ctx, d.rdb, ks, args...).Slice()
		if err != nil {
			return nil, classify("reserve", err)
		}
		if len(vals) != 2 {
			return nil, badReply("reserve", "%d values, want 2", len(vals))
		}
		code, ok := vals[0].(int64)
		if !ok {
			return nil, badReply("reserve", "code of type %T", vals[0])
		}
		switch varsCode(code) {
		case varsLearn:
			list, ok := vals[1].(string)
			if !ok {
				return nil, badReply("reserve", "list of type %T", vals[1])
			}
			if list == "" {
				d.forgetVars(parent)
				out := make([]unitReply, n)
				for i := range out {
					out[i].res = Result{Status: NotLoaded}
				}
				return out, nil
			}
			vi = d.learnVars(parent, list)
			continue
		case varsDecided:
		default:
			return nil, badReply("reserve", "status code %d", code)
		}
		rs, ok := vals[1].([]any)
		if !ok || len(rs) != n {
			return nil, badReply("reserve", "%T for %d lines", vals[1], n)
		}
		out := make([]unitReply, n)
		var errs error
		for i, x := range rs {
			v, ok := x.([]any)
			if !ok || len(v) == 0 {
				return nil, badReply("reserve", "line reply of type %T", x)
			}
			if c, ok := v[0].(int64); ok && reserveCode(c) == reserveNotTried {
				continue
			}
			r, vd, err := d.judge(reqs[i], units[i], &sts[i], sns[i], v)
			d.act(ctx, units[i], vd)
			if err != nil && errs == nil {
				errs = err
			}
			out[i] = r
		}
		return out, errs
	}
	return nil, fmt.Errorf("stock: reserve activity %s: %w: its variant list changed during the call", parent, ErrUnavailable)
}

// variantLoad refuses a variant's activity string given to Load or Reset:
// a variant is loaded with its activity ([Activity.Variants]).
func variantLoad(id string) error {
	if _, ok := parentOf(id); ok {
		return fmt.Errorf("%w: load variant %s with its activity (Activity.Variants)", ErrInvalidArgument, showID(id))
	}
	return nil
}
