package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxLines is the most lines of one [Lines] request.
const maxLines = 64

// groupTTL is how long a limit group's keys live after its last take.
const groupTTL = 30 * 24 * time.Hour

// Line is one line of a multi-line reservation ([Deductor.ReserveLines]):
// Qty units of Activity (an activity ID, or a variant: [VariantOf]).
type Line struct {
	Activity string
	Qty      int64 // > 0, <= the line's per-user limits
	// Group, when not empty, names a limit group (a [ValidID], for example
	// the product's ID): the line's units count against GroupLimit, the
	// most units one buyer may hold over every line of that group, in all
	// the sales that sell it. Lines of one group give the same GroupLimit.
	Group      string
	GroupLimit int64 // >= 1 when Group is set
}

// Lines asks for several lines for one buyer, all or nothing
// ([Deductor.ReserveLines]). Line i is recorded in its activity's ledger
// under "<ReservationID>#<i>": an ordinary ledger entry with the
// buyer and the Redis time, which Release, Lookup, Reservations and the
// reconciler see like any other.
type Lines struct {
	User          string
	ReservationID string // the cart's; printable ASCII, and room for "#<i>" within the ID limit
	Lines         []Line
}

// LinesResult is the outcome of [Deductor.ReserveLines].
type LinesResult struct {
	// Status is Reserved when every line is held; otherwise the refusal of
	// line Line (SoldOut, LimitReached, Paused, Released, …), and nothing
	// is held by this cart.
	Status Status
	// Line is the index of the refused line, -1 when Reserved.
	Line int
	// Group is true when the refusal is the line's limit group's:
	// LimitReached (the buyer would exceed GroupLimit), Released (the
	// line's allowance was given back before) or Frozen (Redis lost or
	// rolled back the group's data: retry once [Deductor.RebuildGroup] ran).
	Group bool
	// Replayed is true when every line was reserved before (a retry).
	Replayed bool
	// Lines holds each line's Result when Reserved (a refused attempt
	// fills the refused line's, and those decided before it).
	Lines []Result
}

// lineID returns the reservation ID of line i of a multi-line
// reservation: "<reservationID>#<i>".
func lineID(reservationID string, i int) string {
	return reservationID + "#" + strconv.Itoa(i)
}

func (d *Deductor) validateLines(req Lines) error {
	if err := checkID(ErrInvalidArgument, "user ID", req.User); err != nil {
		return err
	}
	n := len(req.Lines)
	if n == 0 || n > maxLines {
		return fmt.Errorf("%w: %d lines, want 1 to %d", ErrInvalidArgument, n, maxLines)
	}
	if !ValidReservationID(req.ReservationID) || len(lineID(req.ReservationID, n-1)) > d.o.maxIDBytes {
		return fmt.Errorf("%w: reservation ID %s: printable ASCII, with room for %q within %d bytes",
			ErrInvalidArgument, strconv.Quote(req.ReservationID), "#"+strconv.Itoa(n-1), d.o.maxIDBytes)
	}
	seen := make(map[string]bool, n)
	limits := map[string]int64{}
	for i, l := range req.Lines {
		if err := checkActivity(l.Activity); err != nil {
			return fmt.Errorf("line %d: %w", i, err)
		}
		switch {
		case seen[l.Activity]:
			return fmt.Errorf("%w: line %d: activity %s is in two lines", ErrInvalidArgument, i, l.Activity)
		case l.Qty <= 0 || l.Qty > MaxQuantity:
			return fmt.Errorf("%w: line %d: qty %d must be in [1, 2^53-1]", ErrInvalidArgument, i, l.Qty)
		}
		seen[l.Activity] = true
		if l.Group == "" {
			continue
		}
		if err := checkID(ErrInvalidArgument, "limit group", l.Group); err != nil {
			return fmt.Errorf("line %d: %w", i, err)
		}
		if l.GroupLimit < 1 || l.GroupLimit > MaxQuantity {
			return fmt.Errorf("%w: line %d: group limit %d must be in [1, 2^53-1]", ErrInvalidArgument, i, l.GroupLimit)
		}
		if g, ok := limits[l.Group]; ok && g != l.GroupLimit {
			return fmt.Errorf("%w: line %d: group %s with limits %d and %d", ErrInvalidArgument, i, l.Group, g, l.GroupLimit)
		}
		limits[l.Group] = l.GroupLimit
	}
	return nil
}

// steps splits the lines into the steps of the protocol, in a fixed order
// (that of each step's first line): the variant lines of one activity are
// one step (one script, one slot); every other line is a step of its own.
func steps(req Lines) [][]int {
	var out [][]int
	at := map[string]int{}
	for i, l := range req.Lines {
		parent, ok := parentOf(l.Activity)
		if !ok {
			out = append(out, []int{i})
			continue
		}
		if k, ok := at[parent]; ok {
			out[k] = append(out[k], i)
			continue
		}
		at[parent] = len(out)
		out = append(out, []int{i})
	}
	return out
}

// errStopped is what ReserveLines returns when the test hook stops it.
var errStopped = errors.New("stock: stopped by the test hook")

// ReserveLines reserves every line of req for req.User, all or nothing,
// idempotent by req.ReservationID (line i under "<ReservationID>#<i>"). The protocol:
//
//  1. The lines with a limit group take their allowances first, all the
//     lines of one group in one call of the group's own script and slot
//     (group_take.lua, all or nothing, idempotent by each line's ID), the
//     groups in the order of their first line: a buyer never holds more
//     than GroupLimit over the group, whatever runs concurrently, and two
//     concurrent carts of one buyer never both hold part of their lines
//     in one group and refuse each other.
//  2. The lines are reserved one step at a time in a fixed order: all the
//     variant lines of one activity in one script call (all or nothing,
//     one slot), any other line as Reserve reserves it.
//  3. On a refusal, the steps already reserved are released and the
//     allowances given back (on a context without cancel), so nothing is
//     held; the result names the refused line.
//
// What it guarantees: no oversell and every per-variant, per-activity and
// group cap, at every moment; once ReserveLines returns a result, either
// every line is held or none is. A retry with the same ID replays what
// was reserved and continues; after a refusal that had reserved a step or
// taken an allowance it answers Released (a new attempt takes a new ID),
// after one that wrote nothing it is decided afresh. An
// error (Redis failed, or a kill between steps) can leave the first steps
// held: retry with the same ID, or call [Deductor.ReleaseLines], or leave
// them to the reconciler, which sees ordinary ledger entries with no order
// and releases them; a group allowance is given back by ReleaseLines or,
// once the reconciler has run, by [Deductor.SweepGroup], so until then it
// errs on the buyer's side (it refuses, never over-allows). Between
// steps, other buyers can see the first lines held.
//
// Use it for a cart; for one line, Reserve is the same without the suffix.
func (d *Deductor) ReserveLines(ctx context.Context, req Lines) (LinesResult, error) {
	if err := d.validateLines(req); err != nil {
		return LinesResult{}, err
	}
	n := len(req.Lines)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = lineID(req.ReservationID, i)
	}
	results := make([]Result, n)
	var taken, takenNow []int // the group lines taken (now or by an earlier attempt of the cart), and by this call
	names, idx := groupsOf(req)
	for k, group := range names {
		gl := make([]groupLine, len(idx[k]))
		for j, i := range idx[k] {
			gl[j] = groupLine{id: ids[i], activity: req.Lines[i].Activity, qty: req.Lines[i].Qty}
		}
		code, at, per, err := d.groupTake(ctx, group, req.User, req.Lines[idx[k][0]].GroupLimit, gl)
		if err != nil {
			return LinesResult{}, err
		}
		for j, i := range idx[k] {
			switch per[j] {
			case groupTaken:
				taken, takenNow = append(taken, i), append(takenNow, i)
			case groupBefore:
				taken = append(taken, i)
			}
		}
		switch code {
		case groupTaken, groupBefore:
			continue
		case groupConflict:
			i := idx[k][at]
			return LinesResult{}, fmt.Errorf("%w: line %d (%s) in limit group %s", ErrIDConflict, i, ids[i], group)
		}
		st := LimitReached
		switch code {
		case groupReleased:
			st = Released
		case groupFrozen, groupTakenFrozen:
			// Only this call's takes go back: an earlier attempt's may
			// belong to a cart that became an order, and the rebuild
			// leaves a given-back line alone.
			st, taken = Frozen, takenNow
		}
		err = d.undoLines(ctx, req, ids, nil, taken)
		return LinesResult{Status: st, Line: idx[k][at], Group: true, Lines: results}, err
	}
	var done []int
	for k, step := range steps(req) {
		if k > 0 && d.linesStep != nil && d.linesStep(k) {
			return LinesResult{}, errStopped
		}
		rs, err := d.reserveStep(ctx, req, ids, step)
		if err != nil {
			return LinesResult{}, err
		}
		refused := -1
		for j, i := range step {
			results[i] = rs[j]
			if refused < 0 && rs[j].Status != Reserved && rs[j].Status != 0 {
				refused = i
			}
		}
		if refused >= 0 {
			err := d.undoLines(ctx, req, ids, done, taken)
			return LinesResult{Status: results[refused].Status, Line: refused, Lines: results}, err
		}
		done = append(done, step...)
	}
	replayed := true
	for _, r := range results {
		replayed = replayed && r.Replayed
	}
	return LinesResult{Status: Reserved, Line: -1, Replayed: replayed, Lines: results}, nil
}

// reserveStep reserves the lines step of req: the variant lines of one
// activity in one reserve_lines.lua call, or one other line as Reserve
// does (sharding, coalescing and the fence included).
func (d *Deductor) reserveStep(ctx context.Context, req Lines, ids []string, step []int) ([]Result, error) {
	reqs := make([]Request, len(step))
	for j, i := range step {
		l := req.Lines[i]
		reqs[j] = Request{Activity: l.Activity, User: req.User, Qty: l.Qty, ReservationID: ids[i]}
	}
	parent, ok := parentOf(reqs[0].Activity)
	if !ok {
		res, _, err := d.reserve(ctx, reqs[0])
		return []Result{res}, err
	}
	rs, err := d.linesCall(ctx, parent, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(rs))
	for j, r := range rs {
		out[j] = r.res
	}
	return out, nil
}

// undoLines releases the lines done and gives back the allowances taken,
// on a context without cancel: the compensation of a refused cart.
func (d *Deductor) undoLines(ctx context.Context, req Lines, ids []string, done, taken []int) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, i := range done {
		if _, err := d.Release(ctx, req.Lines[i].Activity, ids[i]); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", i, err))
		}
	}
	for _, i := range taken {
		if _, err := d.groupGive(ctx, req.Lines[i].Group, ids[i]); err != nil {
			errs = append(errs, fmt.Errorf("line %d, group %s: %w", i, req.Lines[i].Group, err))
		}
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		d.o.logger.WarnContext(ctx, "stock: undo of a refused multi-line reservation failed; ReleaseLines finishes it",
			"request", req.ReservationID, "err", err)
		return err
	}
	return nil
}

// ReleaseLines gives back every line of req (as Release does, tombstoning
// a line never reserved, so its late reservation deducts nothing) and every
// line's limit-group allowance, exactly once however often it is called.
// It is the cancellation of a cart, and what finishes a ReserveLines cut
// short. It returns each line's ReleaseResult; the error joins the lines'
// failures (retry: it is idempotent).
func (d *Deductor) ReleaseLines(ctx context.Context, req Lines) ([]ReleaseResult, error) {
	if err := d.validateLines(req); err != nil {
		return nil, err
	}
	out := make([]ReleaseResult, len(req.Lines))
	var errs []error
	for i, l := range req.Lines {
		id := lineID(req.ReservationID, i)
		r, err := d.Release(ctx, l.Activity, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", i, err))
		}
		out[i] = r
		if l.Group != "" {
			if _, err := d.groupGive(ctx, l.Group, id); err != nil {
				errs = append(errs, fmt.Errorf("line %d, group %s: %w", i, l.Group, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// ExtendLines extends the hold of every line of req once, by by: each
// line's ledger time (ReservedAt, from which the order pipeline counts the
// hold's expiry) moves forward by by, so a reconciler that releases holds
// older than its payment window gives them that much longer. It reports
// the earliest ReservedAt of the lines after the call and whether this
// call extended any. A second extension changes nothing: it returns the
// extended time and false, as does a retry of the first (the hold is
// extended once either way). A line not held (released, never reserved,
// another buyer's) makes it return the zero time and false; the lines
// before it stay extended. One script call per line.
func (d *Deductor) ExtendLines(ctx context.Context, req Lines, by time.Duration) (time.Time, bool, error) {
	if err := d.validateLines(req); err != nil {
		return time.Time{}, false, err
	}
	if by < time.Millisecond {
		return time.Time{}, false, fmt.Errorf("%w: extension %v must be at least 1ms", ErrInvalidArgument, by)
	}
	var earliest int64
	extended := false
	for i, l := range req.Lines {
		k, err := d.holdKeys(ctx, l.Activity, req.User)
		if err != nil {
			return time.Time{}, false, err
		}
		vals, err := extendScript.Run(ctx, d.rdb, []string{k.meta, k.ledger, k.ext}, lineID(req.ReservationID, i),
			req.User, by.Milliseconds()).Slice()
		if err != nil {
			return time.Time{}, false, classify("extend", err)
		}
		n, err := ints("extend", vals, 2)
		if err != nil {
			return time.Time{}, false, err
		}
		switch extendCode(n[0]) {
		case extendNow:
			extended = true
		case extendBefore:
		case extendNotHeld, extendOther:
			return time.Time{}, false, nil
		default:
			return time.Time{}, false, badReply("extend", "status code %d", n[0])
		}
		if earliest == 0 || n[1] < earliest {
			earliest = n[1]
		}
	}
	return fromMilli(earliest), extended, nil
}

// holdKeys returns the keys of the ledger that holds user's reservations
// of activity: the activity's (or variant's), or the buyer's shard's.
func (d *Deductor) holdKeys(ctx context.Context, activity, user string) (keys, error) {
	if _, ok := parentOf(activity); ok {
		return d.keys(activity), nil
	}
	l := d.layoutOf(activity)
	if l == nil {
		kind, n, err := d.readLayout(ctx, activity)
		if err != nil {
			return keys{}, err
		}
		if kind != metaDirectory {
			return d.keys(activity), nil
		}
		if l, err = d.learn(activity, n); err != nil {
			return keys{}, err
		}
	}
	return l.keys[shardOf(user, l.n)], nil
}

// groupLine is one line of a cart in a limit group, as groupTake takes it.
type groupLine struct {
	id, activity string
	qty          int64
}

// groupTake takes user's allowances for lines in group, all or nothing.
// It returns the call's code, the index in lines of the line that decided
// a refusal (-1 when none did), and per line groupTaken (taken by this
// call), groupBefore (taken before, also on a refusal: the caller gives it
// back) or 0. A reply that reveals (or follows) a loss of the group's data
// answers groupFrozen, or groupTakenFrozen when the call took lines: they
// are the caller's to give back.
func (d *Deductor) groupTake(ctx context.Context, group, user string, limit int64, lines []groupLine) (groupCode, int, []groupCode, error) {
	st := d.groups.get(group)
	sn := st.snap()
	args := make([]any, 0, 4+3*len(lines))
	args = append(args, user, limit, groupTTL.Milliseconds(), newEpoch())
	for _, l := range lines {
		args = append(args, l.id, l.qty, l.activity)
	}
	vals, err := groupTakeScript.Run(ctx, d.rdb, groupKeys(d.o.prefix, group), args...).Slice()
	if err != nil {
		return 0, 0, nil, classify("group", err)
	}
	if len(vals) != 8+len(lines) {
		return 0, 0, nil, badReply("group", "%d values, want %d", len(vals), 8+len(lines))
	}
	n, err := ints("group", vals[:8], 8)
	if err != nil {
		return 0, 0, nil, err
	}
	per := make([]groupCode, len(lines))
	for k, v := range vals[8:] {
		f, ok := v.(int64)
		if !ok || (f != 0 && f != int64(groupTaken) && f != int64(groupBefore)) {
			return 0, 0, nil, badReply("group", "line %d's flag %v", k, v)
		}
		per[k] = groupCode(f)
	}
	c, at := groupCode(n[0]), int(n[1])
	switch c {
	case groupTaken, groupBefore:
		at = -1
	case groupOver, groupReleased, groupConflict, groupFrozen:
		if at < 0 || at >= len(lines) {
			return 0, 0, nil, badReply("group", "code %d at line %d of %d", c, at, len(lines))
		}
	default:
		return 0, 0, nil, badReply("group", "status code %d", n[0])
	}
	if d.observeGroup(ctx, group, st, sn, fenceReply{epoch: n[3], seq: n[4], exp: n[5], born: n[6], origin: n[7]}) && c != groupConflict {
		if c == groupTaken {
			return groupTakenFrozen, firstTaken(per), per, nil
		}
		if at < 0 {
			at = 0
		}
		return groupFrozen, at, per, nil
	}
	return c, at, per, nil
}

// firstTaken is the index of the first line per says this call took.
func firstTaken(per []groupCode) int {
	for k, f := range per {
		if f == groupTaken {
			return k
		}
	}
	return 0
}

// groupsOf lists req's limit groups in the order of their first line, each
// with the indexes of its lines.
func groupsOf(req Lines) (names []string, idx [][]int) {
	for i, l := range req.Lines {
		if l.Group == "" {
			continue
		}
		k := slices.Index(names, l.Group) // a cart has at most maxLines lines
		if k < 0 {
			k = len(names)
			names, idx = append(names, l.Group), append(idx, nil)
		}
		idx[k] = append(idx[k], i)
	}
	return names, idx
}

// groupGive gives back the allowance line ID id took in group, once. The
// give-back stands whatever its fence reply reveals (a loss freezes the
// group for takes).
func (d *Deductor) groupGive(ctx context.Context, group, id string) (giveBackCode, error) {
	st := d.groups.get(group)
	sn := st.snap()
	vals, err := groupGiveScript.Run(ctx, d.rdb, groupKeys(d.o.prefix, group), id, groupTTL.Milliseconds(), newEpoch()).Slice()
	if err != nil {
		return 0, classify("group", err)
	}
	n, err := ints("group", vals, 6)
	if err != nil {
		return 0, err
	}
	c := giveBackCode(n[0])
	switch c {
	case giveBackNow, giveBackBefore, giveBackTombstone:
	default:
		return 0, badReply("group", "status code %d", n[0])
	}
	d.observeGroup(ctx, group, st, sn, fenceReply{epoch: n[1], seq: n[2], exp: n[3], born: n[4], origin: n[5]})
	return c, nil
}

// RebuildGroup takes again, in group's Redis state, the allowances of the
// group's live lines that it lost, returns how many it took, and lifts the
// group's freeze. The group's data-loss fence (see "Redis data loss" in
// the package doc) freezes the group when a Deductor sees its data lost or
// rolled back — a failover to a replica that missed acknowledged takes,
// the keys wiped —: its new takes answer [Frozen] (LinesResult.Group
// true) until this runs. Run it then, or when the activities' fence fired,
// or the reconciler found orphans, or on a schedule beside
// [Deductor.SweepGroup].
//
// live holds the group's live lines as the database holds them, by the
// line's activity (an activity ID or a variant's): each [Reservation]'s ID
// is the line's reservation ID ("<cart>#<i>"), User and Qty its buyer and
// units (State and the times are not read). Pass every activity of the
// group: the freeze is lifted at the end. A line the group's ledger knows
// in any state (taken, given back, tombstoned) is left as it is; one it
// lacks is taken for its buyer without the limit check (the database held
// the cap when it became an order). A line cancelled after the database
// was read is not taken again: its give-back left a record (a tombstone
// when the take was lost). Idempotent; safe beside buyers, ReleaseLines
// and the sweep, which keeps a held line's allowance. One script call per
// 500 lines of an activity (and one more when live is empty), under the
// group's hash tag; the last starts a new epoch of the group's fence.
func (d *Deductor) RebuildGroup(ctx context.Context, group string, live map[string][]Reservation) (int, error) {
	if err := checkID(ErrInvalidArgument, "limit group", group); err != nil {
		return 0, err
	}
	acts := make([]string, 0, len(live))
	for a, rs := range live {
		if err := checkActivity(a); err != nil {
			return 0, err
		}
		for _, r := range rs {
			if err := d.validateID(r.ID); err != nil {
				return 0, err
			}
			if err := checkID(ErrInvalidArgument, "user ID", r.User); err != nil {
				return 0, err
			}
			if r.Qty <= 0 || r.Qty > MaxQuantity {
				return 0, fmt.Errorf("%w: line %s: qty %d must be in [1, 2^53-1]", ErrInvalidArgument, r.ID, r.Qty)
			}
		}
		acts = append(acts, a)
	}
	sort.Strings(acts)
	type call struct {
		activity string
		lines    []Reservation
	}
	const batch = 500
	var calls []call
	for _, a := range acts {
		for rs := live[a]; len(rs) > 0; {
			n := min(batch, len(rs))
			calls = append(calls, call{a, rs[:n]})
			rs = rs[n:]
		}
	}
	if len(calls) == 0 {
		calls = append(calls, call{})
	}
	st := d.groups.get(group)
	taken := 0
	for i, c := range calls {
		var epoch int64
		if i == len(calls)-1 {
			epoch = newEpoch()
		}
		args := make([]any, 0, 3+3*len(c.lines))
		args = append(args, groupTTL.Milliseconds(), c.activity, epoch)
		for _, r := range c.lines {
			args = append(args, r.ID, r.User, r.Qty)
		}
		sn := st.snap()
		vals, err := groupRebuildScript.Run(ctx, d.rdb, groupKeys(d.o.prefix, group), args...).Slice()
		if err != nil {
			return taken, classify("group rebuild", err)
		}
		n, err := ints("group rebuild", vals, 6)
		if err != nil {
			return taken, err
		}
		taken += int(n[0])
		if epoch != 0 {
			st.observe(sn, fenceReply{epoch: n[1], seq: n[2], exp: n[3], born: n[4], origin: n[5]})
		}
	}
	return taken, nil
}

// SweepGroup gives back the allowances of group whose line no longer holds
// a unit, and returns how many it gave back. It is the limit group's
// reconciler, to run after the activities' reconciler: a cart cut short (a
// kill -9 between its steps, an undo that failed) leaves allowances taken
// that only ReleaseLines would give back, and the reconciler, which
// releases the cut cart's held lines, knows nothing of groups.
//
// For each allowance taken more than olderThan ago (by Redis's clock;
// olderThan must exceed the longest a ReserveLines can run — its steps,
// each bounded by the client's timeouts —, for example the reconciler's
// grace), it looks up the
// line's ledger entry ("<id>#<i>" in the line's activity, recorded by the
// take): a held line keeps its allowance (an order's, or one the
// reconciler has not released yet); a released line's is given back; a
// line never reserved is released first, which tombstones it (a step of
// the cart arriving later reserves nothing, and its ReserveLines is
// refused and undone), then its allowance is given back. A line of an
// activity that cannot be read now (frozen, not loaded) is left for the
// next sweep, and named in the error. Allowances taken before this
// version (no activity recorded) are left alone. Idempotent; safe beside
// buyers, ReleaseLines and another sweep.
func (d *Deductor) SweepGroup(ctx context.Context, group string, olderThan time.Duration) (int, error) {
	if err := checkID(ErrInvalidArgument, "limit group", group); err != nil {
		return 0, err
	}
	if olderThan < 0 {
		return 0, fmt.Errorf("%w: olderThan %v must not be negative", ErrInvalidArgument, olderThan)
	}
	key := groupKeys(d.o.prefix, group)[1:2]
	given := 0
	var errs []error
	cursor := scanEnd
	for {
		vals, err := groupScanScript.Run(ctx, d.rdb, key, cursor, idsPage).Slice()
		if err != nil {
			return given, classify("group sweep", err)
		}
		if len(vals) != 3 {
			return given, badReply("group sweep", "%d values, want 3", len(vals))
		}
		next, ok1 := vals[0].(string)
		now, ok2 := vals[1].(int64)
		page, ok3 := vals[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(page)%2 != 0 {
			return given, badReply("group sweep", "reply of types %T, %T, %T", vals[0], vals[1], vals[2])
		}
		before := now - olderThan.Milliseconds()
		kv := make([]string, len(page))
		for i, v := range page {
			if kv[i], ok1 = v.(string); !ok1 {
				return given, badReply("group sweep", "entry of type %T", v)
			}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			id, rec := kv[i], kv[i+1]
			parts := strings.SplitN(rec, ":", 5)
			if len(parts) != 5 || parts[2] != "R" {
				continue // given back, a tombstone, or no activity recorded
			}
			at, err := strconv.ParseInt(parts[3], 10, 64)
			if err != nil || at > before {
				continue
			}
			activity := parts[4]
			r, found, err := d.Lookup(ctx, activity, id)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("line %s of %s: %w", id, activity, err))
				continue
			case found && r.State == Held:
				continue
			case !found:
				rr, err := d.Release(ctx, activity, id)
				if err != nil {
					errs = append(errs, fmt.Errorf("line %s of %s: %w", id, activity, err))
					continue
				}
				if rr.Status == ReleaseDone && rr.Qty > 0 {
					// The line was reserved between the lookup and the
					// release: a ReserveLines still running after
					// olderThan. It is released now; say so.
					errs = append(errs, fmt.Errorf("line %s of %s: reserved while the sweep ran (olderThan %v is shorter than a ReserveLines ran); released", id, activity, olderThan))
				}
			}
			code, err := d.groupGive(ctx, group, id)
			if err != nil {
				errs = append(errs, fmt.Errorf("line %s: %w", id, err))
				continue
			}
			if code == giveBackNow {
				given++
			}
		}
		if next == scanEnd {
			break
		}
		cursor = next
	}
	return given, errors.Join(errs...)
}
