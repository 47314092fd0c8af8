package handoff

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
)

// Route says how [Submitter.Submit] accepted a message.
type Route int

// Routes of an accepted message.
const (
	RouteNone     Route = iota // not accepted
	RouteKafka                 // published to Kafka
	RouteFallback              // stored by the fallback (outbox); a relay publishes it later
)

// String returns "none", "kafka" or "fallback".
func (r Route) String() string {
	switch r {
	case RouteKafka:
		return "kafka"
	case RouteFallback:
		return "fallback"
	default:
		return "none"
	}
}

// Submitter is the write path after a successful reservation: publish to
// Kafka; if that fails, store the message with the [Fallback] (an outbox
// row); if that fails too, release the reservation through the [order.Releaser]
// and tell the caller to retry ([ErrRetry]). Pass a [Fence] as the
// releaser: a publish that reported an error may still have reached Kafka,
// and only a fenced release keeps that message from deducting a unit that
// was given back. Safe for concurrent use.
type Submitter struct {
	pub Publisher
	fb  Fallback
	rel order.Releaser
	o   options
}

// NewSubmitter returns a submitter. Options: [WithResults] (record QUEUED),
// [WithLogger], [WithClock], [WithObserver].
func NewSubmitter(pub Publisher, fb Fallback, rel order.Releaser, opts ...SubmitterOption) (*Submitter, error) {
	if pub == nil || fb == nil || rel == nil {
		return nil, fmt.Errorf("%w: NewSubmitter needs a publisher, a fallback and a releaser", order.ErrInvalidConfig)
	}
	o, err := buildOptions(opts, SubmitterOption.applySubmitter)
	if err != nil {
		return nil, err
	}
	return &Submitter{pub: pub, fb: fb, rel: rel, o: o}, nil
}

// Submit hands m on. A Version of 0, 1 or 2 becomes [order.MessageVersion] (the
// version [order.Message.Encode] writes), an empty MsgID a random one, a zero CreatedAt now. It returns the route on success.
// When both Kafka and the fallback fail it releases the reservation (on a
// context that ignores ctx's cancellation) and returns an error wrapping
// [ErrRetry], joined with the release error if the release failed too (the
// reconcile.Reconciler settles that one). An invalid message is an error wrapping
// [order.ErrInvalidMessage] (an invalid user or activity ID: [order.ErrInvalidID]);
// nothing is released for it.
func (s *Submitter) Submit(ctx context.Context, m order.Message) (accepted Route, err error) {
	released := false
	if s.o.observer != nil {
		start := time.Now()
		defer func() { s.observeSubmit(ctx, start, m, accepted, released, err) }()
	}
	if m.Version >= 0 && m.Version < order.MessageVersion {
		m.Version = order.MessageVersion
	}
	if m.MsgID == "" {
		m.MsgID = newMsgID()
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.o.clock.Now()
	}
	if err := m.Validate(); err != nil {
		return RouteNone, err
	}
	route := RouteKafka
	perr := s.pub(ctx, m)
	if perr != nil {
		// The fallback gets its own chance even if ctx is done: the
		// reservation is already taken and must end somewhere.
		ferr := s.fb(context.WithoutCancel(ctx), m)
		if ferr != nil {
			rerr := s.release(context.WithoutCancel(ctx), m)
			released = rerr == nil
			err := fmt.Errorf("%w: publish: %v; fallback: %v", ErrRetry, perr, ferr)
			if rerr != nil {
				err = errors.Join(err, fmt.Errorf("order: release %s: %w", m.ReservationID, rerr))
			}
			if rerr == nil && s.o.results != nil {
				// Only once the release is done: an unreleased reservation is
				// still the buyer's, and a retry with its ID resubmits it.
				_ = s.o.setResult(context.WithoutCancel(ctx), order.Result{Activity: m.ActivityID, User: m.UserID,
					Status: order.StatusFailed, Reason: ReasonHandoff, ReservationID: m.ReservationID})
			}
			return RouteNone, err
		}
		route = RouteFallback
	}
	if s.o.results != nil {
		if err := s.o.setResult(ctx, order.Result{Activity: m.ActivityID, User: m.UserID, Status: order.StatusQueued,
			ReservationID: m.ReservationID}); err != nil {
			s.o.logger.WarnContext(ctx, "order: queued result not written", "err", err)
		}
	}
	return route, nil
}

// releaseForer is implemented by [Fence]: a release that records the buyer
// and the reason with the fence row.
type releaseForer interface {
	ReleaseFor(ctx context.Context, r ReleaseRequest) error
}

// release gives m's reservation back after a failed hand-off. The publish
// may have reached Kafka although it reported an error, so the release must
// be fenced: with a [Fence] as the releaser, a message that did get through
// is answered FAILED when consumed and deducts nothing; when the fence
// cannot be written (the database is down too) nothing is released and the
// reconcile.Reconciler settles the reservation later.
func (s *Submitter) release(ctx context.Context, m order.Message) error {
	if f, ok := s.rel.(releaseForer); ok {
		return f.ReleaseFor(ctx, ReleaseRequest{Activity: m.ActivityID, User: m.UserID,
			ReservationID: m.ReservationID, Reason: ReasonHandoff, Lines: m.Lines})
	}
	if len(m.Lines) == 0 {
		return s.rel.Release(ctx, m.ActivityID, m.ReservationID)
	}
	var errs []error // a cart: each line's reservation
	for i, l := range m.Lines {
		errs = append(errs, s.rel.Release(ctx, l.ActivityID, m.ReservationID+"#"+strconv.Itoa(i)))
	}
	return errors.Join(errs...)
}

// observeSubmit reports one Submit; callers check s.o.observer.
func (s *Submitter) observeSubmit(ctx context.Context, start time.Time, m order.Message, route Route, released bool, err error) {
	e := observe.Event{Stage: StageSubmit, Outcome: observe.Error, Activity: m.ActivityID, Err: err}
	switch {
	case route == RouteKafka:
		e.Outcome = "kafka"
	case route == RouteFallback:
		e.Outcome = "outbox"
	case errors.Is(err, order.ErrInvalidMessage), errors.Is(err, order.ErrUnsupportedVersion):
		e.Outcome = "invalid"
	case released:
		e.Outcome = "released"
	}
	e.Duration = time.Since(start)
	if e.Outcome != observe.Error {
		e.Err = nil
	}
	s.o.observer.Observe(ctx, e)
}

// newMsgID returns a random 128-bit hex message ID.
func newMsgID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
