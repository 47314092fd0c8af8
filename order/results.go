package order

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Status is the state of a purchase as the user sees it.
type Status string

// Statuses of a [Result].
const (
	// StatusNone: nothing known about this (activity, user).
	StatusNone Status = ""
	// StatusQueued: reserved and queued; the order is not written yet.
	StatusQueued Status = "QUEUED"
	// StatusSuccess: the order exists (OrderNo is set).
	StatusSuccess Status = "SUCCESS"
	// StatusFailed: no order; Reason says why and the reservation was released.
	StatusFailed Status = "FAILED"
)

// Reasons of a FAILED [Result] and [Outcome].
const (
	ReasonSoldOut         = "sold_out"         // the DB stock guard refused (Redis/DB drift)
	ReasonDuplicate       = "duplicate"        // the reservation or the (user, activity) already has an order
	ReasonUnknownActivity = "unknown_activity" // no such activity row
	ReasonCancelled       = "cancelled"        // the order was cancelled (unpaid or by request)
)

// Result is the status of one (activity, user), as polled by GET /result or
// pushed by a [Notifier].
type Result struct {
	Activity      int64
	User          int64
	Status        Status
	OrderNo       string // set when Status is SUCCESS
	Reason        string // set when Status is FAILED
	ReservationID string
	At            time.Time
}

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

// ResultsClient is what [Results] needs from Redis: scripts and HGETALL.
// *redis.Client, *redis.ClusterClient and *redis.Ring satisfy it.
type ResultsClient interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// NewResults returns a result store. db may be nil (no fallback).
// Options: [WithKeyPrefix], [WithResultTTL], [WithClock].
func NewResults(rdb ResultsClient, db *gorm.DB, opts ...Option) (*Results, error) {
	if rdb == nil {
		return nil, fmt.Errorf("order: nil redis client")
	}
	o := buildOptions(opts)
	if o.resultTTL <= 0 {
		return nil, fmt.Errorf("order: result TTL must be positive")
	}
	r := &Results{rdb: rdb, db: db, o: o}
	r.get = rdb.HGetAll
	return r, nil
}

// Set records r (r.At defaults to now). A QUEUED status does not overwrite
// a SUCCESS/FAILED of the same reservation.
func (r *Results) Set(ctx context.Context, res Result) error {
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
func (r *Results) SetMany(ctx context.Context, rs []Result) error {
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

// Get returns the status of (activity, user): from Redis, else from the
// database (latest order, else latest FAILED dedup row), else StatusNone.
// A Redis failure falls through to the database; the error is returned
// only when no answer could be found at all.
func (r *Results) Get(ctx context.Context, activity, user int64) (Result, error) {
	m, rerr := r.get(ctx, resultKey(r.o.prefix, activity, user)).Result()
	if rerr == nil && len(m) > 0 {
		ms, _ := strconv.ParseInt(m["at"], 10, 64)
		return Result{Activity: activity, User: user, Status: Status(m["status"]), OrderNo: m["order_no"],
			Reason: m["reason"], ReservationID: m["resv"], At: time.UnixMilli(ms)}, nil
	}
	if rerr != nil && errors.Is(rerr, redis.Nil) {
		rerr = nil
	}
	if r.db == nil {
		if rerr != nil {
			return Result{}, fmt.Errorf("order: get result: %w", rerr)
		}
		return Result{Activity: activity, User: user}, nil
	}
	res, err := resultFromDB(ctx, r.db, activity, user)
	if err != nil {
		return Result{}, errors.Join(err, rerr)
	}
	return res, nil
}

func resultFromDB(ctx context.Context, db *gorm.DB, activity, user int64) (Result, error) {
	var o []Order
	if err := db.WithContext(ctx).Where("user_id = ? AND activity_id = ?", user, activity).
		Order("id DESC").Limit(1).Find(&o).Error; err != nil {
		return Result{}, fmt.Errorf("order: result from db: %w", err)
	}
	if len(o) == 1 {
		res := Result{Activity: activity, User: user, Status: StatusSuccess, OrderNo: o[0].OrderNo,
			ReservationID: o[0].ReservationID, At: o[0].CreatedAt}
		if o[0].Status == OrderCancelled {
			res.Status, res.Reason = StatusFailed, ReasonCancelled
		}
		return res, nil
	}
	var d []Dedup
	if err := db.WithContext(ctx).Where("user_id = ? AND activity_id = ? AND outcome = ?", user, activity, string(StatusFailed)).
		Order("created_at DESC").Limit(1).Find(&d).Error; err != nil {
		return Result{}, fmt.Errorf("order: result from db: %w", err)
	}
	if len(d) == 1 {
		return Result{Activity: activity, User: user, Status: StatusFailed, Reason: d[0].Reason,
			ReservationID: d[0].ReservationID, At: d[0].CreatedAt}, nil
	}
	return Result{Activity: activity, User: user}, nil
}
