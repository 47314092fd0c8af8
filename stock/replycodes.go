package stock

// Reply codes of the Lua scripts.
//
// Each script's header (the .lua file next to this one) documents its reply;
// the Go side never compares a reply value with a bare number, only with the
// names below, one typed family per reply. Every constant is written as a
// literal: replycodes_test.go reads this file and every script, and checks
// that the codes a script returns are exactly the ones named for it, so a
// code renumbered, added or dropped on one side only fails the tests.

// replyTrue is the value of a 0/1 field of a reply (replayed, frozen,
// paused) that means yes.
const replyTrue int64 = 1

// minShards is the least number of shards of a sharded activity: a reply
// that answers for a directory carries minShards..maxShards.
const minShards = 2

// scanEnd is the HSCAN cursor that starts a scan, and that ids.lua
// returns when the scan is complete.
const scanEnd = "0"

// isShardCount reports whether n, a reply's number of shards, can be one.
func isShardCount(n int64) bool { return n >= minShards && n <= maxShards }

// metaKind is what a meta key (KEYS[1]) holds: the first value of the
// replies of layout.lua, held.lua, remaining.lua, stats.lua, adjlog.lua and
// probe.lua (absent or loaded only), and the whole reply of freeze.lua
// (which sets its flag only on metaLoaded).
type metaKind int64

const (
	// metaAbsent: nothing there (never loaded, expired, reset away).
	metaAbsent metaKind = 0
	// metaLoaded: the meta of an un-sharded activity, or of one shard: it
	// holds stock.
	metaLoaded metaKind = 1
	// metaDirectory: the directory of a sharded activity; the reply's next
	// value is its number of shards.
	metaDirectory metaKind = 2
)

// ledgerShape is how scan.lua (its third value) and lookup.lua (its
// integer reply) describe the meta key beside the ledger they read, when
// they return no record. A value of minShards or more is the number of
// shards of a sharded activity's directory.
type ledgerShape int64

const (
	// shapeNotLoaded: the meta key holds no stock.
	shapeNotLoaded ledgerShape = -1
	// shapeLoaded: the meta key holds stock (scan.lua; lookup.lua answers
	// nil instead).
	shapeLoaded ledgerShape = 0
	// shapeFrozen (lookup.lua only): the meta key holds stock but is
	// frozen, so an ID missing from its ledger may have been lost.
	shapeFrozen ledgerShape = -2
)

// reserveCode is the first value of a reply of reserve.lua, and of each
// element of the reply of reserve_many.lua.
type reserveCode int64

const (
	reserveReserved     reserveCode = 1  // Reserved
	reserveSoldOut      reserveCode = 2  // SoldOut
	reserveLimitReached reserveCode = 3  // LimitReached
	reserveNotStarted   reserveCode = 4  // NotStarted
	reserveEnded        reserveCode = 5  // Ended
	reserveNotLoaded    reserveCode = 6  // NotLoaded (the rest of the reply is 0 but Redis now)
	reserveReleased     reserveCode = 7  // Released
	reserveFrozen       reserveCode = 8  // Frozen
	reserveDirectory    reserveCode = 9  // KEYS[1] is a directory; remaining is its number of shards
	reservePaused       reserveCode = 10 // Paused
	reserveNotTried     reserveCode = 12 // reserve_lines.lua: would have been reserved, but another line was refused
	reserveOverLimit    reserveCode = -1 // qty above the per-user limit: ErrInvalidArgument
	reserveConflict     reserveCode = -2 // the reservation ID is in the ledger with another user or qty
)

// status is the Status a code decides, false for the codes that decide
// nothing (reserveDirectory), are errors (reserveOverLimit,
// reserveConflict) or are unknown.
func (c reserveCode) status() (Status, bool) {
	switch c {
	case reserveReserved:
		return Reserved, true
	case reserveSoldOut:
		return SoldOut, true
	case reserveLimitReached:
		return LimitReached, true
	case reserveNotStarted:
		return NotStarted, true
	case reserveEnded:
		return Ended, true
	case reserveNotLoaded:
		return NotLoaded, true
	case reserveReleased:
		return Released, true
	case reserveFrozen:
		return Frozen, true
	case reservePaused:
		return Paused, true
	}
	return 0, false
}

// releaseCode is the first value of a reply of release.lua.
type releaseCode int64

const (
	releaseNow       releaseCode = 1 // released by this call: ReleaseDone
	releaseBefore    releaseCode = 2 // released or tombstoned before: ReleaseDuplicate
	releaseTombstone releaseCode = 3 // unknown ID, tombstone written: ReleaseUnknown
	releaseUnloaded  releaseCode = 4 // not loaded: ReleaseNotLoaded
	releaseMiss      releaseCode = 5 // unknown ID in probe mode, nothing written: releaseAbsent
	releaseDirectory releaseCode = 6 // KEYS[1] is a directory; remaining is its number of shards
)

// status is the ReleaseStatus of a code (probe: the call was in probe
// mode), false for releaseDirectory, for releaseMiss outside probe mode and
// for unknown codes.
func (c releaseCode) status(probe bool) (ReleaseStatus, bool) {
	switch c {
	case releaseNow:
		return ReleaseDone, true
	case releaseBefore:
		return ReleaseDuplicate, true
	case releaseTombstone:
		return ReleaseUnknown, true
	case releaseUnloaded:
		return ReleaseNotLoaded, true
	case releaseMiss:
		return releaseAbsent, probe
	}
	return 0, false
}

// writeCode is the first value of a reply of load.lua and of
// directory.lua.
type writeCode int64

const (
	writeDone    writeCode = 1  // written by this call
	writePresent writeCode = 0  // already there: nothing written
	writeExpired writeCode = -1 // end + TTL is already past in Redis time: nothing written
)

// rebuildCode is the first value of a reply of rebuild.lua; nothing is
// written for any code but rebuildDone.
type rebuildCode int64

const (
	rebuildDone      rebuildCode = 1  // rebuilt
	rebuildExpired   rebuildCode = -1 // end + TTL is already past in Redis time
	rebuildLive      rebuildCode = -2 // the meta is present and not frozen
	rebuildChanged   rebuildCode = -3 // the precondition (absent, or frozen with that epoch) does not hold
	rebuildOverTotal rebuildCode = -4 // the live quantities exceed the total
	rebuildOverLimit rebuildCode = -5 // a user would hold more than the limit
	rebuildDuplicate rebuildCode = -6 // a duplicate reservation ID
)

// adjustCode is the first value of a reply of adjust.lua.
type adjustCode int64

const (
	adjustApplied   adjustCode = 1  // applied now, or before (the reply's replayed says which)
	adjustShort     adjustCode = 2  // "exact" withdrawal larger than the stock: nothing written
	adjustPeeked    adjustCode = 3  // "peek" and no entry: nothing written
	adjustNotLoaded adjustCode = 6  // not loaded
	adjustFrozen    adjustCode = 8  // frozen: nothing written
	adjustDirectory adjustCode = 9  // KEYS[1] is a directory; delta is its number of shards
	adjustConflict  adjustCode = -2 // the ID is in the log with another requested delta
	adjustOverflow  adjustCode = -3 // stock or total would exceed 2^53-1
)

// giveCode is the first value of a reply of give.lua (transfer step 1).
type giveCode int64

const (
	giveTaken     giveCode = 1  // qty units taken out of the donor's stock
	giveEmpty     giveCode = 2  // nothing to lend
	giveNotLoaded giveCode = 6  // the donor is not loaded
	giveFrozen    giveCode = 8  // the donor is frozen
	givePaused    giveCode = 10 // the donor is paused
)

// creditCode is the first value of a reply of credit.lua (transfer step 2).
type creditCode int64

const (
	creditApplied creditCode = 1 // applied now
	creditBefore  creditCode = 2 // applied before
	creditVoid    creditCode = 3 // void, now or before: never credited here
	creditStale   creditCode = 4 // recipient not loaded or of another epoch: nothing written
)

// settleCode is the first value of a reply of settle.lua (transfer step 3).
type settleCode int64

const (
	settleGone      settleCode = 0 // no such pending transfer: settled before
	settleApplied   settleCode = 1 // settled as applied
	settleRefunded  settleCode = 2 // void at the recipient: refunded to the donor
	settleNotLoaded settleCode = 4 // the donor is not loaded
)

// varsCode is the first value of a reply of reserve_lines.lua, vstock.lua
// and vheld.lua, which all check the caller's idea of the variant list.
type varsCode int64

const (
	varsLearn   varsCode = 0 // the list is not the caller's: the reply's next value is the list ("" absent)
	varsDecided varsCode = 1 // decided: the reply's next value is the answer
)

// extendCode is the first value of a reply of extend.lua.
type extendCode int64

const (
	extendNow     extendCode = 1  // extended by this call
	extendBefore  extendCode = 2  // extended before: nothing written
	extendNotHeld extendCode = 3  // absent, released or a tombstone: nothing written
	extendOther   extendCode = -2 // held by another user: nothing written
)

// groupCode is the first value of a reply of group_take.lua (groupTaken
// and groupBefore also name each line's flag in the reply).
type groupCode int64

const (
	groupTaken    groupCode = 1  // every line not taken before is taken by this call
	groupBefore   groupCode = 2  // every line was taken before (a retry): nothing written
	groupOver     groupCode = 3  // the group's limit would be exceeded: nothing written
	groupReleased groupCode = 7  // given back (or tombstoned) before: nothing written
	groupConflict groupCode = -2 // the ID is in the group's ledger with another user or qty
	groupFrozen   groupCode = 8  // the group is frozen (a loss was seen): nothing written
)

// giveBackCode is the reply of group_give.lua.
type giveBackCode int64

const (
	giveBackNow       giveBackCode = 1 // given back by this call
	giveBackBefore    giveBackCode = 2 // given back or tombstoned before
	giveBackTombstone giveBackCode = 3 // unknown ID: tombstone written
)
