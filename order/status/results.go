package status

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/order"
	"gorm.io/gorm"
)

// Results stores statuses in Redis hashes with a TTL and answers from the
// database when Redis has none (expired, evicted or never written). It is
// safe for concurrent use.
//
// Keys: <prefix>{a:<activity>}:result:<user>, see keys.go; written by
// result_set.lua so a late QUEUED never hides the final status of the same
// reservation.
type Results struct {
	rdb redis.Scripter
	get func(ctx context.Context, key string) *redis.MapStringStringCmd
	db  *gorm.DB
	o   options
}

var _ order.ResultWriter = (*Results)(nil)

// NewResults returns a result store. db may be nil (no fallback).
// Options: [WithKeyPrefix], [WithResultTTL], [WithClock], [WithTables],
// [WithLogger].
func NewResults(rdb Client, db *gorm.DB, opts ...ResultsOption) (*Results, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", order.ErrInvalidConfig)
	}
	o, err := buildOptions(opts, ResultsOption.applyResults)
	if err != nil {
		return nil, err
	}
	if o.resultTTL <= 0 {
		return nil, fmt.Errorf("%w: result TTL must be positive", order.ErrInvalidConfig)
	}
	r := &Results{rdb: rdb, db: db, o: o}
	r.get = rdb.HGetAll
	return r, nil
}

// Set records r (r.At defaults to now). A QUEUED status does not overwrite
// a SUCCESS/FAILED of the same reservation. A result whose Activity or
// User is not [order.ValidID] fails with [order.ErrInvalidID] and writes nothing.
func (r *Results) Set(ctx context.Context, res order.Result) error {
	if err := checkPair(res.Activity, res.User); err != nil {
		return err
	}
	if res.At.IsZero() {
		res.At = r.o.clock.Now()
	}
	err := resultSetScript.Run(ctx, r.rdb, []string{resultKey(r.o.prefix, res.Activity, res.User)},
		string(res.Status), res.OrderNo, res.Reason, res.ReservationID,
		res.At.UnixMilli(), r.o.resultTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("order: set result: %w", err)
	}
	return nil
}

// SetMany records many results, up to 16 Redis calls in flight (a script
// per key cannot be pipelined safely). It returns the joined errors.
func (r *Results) SetMany(ctx context.Context, rs []order.Result) error {
	const inFlight = 16
	errs := make([]error, len(rs))
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i := range rs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = r.Set(ctx, rs[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Get returns the status of (activity, user). With a database the answer is
// derived from the database, the truth, and never contradicts it: Redis
// only says which reservation is the buyer's latest and that it is still
// QUEUED while the database has nothing for it yet. A stale entry (a QUEUED
// whose order committed before a crash, a SUCCESS whose order was
// cancelled since) is answered from the database and rewritten. Without an
// entry in Redis the database's latest order, else latest FAILED outcome,
// answers. A Redis failure falls through to the database; the error is
// returned only when no answer could be found at all. Without a database
// (db nil) the Redis entry is the answer.
//
// Cost: one indexed database read per call when a database is configured.
// An activity or user that is not [order.ValidID] fails with [order.ErrInvalidID]
// before Redis or the database is asked.
func (r *Results) Get(ctx context.Context, activity, user string) (order.Result, error) {
	if err := checkPair(activity, user); err != nil {
		return order.Result{}, err
	}
	cached, ok, rerr := r.cached(ctx, activity, user)
	if r.db == nil {
		if rerr != nil {
			return order.Result{}, fmt.Errorf("order: get result: %w", rerr)
		}
		if !ok {
			return order.Result{Activity: activity, User: user}, nil
		}
		return cached, nil
	}
	if ok && cached.ReservationID != "" {
		return r.resolve(ctx, cached)
	}
	res, err := resultFromDB(ctx, r.db, r.o.tables, activity, user)
	if err != nil {
		return order.Result{}, errors.Join(err, rerr)
	}
	return res, nil
}

// ResultQuery names one reservation of a buyer in an activity, for
// [Results.Reservation].
type ResultQuery struct {
	Activity      string
	User          string
	ReservationID string
}

// Reservation returns the status of one reservation of (activity, user):
// from the database when it has an order or an outcome for it, else QUEUED
// when Redis records it as the buyer's queued reservation, else StatusNone
// (unknown here: the caller may ask the stock ledger whether it is held).
// Without a database only Redis answers. Invalid IDs fail as in
// [Results.Get].
func (r *Results) Reservation(ctx context.Context, q ResultQuery) (order.Result, error) {
	activity, user, reservationID := q.Activity, q.User, q.ReservationID
	if err := checkPair(activity, user); err != nil {
		return order.Result{}, err
	}
	cached, ok, rerr := r.cached(ctx, activity, user)
	if !ok || cached.ReservationID != reservationID {
		cached = order.Result{Activity: activity, User: user, ReservationID: reservationID}
	}
	if r.db == nil {
		if rerr != nil {
			return order.Result{}, fmt.Errorf("order: get result: %w", rerr)
		}
		return cached, nil
	}
	return r.resolve(ctx, cached)
}

// cached reads the Redis entry of (activity, user).
func (r *Results) cached(ctx context.Context, activity, user string) (order.Result, bool, error) {
	m, err := r.get(ctx, resultKey(r.o.prefix, activity, user)).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return order.Result{}, false, err
	}
	if len(m) == 0 {
		return order.Result{}, false, nil
	}
	ms, _ := strconv.ParseInt(m["at"], 10, 64)
	return order.Result{Activity: activity, User: user, Status: order.Status(m["status"]), OrderNo: m["order_no"],
		Reason: m["reason"], ReservationID: m["resv"], At: time.UnixMilli(ms)}, true, nil
}

// resolve answers c's reservation from the database, falling back to c when
// the database has nothing for it yet (in flight). A final answer that
// differs from c is written back to Redis, best effort.
func (r *Results) resolve(ctx context.Context, c order.Result) (order.Result, error) {
	res, found, err := resultByReservation(ctx, r.db, r.o.tables, c.Activity, c.User, c.ReservationID)
	if err != nil {
		return order.Result{}, err
	}
	if !found {
		return c, nil
	}
	if res.Status != c.Status || res.Reason != c.Reason || res.OrderNo != c.OrderNo {
		if err := r.Set(context.WithoutCancel(ctx), res); err != nil {
			r.o.logger.WarnContext(ctx, "order: result not repaired in Redis", "err", err)
		}
	}
	return res, nil
}

// resultByReservation reads the order, else the dedup outcome, of one
// reservation of user in activity. A row of another buyer or activity is
// not an answer: a caller never learns about a reservation that is not its
// own.
func resultByReservation(ctx context.Context, db *gorm.DB, t order.Tables, activity, user string, resv string) (order.Result, bool, error) {
	var o []order.Order
	if err := db.WithContext(ctx).Table(t.Order).Where("reservation_id = ? AND user_id = ? AND activity_id = ?", resv, user, activity).
		Limit(1).Find(&o).Error; err != nil {
		return order.Result{}, false, fmt.Errorf("order: result from db: %w", err)
	}
	if len(o) == 1 {
		res, err := withLines(ctx, db, t, o[0])
		return res, err == nil, err
	}
	var d []order.Dedup
	if err := db.WithContext(ctx).Table(t.Dedup).Where("reservation_id = ? AND user_id = ? AND activity_id = ?", resv, user, activity).
		Limit(1).Find(&d).Error; err != nil {
		return order.Result{}, false, fmt.Errorf("order: result from db: %w", err)
	}
	if len(d) == 1 {
		return order.Result{Activity: activity, User: user, Status: order.Status(d[0].Outcome), OrderNo: d[0].OrderNo,
			Reason: d[0].Reason, ReservationID: resv, At: d[0].CreatedAt}, true, nil
	}
	return order.Result{}, false, nil
}

// orderResult is the result of an order row: SUCCESS, or for a cancelled
// order FAILED with ReasonCancelled and its OrderNo (see [order.StatusFailed]).
func orderResult(o order.Order) order.Result {
	res := order.Result{Activity: o.ActivityID, User: o.UserID, Status: order.StatusSuccess, OrderNo: o.OrderNo,
		ReservationID: o.ReservationID, At: o.CreatedAt}
	if o.Status == order.OrderCancelled {
		res.Status, res.Reason = order.StatusFailed, ReasonCancelled
	}
	return res
}

// withLines is orderResult with, for an order with lines, its lines.
func withLines(ctx context.Context, db *gorm.DB, t order.Tables, o order.Order) (order.Result, error) {
	res := orderResult(o)
	if hasLines(o) {
		ls, err := readLines(db.WithContext(ctx), t.Line, o.OrderNo)
		if err != nil {
			return order.Result{}, fmt.Errorf("order: result from db: %w", err)
		}
		res.Lines = ls
	}
	return res, nil
}

func resultFromDB(ctx context.Context, db *gorm.DB, t order.Tables, activity, user string) (order.Result, error) {
	var o []order.Order
	if err := db.WithContext(ctx).Table(t.Order).Where("user_id = ? AND activity_id = ?", user, activity).
		Order("id DESC").Limit(1).Find(&o).Error; err != nil {
		return order.Result{}, fmt.Errorf("order: result from db: %w", err)
	}
	if len(o) == 1 {
		return withLines(ctx, db, t, o[0])
	}
	var d []order.Dedup
	if err := db.WithContext(ctx).Table(t.Dedup).Where("user_id = ? AND activity_id = ? AND outcome = ?", user, activity, string(order.StatusFailed)).
		Order("created_at DESC").Limit(1).Find(&d).Error; err != nil {
		return order.Result{}, fmt.Errorf("order: result from db: %w", err)
	}
	if len(d) == 1 {
		return order.Result{Activity: activity, User: user, Status: order.StatusFailed, Reason: d[0].Reason,
			ReservationID: d[0].ReservationID, At: d[0].CreatedAt}, nil
	}
	return order.Result{Activity: activity, User: user}, nil
}

// checkPair checks the (activity, user) of a result.
func checkPair(activity, user string) error {
	if err := checkID("activity", activity); err != nil {
		return err
	}
	return checkID("user", user)
}
