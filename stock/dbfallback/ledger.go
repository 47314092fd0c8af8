package dbfallback

import (
	"context"
	"fmt"

	"github.com/seckillkit/seckill/stock"
)

// Lookup returns the reservation row of reservationID in activity, and false
// when there is none (or it belongs to another activity). Use it after an
// uncertain outcome. State is [stock.Held], [stock.Freed], or
// [stock.Tombstone] for a Release that came first; times are the Store
// clock's.
func (s *Store) Lookup(ctx context.Context, activity, reservationID string) (stock.Reservation, bool, error) {
	if err := checkActivity(activity); err != nil {
		return stock.Reservation{}, false, err
	}
	if err := validateID(reservationID); err != nil {
		return stock.Reservation{}, false, err
	}
	r, found, err := s.lookup(s.db.WithContext(ctx), reservationID)
	if err != nil {
		return stock.Reservation{}, false, fmt.Errorf("dbfallback: lookup %q: %w", reservationID, err)
	}
	if !found || r.activity != activity {
		return stock.Reservation{}, false, nil
	}
	return r.reservation(), true, nil
}

// Reservations returns one page of the activity's held reservations, in
// reservation ID order (byte order): start with cursor "" and pass the returned
// cursor back until it is "". count is the page size (default 100 when
// <= 0, at most 10,000). A reconciler counts these against its orders and
// against the Redis ledger ([Store.Overlap]); released rows and tombstones
// are not returned. A sale in sizes has no reservations of its own: list
// each size's ("<sale>/<size>").
func (s *Store) Reservations(ctx context.Context, activity, cursor string, count int) ([]stock.Reservation, string, error) {
	if err := checkActivity(activity); err != nil {
		return nil, "", err
	}
	if len(cursor) > maxIDBytes {
		return nil, "", fmt.Errorf("dbfallback: %w: cursor of %d bytes", stock.ErrInvalidArgument, len(cursor))
	}
	switch {
	case count <= 0:
		count = 100
	case count > 10000:
		count = 10000
	}
	rows, err := s.db.WithContext(ctx).Raw("SELECT "+rowColumns+" FROM "+s.resv+
		" WHERE activity_id = ? AND state = ? AND request_id > ? ORDER BY request_id LIMIT ?",
		activity, stateHeld, cursor, count).Rows()
	if err != nil {
		return nil, "", fmt.Errorf("dbfallback: reservations of activity %s: %w", activity, err)
	}
	defer rows.Close()
	var out []stock.Reservation
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, "", fmt.Errorf("dbfallback: reservations of activity %s: %w", activity, err)
		}
		out = append(out, r.reservation())
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("dbfallback: reservations of activity %s: %w", activity, err)
	}
	next := ""
	if len(out) == count {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// Ledger is the read side of the Redis ledger that [Store.Overlap] needs;
// *stock.Deductor implements it.
type Ledger interface {
	Lookup(ctx context.Context, activity, reservationID string) (stock.Reservation, bool, error)
}

// Overlap returns the reservations held in this Store whose reservation ID is
// also held in the Redis ledger: one request holding units in both stores.
// That happens when a Redis call timed out after its script had run (the
// Deductor then asked the fallback) or when a request reserved here is
// retried after Redis came back. No unit is oversold (the two stores never
// share units), but the request holds twice what it asked for. After an
// outage, the reconciler releases the copy in this Store for each one
// ([Store.Release]; the order keeps the Redis reservation), then drains.
// While the Redis activity is frozen its ledger may have lost entries, so
// Overlap fails with [stock.ErrFrozen] (from the ledger's Lookup) until the
// rebuild.
func (s *Store) Overlap(ctx context.Context, ledger Ledger, activity string) ([]stock.Reservation, error) {
	if ledger == nil {
		return nil, fmt.Errorf("dbfallback: overlap: nil ledger")
	}
	var out []stock.Reservation
	cursor := ""
	for {
		page, next, err := s.Reservations(ctx, activity, cursor, 500)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			rr, ok, err := ledger.Lookup(ctx, activity, r.ID)
			if err != nil {
				return nil, fmt.Errorf("dbfallback: overlap: %w", err)
			}
			if ok && rr.State == stock.Held {
				out = append(out, r)
			}
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

func (r row) reservation() stock.Reservation {
	out := stock.Reservation{ID: r.id, User: r.user, Qty: r.qty, ReservedAt: fromMillis(r.createdMs)}
	switch {
	case r.state == stateHeld:
		out.State = stock.Held
	case r.tombstone():
		out.State = stock.Tombstone
	default:
		out.State = stock.Freed
		out.ReleasedAt = fromMillis(r.releaseMs)
	}
	return out
}

// Held returns the units user holds in activity's pool (reservations in
// state held), like [stock.Deductor.Held] for Redis: a caller that must know
// whether a buyer holds anything asks both stores. For a sale in sizes the
// sale's own ID sums the buyer's units over all its sizes; a size's ID
// ("<sale>/<size>") gives that size's.
func (s *Store) Held(ctx context.Context, activity, user string) (int64, error) {
	if err := checkActivity(activity); err != nil {
		return 0, err
	}
	if err := checkID(stock.ErrInvalidArgument, "user ID", user); err != nil {
		return 0, err
	}
	db := s.db.WithContext(ctx)
	n, err := s.held(db, activity, user)
	if _, isSize := saleOf(activity); err == nil && !isSize {
		var all int64 // over the sizes of a sale in sizes; 0 for a plain activity
		all, err = s.saleHeld(db, activity, user)
		n += all
	}
	if err != nil {
		return 0, fmt.Errorf("dbfallback: held: %w", err)
	}
	return n, nil
}
