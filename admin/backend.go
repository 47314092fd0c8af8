package admin

import (
	"context"
	"time"
)

// Backend is what the admin API operates on: the sale's Redis state, its
// database, the outbox and the risk blacklist. The [Handler] validates every
// ID before calling it (1..[MaxIDLen] bytes of [A-Za-z0-9._@+-]), writes the
// audit log around each mutation and maps errors: a Backend returns an error
// wrapping [ErrNotFound], [ErrConflict], [ErrInvalidArgument] or
// [ErrUnavailable] for an answer the operator should see as such; any other
// error is reported as "internal" (its text is logged, never sent).
//
// Mutations return the state before and after, read in the same atomic step
// as the change where the store allows it, so the audit row records what the
// action did rather than what a separate read saw.
//
// Stats, Pause, Resume, TopUp and Withdraw are also served for one size
// of a sale in sizes (activities/{activity}/variants/{variant}/…): their
// activity is then "<activity>/<variant>" (stock.VariantOf), each size its
// own counter and row.
//
// Implementations must be safe for concurrent use.
type Backend interface {
	// Load loads (or reloads) an activity: stock, per-user limit, window.
	Load(ctx context.Context, p LoadParams) (Change, error)
	// Stats returns the activity's Redis and database counters.
	Stats(ctx context.Context, activity string) (Stats, error)
	// Reservations lists the buyer's reservations in the activity's ledger
	// (none is an empty list, not an error).
	Reservations(ctx context.Context, activity, user string) ([]Reservation, error)
	// Story gathers what every store knows about one reservation; a part no
	// store has is nil. ErrNotFound only when no store knows it at all.
	Story(ctx context.Context, activity, reservation string) (Story, error)
	// Pause stops new reservations (buyers get a "paused" answer, not "sold
	// out"); pausing a paused activity changes nothing and is no error.
	Pause(ctx context.Context, activity string) (Change, error)
	// Resume undoes Pause; resuming a running activity is no error.
	Resume(ctx context.Context, activity string) (Change, error)
	// TopUp adds n > 0 units to the activity's stock, as a ledger entry.
	TopUp(ctx context.Context, activity string, n int64) (Change, error)
	// Withdraw takes n > 0 unsold units off sale, as a ledger entry; more
	// than what remains is ErrConflict and withdraws nothing.
	Withdraw(ctx context.Context, activity string, n int64) (Change, error)
	// Reconcile compares the Redis ledger with the database. A dry run
	// releases nothing and lists in Release what is due; an apply releases
	// only the reservations of p.Plan (a dry run's Release) that are still
	// due, and no other.
	Reconcile(ctx context.Context, p ReconcileParams) (ReconcileReport, error)
	// OutboxStats counts the outbox rows not yet delivered.
	OutboxStats(ctx context.Context) (OutboxStats, error)
	// OutboxRetry puts the given FAILED outbox rows back to PENDING; IDs
	// that are not FAILED are left alone and not counted.
	OutboxRetry(ctx context.Context, ids []int64) (OutboxRetryResult, error)
	// Ban bans a subject (a ban only grows: see the risk package).
	Ban(ctx context.Context, p BanParams) (BanChange, error)
	// Unban lifts a ban; lifting a ban that does not exist is no error
	// (Before is nil).
	Unban(ctx context.Context, kind BanKind, id string) (BanChange, error)
	// Refund refunds the activity's PAID order p.OrderNo; its units go
	// where p.Restock says. The change is the order before and after. An
	// order refunded before, or not paid, is ErrConflict and changes
	// nothing; an order the activity does not have is ErrNotFound.
	Refund(ctx context.Context, p RefundParams) (OrderChange, error)
	// Bans returns a page of the active bans of kind (user, ip or device),
	// in lexical order of their IDs: up to limit (1..[MaxBansPage]) bans
	// with an ID after after ("" starts at the beginning), and the cursor
	// of the next page, "" at the end. A page may hold fewer than limit
	// bans before the end.
	Bans(ctx context.Context, kind BanKind, after string, limit int) ([]Ban, string, error)
}

// LoadParams is the input of [Backend.Load].
type LoadParams struct {
	Activity     string    `json:"activity"`
	Stock        int64     `json:"stock"`          // units on sale, >= 0
	PerUserLimit int64     `json:"per_user_limit"` // units one buyer may hold; 0 means 1
	Start        time.Time `json:"start,omitzero"` // zero: open as soon as loaded
	End          time.Time `json:"end,omitzero"`   // zero: no end; else after Start
	// Variants split the activity into keyed sub-stocks (sizes, colours),
	// each sold on its own; Stock is then their sum. Empty: one stock.
	Variants []Variant `json:"variants,omitempty"`
}

// Variant is one variant of an activity loaded with [LoadParams.Variants]:
// its ID ([ValidID], unique in the activity), its units and how many of
// them one buyer may hold (0: the activity's PerUserLimit).
type Variant struct {
	ID           string `json:"id"`
	Stock        int64  `json:"stock"`
	PerUserLimit int64  `json:"per_user_limit,omitempty"`
}

// ActivityState is an activity's control state, as recorded before and
// after a mutation.
type ActivityState struct {
	Activity     string    `json:"activity"`
	Loaded       bool      `json:"loaded"`
	Paused       bool      `json:"paused"`
	Remaining    int64     `json:"remaining"`      // unsold units in Redis
	Total        int64     `json:"total"`          // initial stock + top-ups − withdrawals
	PerUserLimit int64     `json:"per_user_limit"` //
	Start        time.Time `json:"start,omitzero"`
	End          time.Time `json:"end,omitzero"`
}

// Change is the answer of a mutation of an activity.
type Change struct {
	Before ActivityState `json:"before"`
	After  ActivityState `json:"after"`
}

// Stats is [Backend.Stats]' answer.
type Stats struct {
	Activity string     `json:"activity"`
	Redis    RedisStats `json:"redis"`
	DB       DBStats    `json:"db"`
}

// RedisStats is the activity's state in Redis.
type RedisStats struct {
	Loaded       bool      `json:"loaded"`
	Paused       bool      `json:"paused"`
	Remaining    int64     `json:"remaining"`    // unsold units
	Held         int64     `json:"held"`         // units held by live reservations
	Reservations int64     `json:"reservations"` // ledger entries
	Buyers       int64     `json:"buyers"`       // buyers holding units
	Total        int64     `json:"total"`        // initial + top-ups − withdrawals
	PerUserLimit int64     `json:"per_user_limit"`
	Start        time.Time `json:"start,omitzero"`
	End          time.Time `json:"end,omitzero"`
}

// DBStats is the activity's state in the database.
type DBStats struct {
	Found      bool  `json:"found"`       // the activity row exists
	Stock      int64 `json:"stock"`       // the row's stock column
	TotalStock int64 `json:"total_stock"` // the row's total_stock column
	Orders     int64 `json:"orders"`      // live (created + paid) orders
	SoldUnits  int64 `json:"sold_units"`  // their quantity
}

// Reservation is one entry of an activity's reservation ledger.
type Reservation struct {
	ID   string `json:"id"`
	User string `json:"user"`
	Qty  int64  `json:"qty"`
	// State is the ledger's state ("held", "freed", "tombstone" in the
	// reference service). In a [Story] it is followed by what the order
	// makes of it, e.g. "held (order PAID: consumed)": Redis keeps a sold
	// unit held for good.
	State      string    `json:"state"`
	ReservedAt time.Time `json:"reserved_at,omitzero"`
	ReleasedAt time.Time `json:"released_at,omitzero"`
}

// Story is everything the stores know about one reservation. Each part is
// nil when its store has nothing.
type Story struct {
	Activity    string       `json:"activity"`
	Reservation string       `json:"reservation"`
	Ledger      *Reservation `json:"ledger"` // the Redis ledger entry
	Outbox      *OutboxRow   `json:"outbox"` // the order message's outbox row
	Result      *Result      `json:"result"` // the result published to the buyer
	Order       *Order       `json:"order"`  // the DB order row
	Dedup       *Dedup       `json:"dedup"`  // the consumer's dedup row
}

// OutboxRow is the outbox row of a reservation's order message.
type OutboxRow struct {
	ID        int64     `json:"id"`
	Status    string    `json:"status"` // PENDING, SENT, FAILED
	Attempts  int64     `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	SentAt    time.Time `json:"sent_at,omitzero"`
}

// Result is the outcome published for a reservation.
type Result struct {
	Status  string    `json:"status"` // e.g. SUCCESS, FAILED
	Reason  string    `json:"reason,omitempty"`
	OrderNo string    `json:"order_no,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// Order is a reservation's order row.
type Order struct {
	OrderNo   string    `json:"order_no"`
	User      string    `json:"user"`
	Qty       int64     `json:"qty"`
	Status    string    `json:"status"`
	Restock   string    `json:"restock,omitempty"` // a refunded order's: sale, shop or none
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// RefundParams is the input of [Backend.Refund] (and the body of its
// route: {"restock": …}).
type RefundParams struct {
	Activity string `json:"-"`
	OrderNo  string `json:"-"`
	// Restock is where the units go: "sale" (back on sale), "shop" (to
	// the shop's own inventory) or "none" (they stay sold). Required.
	Restock string `json:"restock"`
}

// OrderChange is the answer of [Backend.Refund]: the order before and
// after.
type OrderChange struct {
	Before Order `json:"before"`
	After  Order `json:"after"`
}

// Dedup is the consumer's dedup record of a reservation's message.
type Dedup struct {
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// ReconcileParams is the input of [Backend.Reconcile].
type ReconcileParams struct {
	Activity string
	// DryRun compares only: it releases nothing.
	DryRun bool
	// Plan, on an apply, is the reservations the operator's dry run listed
	// for release: the backend releases those still due (no order, past
	// the grace period, no message pending) and leaves the others (Skipped
	// in the report). A reservation that became due after the dry run is
	// not in the plan and is not released: the next dry run shows it.
	Plan []string
}

// ReconcileReport is [Backend.Reconcile]'s answer.
type ReconcileReport struct {
	Activity      string `json:"activity"`
	DryRun        bool   `json:"dry_run"`
	Reservations  int64  `json:"reservations"`   // ledger entries
	ReservedUnits int64  `json:"reserved_units"` // their quantity
	LiveOrders    int64  `json:"live_orders"`
	SoldUnits     int64  `json:"sold_units"`
	DBStock       int64  `json:"db_stock"`
	TotalStock    int64  `json:"total_stock"`
	// Drift is ReservedUnits − SoldUnits: units the Redis ledger holds
	// that no live order accounts for (negative: live orders the ledger
	// does not know). 0 when the stores agree.
	Drift     int64 `json:"drift"`
	Conserved bool  `json:"conserved"` // DBStock + SoldUnits == TotalStock
	// Release lists the reservations without an order that a dry run would
	// release, or that this apply released (successfully: a failed release
	// is in Failed).
	Release []string `json:"release"`
	InGrace []string `json:"in_grace"` // too young to judge; left alone
	Pending []string `json:"pending"`  // message still queued; left alone
	Orphans []string `json:"orphans"`  // live orders the ledger does not know
	// Skipped (apply only): reservations of the plan that were no longer
	// due (an order arrived, a message is pending, or they are gone) and
	// were left alone.
	Skipped []string `json:"skipped"`
	// Failed (apply only): reservations of the plan whose release failed;
	// still held. A new dry run lists them again.
	Failed []string `json:"failed"`
	// ReleaseErrors counts releases that failed: len(Failed).
	ReleaseErrors int64 `json:"release_errors"`
}

// OutboxStats counts the outbox rows not yet delivered.
type OutboxStats struct {
	Pending       int64     `json:"pending"`
	Failed        int64     `json:"failed"`
	OldestPending time.Time `json:"oldest_pending,omitzero"`
}

// OutboxRetryResult is [Backend.OutboxRetry]'s answer.
type OutboxRetryResult struct {
	Requeued int64       `json:"requeued"` // FAILED rows now PENDING
	Before   OutboxStats `json:"before"`
	After    OutboxStats `json:"after"`
}

// BanKind is the kind of subject a ban applies to.
type BanKind string

// Kinds of banned subject.
const (
	BanUser   BanKind = "user"
	BanIP     BanKind = "ip"
	BanDevice BanKind = "device"
)

// BanParams is the input of [Backend.Ban].
type BanParams struct {
	Kind   BanKind `json:"kind"`
	ID     string  `json:"id"`     // a user or device ID, or an IP address (canonical form)
	Reason string  `json:"reason"` // a short code, 1..64 bytes of the ID alphabet
	// Duration of the ban; 0 lets the backend choose (its escalation).
	Duration time.Duration `json:"-"`
}

// Ban is an active ban.
type Ban struct {
	Kind      BanKind   `json:"kind"`
	ID        string    `json:"id"`
	Reason    string    `json:"reason"`
	Until     time.Time `json:"until,omitzero"` // zero when permanent
	Permanent bool      `json:"permanent"`
}

// BanChange is the answer of Ban and Unban; nil means "no ban".
type BanChange struct {
	Before *Ban `json:"before"`
	After  *Ban `json:"after"`
}
