package stock

import (
	"context"
	"sync"
)

// The limit group's data-loss fence.
//
// A limit group's Redis state (the buyers' allowances and the lines'
// ledger) carries a meta hash like an activity's: an epoch (made by the
// first take or give-back of a group with no meta, origin 1, or by
// RebuildGroup's last call, origin 3), born, and seq (the writes since).
// group_take.lua and group_give.lua return them with every answer, and a
// Deductor judges each reply against what it knew when it sent the call,
// with the activities' rules (actState.observe): a seq that went back in
// the same epoch, an older epoch, or a new epoch made by a take before the
// old one's keys were due to expire is a loss. A loss freezes the group in
// Redis (meta "frozen"): its new takes are refused ([Frozen], LinesResult's
// Group true) until [Deductor.RebuildGroup] takes again the live lines'
// allowances from the database and starts a new epoch. Give-backs, replays
// of taken lines and the sweep keep working while it is frozen.

// groupTakenFrozen is no script's code: taken, by a reply that revealed a
// loss of the group's data. The caller gives it back and answers Frozen.
const groupTakenFrozen groupCode = 1001

// groupStates is a Deductor's knowledge of the limit groups it has taken
// from or given back to. At most maxStates groups: when full it starts
// afresh (forgetting only weakens detection for a while).
type groupStates struct {
	mu sync.Mutex
	m  map[string]*actState
}

// get returns the state of group, creating it.
func (g *groupStates) get(group string) *actState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.m[group]; ok {
		return s
	}
	if g.m == nil || len(g.m) >= maxStates {
		g.m = make(map[string]*actState, 8)
	}
	s := &actState{}
	g.m[group] = s
	return s
}

// observeGroup judges a group script's fence reply against sn, the
// knowledge when the call was sent; on a loss it freezes the group in
// Redis (best effort) and logs it once. It reports whether the reply
// revealed or followed a loss.
func (d *Deductor) observeGroup(ctx context.Context, group string, st *actState, sn fenceSnap, f fenceReply) bool {
	v := st.observe(sn, f)
	if v.reason != "" {
		d.o.logger.ErrorContext(ctx, "stock: ALERT: redis lost or rolled back the limit group's data; its new takes answer frozen until RebuildGroup",
			"group", group, "reason", v.reason)
		if err := groupFreezeScript.Run(context.WithoutCancel(ctx), d.rdb, groupKeys(d.o.prefix, group)[2:]).Err(); err != nil {
			d.o.logger.WarnContext(ctx, "stock: freeze of the limit group after data loss failed", "group", group, "err", err)
		}
	}
	return v.frozen
}
