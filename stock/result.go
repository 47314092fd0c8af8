package stock

import (
	"strconv"
	"time"
)

// Request asks for Qty units of Activity for User. ReservationID identifies the
// reservation: it is the idempotency key (a retry with the same ID never
// deducts twice) and the ID later given to [Deductor.Release].
type Request struct {
	Activity      string // activity ID: 1..MaxIDLen bytes of [A-Za-z0-9._@+-] (see ValidID)
	User          string // buyer ID, same rule as Activity
	Qty           int64  // units, > 0 and <= the activity's per-user limit (<= MaxQuantity)
	ReservationID string // unique per reservation, 1..128 bytes
}

// Status is the business outcome of a Reserve.
type Status uint8

// Outcomes of [Deductor.Reserve]. Only Reserved holds stock.
const (
	// Reserved: the units are held for the buyer and recorded in the ledger
	// under the reservation ID.
	Reserved Status = iota + 1
	// SoldOut: fewer than Qty units remain.
	SoldOut
	// LimitReached: the buyer would hold more than the per-user limit.
	LimitReached
	// NotStarted: Redis time is before the activity's start.
	NotStarted
	// Ended: Redis time is at or after the activity's end.
	Ended
	// NotLoaded: the activity's keys are not in Redis (not loaded yet,
	// expired or reset).
	NotLoaded
	// Released: this reservation ID was reserved and has since been released, or
	// was released before its Reserve arrived (a tombstone). Nothing is held
	// and nothing was deducted by this call.
	Released
	// Frozen: the activity is frozen: answer busy / retry later, NOT sold
	// out. Redis lost or rolled back its data (this call detected it, or an
	// earlier one froze the activity), or an operator froze it; new
	// reservations wait for [Deductor.Rebuild] or [Deductor.Unfreeze].
	// Nothing was deducted by this call, and the sold-out cache is not set.
	Frozen
	// Paused: an operator paused the activity ([Deductor.Pause]): answer
	// "paused, come back later", NOT sold out. New reservations wait for
	// [Deductor.Resume]; a replay of an existing reservation still answers
	// from the ledger, and Release keeps working. Nothing was deducted by
	// this call, and the sold-out cache is not set. A process that had
	// already learnt the activity is sold out keeps answering SoldOut
	// (Local) without asking Redis: sold out still answers sold out.
	Paused
)

var statusNames = [...]string{"unknown", "reserved", "sold out", "limit reached", "not started", "ended", "not loaded", "released", "frozen", "paused"}

// statusOutcomes are the observer outcomes of the statuses (snake case).
var statusOutcomes = [...]string{"error", "reserved", "sold_out", "limit_reached", "not_started",
	"ended", outcomeNotLoaded, "released", "frozen", "paused"}

// String returns a lower-case name such as "sold out".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Result is the outcome of [Deductor.Reserve].
type Result struct {
	// Status is the outcome; only Reserved holds stock.
	Status Status
	// Remaining is the activity's stock after this call (0 for NotLoaded and
	// for an in-process refusal; for Frozen, what Redis holds, which may be
	// wrong; for Paused, what Redis holds). For a sharded activity: the stock of the buyer's shard, but on
	// SoldOut the units the borrowing step saw in all shards, including
	// units moving between shards (0 only when every shard is empty).
	Remaining int64
	// Held is the quantity the buyer holds in this activity after the call,
	// when Redis computed it (Reserved, LimitReached, and replays).
	Held int64
	// Limit is the activity's per-user limit, when Redis was consulted and the
	// activity is loaded.
	Limit int64
	// ReservedAt is the Redis time of the reservation (Reserved, Released
	// replays), or the Redis time of the decision for window denials and
	// SoldOut; zero when unknown.
	ReservedAt time.Time
	// Replayed is true when the outcome was read back from the ledger: the
	// same reservation ID had been reserved (or released) before.
	Replayed bool
	// Local is true when the process refused in-process because it had
	// learnt the activity is sold out; Redis was not called.
	Local bool
	// Fallback is true when the result came from the configured fallback ([WithFallback])
	// because Redis was unavailable.
	Fallback bool
}

// Err returns nil for Reserved and a denial sentinel otherwise
// ([ErrSoldOut], [ErrLimitReached], [ErrNotStarted], [ErrEnded],
// [ErrNotLoaded], [ErrReleased], [ErrFrozen], [ErrPaused]), for callers
// that prefer errors.
func (r Result) Err() error {
	switch r.Status {
	case Reserved:
		return nil
	case SoldOut:
		return ErrSoldOut
	case LimitReached:
		return ErrLimitReached
	case NotStarted:
		return ErrNotStarted
	case Ended:
		return ErrEnded
	case NotLoaded:
		return ErrNotLoaded
	case Released:
		return ErrReleased
	case Frozen:
		return ErrFrozen
	case Paused:
		return ErrPaused
	}
	return ErrBadReply
}

// ReleaseStatus is the outcome of [Deductor.Release].
type ReleaseStatus uint8

// Outcomes of [Deductor.Release].
const (
	// ReleaseDone: the units went back to stock and the buyer's held quantity
	// was reduced, now, by this call.
	ReleaseDone ReleaseStatus = iota + 1
	// ReleaseDuplicate: the reservation had already been released (or
	// tombstoned); nothing changed.
	ReleaseDuplicate
	// ReleaseUnknown: no reservation with this ID exists. Nothing was given
	// back; a tombstone was written so that a Reserve with this ID arriving
	// later deducts nothing and answers [Released].
	ReleaseUnknown
	// ReleaseNotLoaded: the activity is not loaded; nothing changed.
	ReleaseNotLoaded
	// ReleaseRebuilt: answered by [Deductor.ReleaseReserved] only: the
	// ledger has no entry for the ID and the activity's copy in Redis was
	// created (Load, Reset, Rebuild) after ReservedBy, so its stock was
	// counted without the reservation; nothing changed, no tombstone.
	ReleaseRebuilt

	// releaseAbsent: a probe of one shard did not find the reservation ID
	// (release.lua code 5); never returned by Release.
	releaseAbsent
)

var releaseNames = [...]string{"unknown", "released", "duplicate", "unknown request", "not loaded", "rebuilt"}

// String returns a lower-case name such as "released".
func (s ReleaseStatus) String() string {
	if int(s) < len(releaseNames) {
		return releaseNames[s]
	}
	return "ReleaseStatus(" + strconv.Itoa(int(s)) + ")"
}

// ReleaseResult is the outcome of [Deductor.Release].
type ReleaseResult struct {
	Status ReleaseStatus
	// Qty is the reservation's quantity (given back now when Status is
	// ReleaseDone).
	Qty int64
	// User is the reservation's buyer ("" when unknown).
	User string
	// Remaining is the activity's stock after the call (for a sharded
	// activity, the stock of the reservation's shard).
	Remaining int64
}

// State is the state of a ledger entry.
type State uint8

// Ledger entry states.
const (
	// Held: the units are reserved for the buyer.
	Held State = iota + 1
	// Freed: the units were reserved and later released.
	Freed
	// Tombstone: released before any Reserve with this ID arrived; a later
	// Reserve with this ID deducts nothing.
	Tombstone
)

var stateNames = [...]string{"unknown", "held", "freed", "tombstone"}

// String returns a lower-case name such as "held".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Reservation is one ledger entry, as read by [Deductor.Reservations] and
// [Deductor.Lookup], and one live reservation given to [Deductor.Rebuild]
// (ID, User, Qty, ReservedAt; State zero or Held). Times are Redis
// times.
type Reservation struct {
	ID         string
	User       string // "" for a tombstone
	Qty        int64  // 0 for a tombstone
	State      State
	ReservedAt time.Time // the tombstone's time for a tombstone
	ReleasedAt time.Time // zero unless State is Freed
}

// Stats is a snapshot of one activity, read by [Deductor.Stats].
type Stats struct {
	Loaded    bool
	Remaining int64
	// Total is the stock at load time plus the units added and minus the
	// units withdrawn by [Deductor.Adjust] since. For a sharded activity it
	// is the sum of the shards' totals when they are loaded (a shard's is
	// the units it started with plus its own adjustment steps).
	Total         int64
	Limit         int64 // per-user limit
	Start, End    time.Time
	ExpiresAt     time.Time
	Buyers        int64 // buyers currently holding units
	LedgerEntries int64 // ledger entries, including freed ones and tombstones
	Frozen        bool  // new reservations answer Frozen
	Paused        bool  // new reservations answer Paused (Deductor.Pause)
	NoRebuy       bool  // Activity.NoRebuy: released units still count against the per-user limit
	// Epoch names this copy of the activity's state (new at each Load,
	// Reset, Rebuild); Seq counts the reservations, releases and tombstones
	// written to it. Both are 0 for state loaded before they existed. For a
	// sharded activity Epoch is the directory's and Seq the sum over the
	// shards (which also count transfer steps).
	Epoch, Seq int64

	// Shards holds one snapshot per shard of a sharded activity, in shard
	// order (nil when it is not sharded). In a shard's entry, Total is the
	// units the shard started with, Start, End and Limit are the activity's,
	// and the transfer fields are the shard's own. The activity's Loaded is
	// true when its directory and every shard are loaded; Frozen (Paused)
	// when any shard is frozen (paused); Remaining, Buyers, LedgerEntries and the transfer
	// fields are sums (a tombstone is written in every shard, so it counts
	// once per shard).
	Shards []Stats
	// TransfersIn and TransfersOut are the units received from and given to
	// other shards (net of refunds). 0 when not sharded.
	TransfersIn, TransfersOut int64
	// InTransfer is the activity's units taken out of a shard by a
	// transfer that is neither credited to its recipient nor refunded yet
	// (TransfersOut - TransfersIn; 0 in a shard's entry and when not
	// sharded). At every quiet moment Remaining + the held units +
	// InTransfer = Total.
	InTransfer int64
	// PendingTransfers counts transfer records not yet settled at their
	// donor (a crash between the steps leaves them; some may already be
	// credited). [Deductor.SettleTransfers] finishes them.
	PendingTransfers int64
}
