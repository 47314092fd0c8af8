package stock

import (
	"fmt"
	"time"
)

// Activity describes one sale to load into Redis.
type Activity struct {
	// ID of the activity: 1..MaxIDLen bytes of [A-Za-z0-9._@+-] (see
	// ValidID); a numeric ID is given as strconv.FormatInt(id, 10).
	ID string
	// Stock is the number of units on sale, in [0, MaxQuantity].
	Stock int64
	// PerUserLimit is how many units one buyer may hold, in [0,
	// MaxQuantity]; 0 means 1.
	PerUserLimit int64
	// Start and End bound the sale, checked on Redis TIME with millisecond
	// precision: a Reserve is accepted when Start <= now < End. A zero Start
	// means "open as soon as loaded", a zero End means "no end". When both
	// are set End must be after Start.
	Start, End time.Time
	// TTL is how long the keys live after End (after loading when End is
	// zero); zero means 24 hours. Keep it longer than the order
	// payment window so Release still finds the ledger.
	TTL time.Duration
	// Shards splits the stock over this many sub-ledgers, each in its own
	// Redis Cluster slot, so that one hot sale is served by several Redis
	// cores (see "Sharding" in the package doc). 0 or 1: one ledger, the
	// un-sharded layout; at most 64. Every loader of an activity must
	// give the same value (Load is set-if-absent: the first layout stays).
	Shards int
	// NoRebuy is the re-buy policy. false (the default): a buyer whose
	// reservation was released (an order cancelled or expired) may buy
	// again, up to PerUserLimit units held at once. true: every unit a
	// buyer ever reserved in this sale counts against PerUserLimit, even
	// after its release, so a cancelled buyer cannot buy again beyond the
	// limit. Stored in Redis at Load (and Reset, Rebuild); the units ever
	// reserved are kept per buyer in "<prefix>{a:<id>}:ever", written only
	// when NoRebuy is set.
	NoRebuy bool
	// Variants splits the sale into keyed sub-stocks (sizes, colours),
	// each with its own counter, per-user limit and ledger, all under the
	// activity's hash tag (see "Variants" in the package doc). Empty (the
	// default): one counter, today's layout and path. With variants,
	// Stock must be 0 or their sum, PerUserLimit caps a buyer's units over
	// all variants, and Shards must be 0 or 1. Reserve a variant with
	// Request.Activity = VariantOf(ID, variant ID).
	Variants []Variant
}

// noRebuyArg is the script argument of a.NoRebuy.
func (a Activity) noRebuyArg() string {
	if a.NoRebuy {
		return "1"
	}
	return "0"
}

func (a Activity) validate() error {
	if err := checkActivity(a.ID); err != nil {
		return err
	}
	if err := a.validateVariants(); err != nil {
		return err
	}
	switch {
	case a.Stock < 0:
		return fmt.Errorf("%w: stock %d must be >= 0", ErrInvalidArgument, a.Stock)
	case a.Stock > MaxQuantity:
		return fmt.Errorf("%w: stock %d exceeds 2^53-1, the largest integer a Lua number holds exactly", ErrInvalidArgument, a.Stock)
	case a.PerUserLimit < 0:
		return fmt.Errorf("%w: per-user limit %d must be >= 0", ErrInvalidArgument, a.PerUserLimit)
	case a.PerUserLimit > MaxQuantity:
		return fmt.Errorf("%w: per-user limit %d exceeds 2^53-1, the largest integer a Lua number holds exactly", ErrInvalidArgument, a.PerUserLimit)
	case a.Shards < 0 || a.Shards > maxShards:
		return fmt.Errorf("%w: shards %d must be in [0, %d]", ErrInvalidArgument, a.Shards, maxShards)
	case a.TTL < 0:
		return fmt.Errorf("%w: TTL %v must be >= 0", ErrInvalidArgument, a.TTL)
	case !a.Start.IsZero() && !a.End.IsZero() && !a.End.After(a.Start):
		return fmt.Errorf("%w: end %v must be after start %v", ErrInvalidArgument, a.End, a.Start)
	case !a.Start.IsZero() && a.Start.UnixMilli() <= 0, !a.End.IsZero() && a.End.UnixMilli() <= 0:
		return fmt.Errorf("%w: start and end must be after 1970", ErrInvalidArgument)
	}
	return nil
}

func (a Activity) limit() int64 {
	if a.PerUserLimit == 0 {
		return 1
	}
	return a.PerUserLimit
}

// shards returns the number of ledgers: 1 for the un-sharded layout.
func (a Activity) shards() int { return max(a.Shards, 1) }

// split returns how many of total units each of n shards starts with: an
// even split, the first total mod n shards one more.
func split(total int64, n int) []int64 {
	out := make([]int64, n)
	for k := range out {
		out[k] = total / int64(n)
		if int64(k) < total%int64(n) {
			out[k]++
		}
	}
	return out
}

func (a Activity) ttl() time.Duration {
	if a.TTL == 0 {
		return defaultTTL
	}
	return a.TTL
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMilli(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
