package waitroom

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Room is the waiting room of every sale it is given: Join, Poll, Admit,
// Done, Verify and the operator's Configure, Start, SetPaused and Stats.
// Its state lives in Redis, so every instance of a service shares one
// queue, one allowance and one cap. A Room is safe for concurrent use.
type Room struct {
	rdb  redis.UniversalClient
	ring atomic.Pointer[credRing]
	opts options

	// batch is how many places one place.lua call writes (tests lower it);
	// afterBatch, when set, runs after each written batch (tests: a crash).
	batch      int
	afterBatch func(written int) error
}

// Config is a sale's room settings ([Room.Configure]).
type Config struct {
	// Start is when the sale opens: entries that join before it form the
	// pre-queue, placed by one shuffle at the start; later entries are
	// placed first in, first out. Required.
	Start time.Time
	// Commitment is [Commit] of the seed the operator reveals to
	// [Room.Start]: published before the sale opens. Required.
	Commitment string
	// Rate is how many users per second [Room.Admit] admits, summed over
	// every instance; 0 means no rate (then MaxActive must be set).
	Rate float64
	// MaxActive caps the users admitted but not yet done (nor lapsed); 0
	// means no cap.
	MaxActive int64
}

// Credential names what [Room.Poll] and [Room.Verify] check: the sale, the
// authenticated user and the ticket or pass the client presented.
type Credential struct {
	Sale  string
	User  string
	Token string // a ticket for Poll, a pass for Verify
}

// State is where an entry stands.
type State string

// States of an entry ([Place].State).
const (
	Waiting  State = "waiting"  // in the queue (or the pre-queue)
	Admitted State = "admitted" // admitted: Place.Pass is its pass
	Done     State = "done"     // admitted and done ([Room.Done])
	Left     State = "left"     // abandoned (did not poll in time), or the admission lapsed
)

// Place is a user's answer to [Room.Poll].
type Place struct {
	State State
	// Position is 1 for the next to be admitted, 2 for the one after, …;
	// 0 when not waiting, and while a pre-queue entry waits for the
	// shuffle at the start.
	Position int64
	// ETA is Position divided by the rate: an estimate, 0 when unknown.
	ETA time.Duration
	// Pass is the signed admission pass (State Admitted), valid until
	// Expiry; "" otherwise.
	Pass   string
	Expiry time.Time
}

// Stats are a room's figures for the operator (admin API, CLI, metrics).
type Stats struct {
	Waiting   int64   // entries not yet admitted or skipped (pre-queue included)
	PreQueue  int64   // entries that joined before the start
	Placed    bool    // the pre-queue is shuffled and written (or empty)
	Admitted  int64   // admitted so far
	Active    int64   // admitted, not done and not lapsed (counted by the cap)
	Abandoned int64   // skipped at admission (did not poll in time)
	Rate      float64 // users per second ([Config].Rate)
	MaxActive int64   // [Config].MaxActive
	Paused    bool
}

// New returns a Room on rdb whose tickets and passes are signed by keys
// (keys[0] signs, every key verifies; see [Room.SetKeys]). Options:
// [WithKeyPrefix], [WithClock], [WithTicketTTL], [WithPassTTL],
// [WithAbandonAfter], [WithObserver]. A nil client, a bad key set or an
// option out of range fails with [ErrInvalidConfig].
func New(rdb redis.UniversalClient, keys []Key, opts ...Option) (*Room, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	r := &Room{rdb: rdb, opts: o, batch: 1000}
	if err := r.SetKeys(keys); err != nil {
		return nil, err
	}
	return r, nil
}

// SetKeys atomically replaces the key set; keys[0] signs from now on and
// every key verifies. Rotate as with token.Signer: add the new key second
// everywhere, move it first, drop the old one once its credentials have
// expired. A bad key set fails with [ErrInvalidConfig] and leaves the
// current keys in place.
func (r *Room) SetKeys(keys []Key) error {
	ring, err := newKeyring(keys)
	if err != nil {
		return err
	}
	r.ring.Store(ring)
	return nil
}

// now is the scripts' "now": 0 (Redis TIME) unless a clock was injected.
func (r *Room) now() int64 {
	if r.opts.clockSet {
		return r.opts.clock.Now().UnixMilli()
	}
	return 0
}

func (r *Room) keys(sale string) (roomKeys, error) {
	if !validID(sale) {
		return roomKeys{}, fmt.Errorf("%w: sale ID %q", ErrInvalidArgument, sale)
	}
	return newRoomKeys(r.opts.prefix, sale), nil
}

func (r *Room) userKeys(sale, user string) (roomKeys, error) {
	k, err := r.keys(sale)
	if err == nil && !validID(user) {
		err = fmt.Errorf("%w: user ID %q", ErrInvalidArgument, user)
	}
	return k, err
}

// Configure sets the sale's room settings; call it before the sale opens
// (it is idempotent). Once the room has started, Start and Commitment are
// fixed (a different one fails with [ErrInvalidArgument]); Rate and
// MaxActive may change at any time.
func (r *Room) Configure(ctx context.Context, sale string, c Config) error {
	k, err := r.keys(sale)
	if err != nil {
		return err
	}
	switch {
	case c.Start.IsZero():
		return fmt.Errorf("%w: configure %s: zero start", ErrInvalidArgument, sale)
	case len(c.Commitment) != 64 || !isHex(c.Commitment):
		return fmt.Errorf("%w: configure %s: commitment is not a hex SHA-256", ErrInvalidArgument, sale)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.MaxActive < 0:
		return fmt.Errorf("%w: configure %s: negative rate or cap", ErrInvalidArgument, sale)
	case c.Rate == 0 && c.MaxActive == 0:
		return fmt.Errorf("%w: configure %s: neither a rate nor a cap", ErrInvalidArgument, sale)
	}
	v, err := configureScript.Run(ctx, r.rdb, []string{k.meta}, c.Start.UnixMilli(), c.Commitment,
		strconv.FormatFloat(c.Rate, 'f', -1, 64), c.MaxActive, r.now()).Int64()
	if err != nil {
		return fmt.Errorf("waitroom: configure %s: %w", sale, err)
	}
	if v == -1 {
		return fmt.Errorf("%w: configure %s: started: start and commitment are fixed", ErrInvalidArgument, sale)
	}
	return nil
}

// Join enters user in sale's room, once: a rejoin keeps the place and
// returns a fresh ticket. It returns the signed queue ticket the client
// presents to [Room.Poll] (bound to user and sale, expiring after
// [WithTicketTTL]). A sale never configured fails with
// [ErrInvalidArgument].
func (r *Room) Join(ctx context.Context, sale, user string) (ticket string, err error) {
	start := time.Now()
	defer func() { r.report(ctx, stageJoin, sale, start, 0, err) }()
	k, err := r.userKeys(sale, user)
	if err != nil {
		return "", err
	}
	v, err := joinScript.Run(ctx, r.rdb, []string{k.meta, k.ent, k.q}, user, r.now()).Int64Slice()
	if err != nil {
		return "", fmt.Errorf("waitroom: join %s: %w", sale, err)
	}
	if len(v) != 2 {
		return "", fmt.Errorf("waitroom: join %s: %w: %v", sale, ErrBadReply, v)
	}
	if v[0] == -1 {
		return "", fmt.Errorf("%w: join: sale %s not configured", ErrInvalidArgument, sale)
	}
	return r.ring.Load().sign(kindTicket, sale, user, r.opts.clock.Now().Add(r.opts.ticketTTL)), nil
}

// Poll verifies the ticket c.Token for c.User and c.Sale (a refusal wraps
// [ErrRefused]: the client must join again), then reads the entry's state
// and position in one script, refreshing its poll time so it is not
// abandoned. An admitted user gets the admission pass in Place.Pass. A user
// with a genuine ticket but no entry (the sale's keys were deleted) gets
// [ErrNotAdmitted].
func (r *Room) Poll(ctx context.Context, c Credential) (p Place, err error) {
	start := time.Now()
	defer func() { r.report(ctx, stagePoll, c.Sale, start, 0, err) }()
	k, err := r.userKeys(c.Sale, c.User)
	if err != nil {
		return Place{}, err
	}
	if _, err := r.ring.Load().verify(kindTicket, c.Token, c.Sale, c.User, r.opts.clock.Now()); err != nil {
		return Place{}, err
	}
	v, err := pollScript.Run(ctx, r.rdb, []string{k.meta, k.ent, k.adm}, c.User, r.now()).Int64Slice()
	if err != nil {
		return Place{}, fmt.Errorf("waitroom: poll %s: %w", c.Sale, err)
	}
	if len(v) != 4 {
		return Place{}, fmt.Errorf("waitroom: poll %s: %w: %v", c.Sale, ErrBadReply, v)
	}
	switch v[0] {
	case 0:
		return Place{}, ErrNotAdmitted
	case 1:
		p = Place{State: Waiting, Position: v[1]}
		if v[3] > 0 && v[1] > 0 {
			p.ETA = time.Duration(float64(v[1]) / (float64(v[3]) / 1000) * float64(time.Second))
		}
		return p, nil
	case 2:
		exp := time.UnixMilli(v[2])
		return Place{State: Admitted, Pass: r.ring.Load().sign(kindPass, c.Sale, c.User, exp), Expiry: exp}, nil
	case 3:
		return Place{State: Done}, nil
	case 4:
		return Place{State: Left}, nil
	}
	return Place{}, fmt.Errorf("waitroom: poll %s: %w: state %d", c.Sale, ErrBadReply, v[0])
}

// maxLook bounds how many entries one Admit call looks at (admitted or
// skipped as abandoned), so one script never holds Redis long.
const maxLook = 1000

// Admit admits the next users of sale whose turn it is, as many as the
// shared allowance ([Config].Rate, at most one second's worth banked) and
// the cap ([Config].MaxActive) allow, at most max (1..1000), and returns
// them in admission order. Every instance may call it, on a short ticker
// (say every 100 ms): the allowance lives in Redis, so the rate holds
// whatever the number of callers. Abandoned entries are skipped without
// using the allowance. Nothing is admitted before the start, while
// paused, or until [Room.Start] has placed the pre-queue.
func (r *Room) Admit(ctx context.Context, sale string, max int) (users []string, err error) {
	start := time.Now()
	defer func() { r.report(ctx, stageAdmit, sale, start, float64(len(users)), err) }()
	k, err := r.keys(sale)
	if err != nil {
		return nil, err
	}
	if max < 1 || max > maxLook {
		return nil, fmt.Errorf("%w: admit %s: max %d not in 1..%d", ErrInvalidArgument, sale, max, maxLook)
	}
	v, err := admitScript.Run(ctx, r.rdb, []string{k.meta, k.ent, k.pq, k.q, k.adm}, r.now(),
		r.opts.passTTL.Milliseconds(), r.opts.abandon.Milliseconds(), maxLook, max).Slice()
	if err != nil {
		return nil, fmt.Errorf("waitroom: admit %s: %w", sale, err)
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("waitroom: admit %s: %w: empty", sale, ErrBadReply)
	}
	n, ok := v[0].(int64)
	switch {
	case !ok:
		return nil, fmt.Errorf("waitroom: admit %s: %w: %v", sale, ErrBadReply, v[0])
	case n == -1:
		return nil, fmt.Errorf("%w: admit: sale %s not configured", ErrInvalidArgument, sale)
	case n == -2:
		return nil, nil
	case n < 0 || int(n) != len(v)-1:
		return nil, fmt.Errorf("waitroom: admit %s: %w: %d users announced, %d sent", sale, ErrBadReply, n, len(v)-1)
	}
	users = make([]string, 0, n)
	for _, x := range v[1:] {
		u, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("waitroom: admit %s: %w: %T", sale, ErrBadReply, x)
		}
		users = append(users, u)
	}
	return users, nil
}

// Done frees an admitted user's slot (the purchase is over, either way);
// it is idempotent. A user never admitted fails with [ErrInvalidArgument].
// After Done, the user's pass no longer verifies ([ErrNotAdmitted]).
func (r *Room) Done(ctx context.Context, sale, user string) error {
	k, err := r.userKeys(sale, user)
	if err != nil {
		return err
	}
	v, err := doneScript.Run(ctx, r.rdb, []string{k.ent, k.adm}, user).Int64()
	if err != nil {
		return fmt.Errorf("waitroom: done %s: %w", sale, err)
	}
	if v == -1 {
		return fmt.Errorf("%w: done %s: user %s not admitted", ErrInvalidArgument, sale, user)
	}
	return nil
}

// Verify checks an admission pass: c.Token must be a pass of this room's
// keys for c.Sale and c.User, not expired, and the user must be admitted
// in Redis now (not done, not lapsed) — one script. A refusal wraps
// [ErrRefused] ([ErrMalformed], [ErrInvalidSignature], [ErrWrongUser],
// [ErrExpired], [ErrNotAdmitted]); any other error is a failure (treat the
// pass as not verified). It returns the admission's deadline.
func (r *Room) Verify(ctx context.Context, c Credential) (deadline time.Time, err error) {
	start := time.Now()
	defer func() { r.report(ctx, stageVerify, c.Sale, start, 0, err) }()
	k, err := r.userKeys(c.Sale, c.User)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := r.ring.Load().verify(kindPass, c.Token, c.Sale, c.User, r.opts.clock.Now()); err != nil {
		return time.Time{}, err
	}
	v, err := checkScript.Run(ctx, r.rdb, []string{k.adm}, c.User, r.now()).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("waitroom: verify %s: %w", c.Sale, err)
	}
	switch {
	case v == -1:
		return time.Time{}, ErrNotAdmitted
	case v == 0:
		return time.Time{}, ErrExpired
	case v < 0:
		return time.Time{}, fmt.Errorf("waitroom: verify %s: %w: %d", c.Sale, ErrBadReply, v)
	}
	return time.UnixMilli(v), nil
}

// SetPaused pauses (true) or resumes (false) admission of sale; joins and
// polls go on. A resume starts the allowance from empty, so a pause banks
// nothing.
func (r *Room) SetPaused(ctx context.Context, sale string, paused bool) error {
	k, err := r.keys(sale)
	if err != nil {
		return err
	}
	flag := "0"
	if paused {
		flag = "1"
	}
	v, err := pauseScript.Run(ctx, r.rdb, []string{k.meta}, flag, r.now()).Int64()
	if err != nil {
		return fmt.Errorf("waitroom: pause %s: %w", sale, err)
	}
	if v == -1 {
		return fmt.Errorf("%w: pause: sale %s not configured", ErrInvalidArgument, sale)
	}
	return nil
}

// Stats reads sale's figures in one script. A sale never configured
// reports zeros.
func (r *Room) Stats(ctx context.Context, sale string) (Stats, error) {
	k, err := r.keys(sale)
	if err != nil {
		return Stats{}, err
	}
	v, err := statsScript.Run(ctx, r.rdb, []string{k.meta, k.pq, k.q, k.adm}, r.now()).Int64Slice()
	if err != nil {
		return Stats{}, fmt.Errorf("waitroom: stats %s: %w", sale, err)
	}
	if len(v) != 10 {
		return Stats{}, fmt.Errorf("waitroom: stats %s: %w: %v", sale, ErrBadReply, v)
	}
	return Stats{Waiting: v[1], PreQueue: v[2], Admitted: v[3], Active: v[4], Abandoned: v[5],
		Rate: float64(v[6]) / 1000, MaxActive: v[7], Paused: v[8] == 1, Placed: v[9] == 1}, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
