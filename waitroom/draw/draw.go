package draw

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/waitroom"
)

// Drawer runs the draws of every sale it is given: Open, Enter, Close,
// Draw, Replace, Outcome. Its state lives in Redis; a Drawer is safe for
// concurrent use.
type Drawer struct {
	rdb    redis.UniversalClient
	prefix string

	batch      int                     // ranks one write.lua call writes (tests lower it)
	afterBatch func(written int) error // tests: a crash after a batch
}

// Option configures [New]. A nil Option is ignored.
type Option interface{ apply(*Drawer) }

type optionFunc func(*Drawer)

func (f optionFunc) apply(d *Drawer) { f(d) }

// WithKeyPrefix sets the prefix of every Redis key. Default "seckill:".
func WithKeyPrefix(p string) Option { return optionFunc(func(d *Drawer) { d.prefix = p }) }

// New returns a Drawer on rdb. A nil client fails with [ErrInvalidConfig].
func New(rdb redis.UniversalClient, opts ...Option) (*Drawer, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	d := &Drawer{rdb: rdb, prefix: defaultKeyPrefix, batch: 1000}
	for _, o := range opts {
		if o != nil {
			o.apply(d)
		}
	}
	return d, nil
}

func (d *Drawer) keys(sale string) (drawKeys, error) {
	if !validID(sale) {
		return drawKeys{}, fmt.Errorf("%w: sale ID %q", ErrInvalidArgument, sale)
	}
	return newDrawKeys(d.prefix, sale), nil
}

func (d *Drawer) userKeys(sale, user string) (drawKeys, error) {
	k, err := d.keys(sale)
	if err == nil && !validID(user) {
		err = fmt.Errorf("%w: user ID %q", ErrInvalidArgument, user)
	}
	return k, err
}

// Open opens sale's entry window with the commitment to the seed
// ([waitroom.Commit]), published before entries open. It is idempotent;
// another commitment later fails with [ErrInvalidArgument].
func (d *Drawer) Open(ctx context.Context, sale, commitment string) error {
	k, err := d.keys(sale)
	if err != nil {
		return err
	}
	if _, err := hex.DecodeString(commitment); err != nil || len(commitment) != 64 {
		return fmt.Errorf("%w: open %s: commitment is not a hex SHA-256", ErrInvalidArgument, sale)
	}
	v, err := openScript.Run(ctx, d.rdb, []string{k.meta}, commitment).Int64()
	if err != nil {
		return fmt.Errorf("draw: open %s: %w", sale, err)
	}
	if v == -1 {
		return fmt.Errorf("%w: open %s: another commitment is set", ErrInvalidArgument, sale)
	}
	return nil
}

// Enter enters user in sale's draw, once (a second call is a success and
// changes nothing, also after Close). After Close, a new entry is refused
// with [ErrWindowClosed].
func (d *Drawer) Enter(ctx context.Context, sale, user string) error {
	k, err := d.userKeys(sale, user)
	if err != nil {
		return err
	}
	v, err := enterScript.Run(ctx, d.rdb, []string{k.meta, k.ent}, user).Int64()
	if err != nil {
		return fmt.Errorf("draw: enter %s: %w", sale, err)
	}
	switch v {
	case 0, 1:
		return nil
	case -1:
		return fmt.Errorf("%w: enter: sale %s not opened", ErrInvalidArgument, sale)
	case -2:
		return ErrWindowClosed
	}
	return fmt.Errorf("draw: enter %s: %w: %d", sale, ErrBadReply, v)
}

// Close closes sale's entry window (idempotent) and returns the number of
// entries.
func (d *Drawer) Close(ctx context.Context, sale string) (int64, error) {
	k, err := d.keys(sale)
	if err != nil {
		return 0, err
	}
	v, err := closeScript.Run(ctx, d.rdb, []string{k.meta}).Int64()
	if err != nil {
		return 0, fmt.Errorf("draw: close %s: %w", sale, err)
	}
	if v < 0 {
		return 0, fmt.Errorf("%w: close: sale %s not opened", ErrInvalidArgument, sale)
	}
	return v, nil
}

// Params name a draw.
type Params struct {
	Sale string
	// Seed is the revealed seed; [waitroom.Commit](Seed) must be the
	// commitment given to Open. At least 16 bytes.
	Seed []byte
	// Stock is the number of winners: the first Stock of the draw order
	// (all entries when there are fewer).
	Stock int
	// Waitlist is how many after the winners may replace an unpaid winner
	// ([Drawer.Replace]), in draw order; the rest have lost.
	Waitlist int
}

// Draw draws sale once the window is closed and returns the whole draw
// order: [waitroom.Shuffle](Seed, entries); the winners are its first
// Stock entries, the waitlist the next Waitlist. Like the pre-queue of
// [waitroom.Room.Start], the shuffle runs in Go and the ranks are written
// in batches of 1,000 behind a fence (the seed and the count written), so
// a Draw that dies half-way is resumed by calling Draw again with the same
// Params, from any instance, to the same order; a Draw after the draw
// returns the stored order. Publish the entries and the order: [Verify]
// checks them.
func (d *Drawer) Draw(ctx context.Context, p Params) ([]string, error) {
	k, err := d.keys(p.Sale)
	if err != nil {
		return nil, err
	}
	if len(p.Seed) < 16 || p.Stock < 0 || p.Waitlist < 0 {
		return nil, fmt.Errorf("%w: draw %s: a seed shorter than 16 bytes, or a negative stock or waitlist", ErrInvalidArgument, p.Sale)
	}
	seedHex := hex.EncodeToString(p.Seed)
	v, err := revealScript.Run(ctx, d.rdb, []string{k.meta}, seedHex, waitroom.Commit(p.Seed), p.Stock, p.Waitlist).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("draw: draw %s: %w", p.Sale, err)
	}
	if len(v) != 3 {
		return nil, fmt.Errorf("draw: draw %s: %w: %v", p.Sale, ErrBadReply, v)
	}
	switch v[0] {
	case 1, 2:
	case -1:
		return nil, fmt.Errorf("%w: draw: sale %s not opened", ErrInvalidArgument, p.Sale)
	case -2:
		return nil, fmt.Errorf("%w: draw %s: the seed does not match the commitment", ErrInvalidArgument, p.Sale)
	case -3:
		return nil, fmt.Errorf("%w: draw %s: entries not closed", ErrInvalidArgument, p.Sale)
	case -4:
		return nil, fmt.Errorf("%w: draw %s: another stock or waitlist was drawn with", ErrInvalidArgument, p.Sale)
	default:
		return nil, fmt.Errorf("draw: draw %s: %w: %v", p.Sale, ErrBadReply, v)
	}
	if v[0] == 2 {
		order, err := d.rdb.LRange(ctx, k.ord, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("draw: draw %s: %w", p.Sale, err)
		}
		return order, nil
	}
	count, written := v[1], v[2]
	entries, err := d.entries(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("draw: draw %s: %w", p.Sale, err)
	}
	if int64(len(entries)) != count {
		return nil, fmt.Errorf("draw: draw %s: %w: %d entries read, %d counted", p.Sale, ErrBadReply, len(entries), count)
	}
	order := waitroom.Shuffle(p.Seed, entries)
	for off := written; off < count; {
		end := min(off+int64(d.batch), count)
		args := make([]any, 0, 2+end-off)
		args = append(args, seedHex, off)
		for _, u := range order[off:end] {
			args = append(args, u)
		}
		w, err := writeScript.Run(ctx, d.rdb, []string{k.meta, k.ent, k.ord}, args...).Int64()
		if err != nil {
			return nil, fmt.Errorf("draw: draw %s: write: %w", p.Sale, err)
		}
		if w <= off {
			return nil, fmt.Errorf("draw: draw %s: write: %w: %d at offset %d", p.Sale, ErrBadReply, w, off)
		}
		off = w
		if d.afterBatch != nil {
			if err := d.afterBatch(int(w)); err != nil {
				return nil, err
			}
		}
	}
	return order, nil
}

// entries reads every entry of a closed draw (HSCAN).
func (d *Drawer) entries(ctx context.Context, k drawKeys) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := d.rdb.HScan(ctx, k.ent, cursor, "*", 1000).Result()
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(keys); i += 2 {
			out = append(out, keys[i])
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	slices.Sort(out)
	return slices.Compact(out), nil // HSCAN may return an element twice
}

// Replace gives an unpaid winner's unit to the next of the waitlist, in
// draw order, and returns that user ("" when the waitlist is exhausted).
// It is idempotent: a second call for the same user returns the same
// replacement. The replaced winner's outcome becomes [Lost]. A user who is
// not a winner, or a call before the draw, fails with [ErrInvalidArgument].
func (d *Drawer) Replace(ctx context.Context, sale, user string) (string, error) {
	k, err := d.userKeys(sale, user)
	if err != nil {
		return "", err
	}
	v, err := replaceScript.Run(ctx, d.rdb, []string{k.meta, k.ent, k.ord}, user).Slice()
	if err != nil {
		return "", fmt.Errorf("draw: replace %s: %w", sale, err)
	}
	if len(v) != 2 {
		return "", fmt.Errorf("draw: replace %s: %w: %v", sale, ErrBadReply, v)
	}
	code, ok1 := v[0].(int64)
	repl, ok2 := v[1].(string)
	switch {
	case !ok1 || !ok2:
		return "", fmt.Errorf("draw: replace %s: %w: %v", sale, ErrBadReply, v)
	case code == 1:
		return repl, nil
	case code == -1:
		return "", fmt.Errorf("%w: replace %s: not drawn yet", ErrInvalidArgument, sale)
	case code == -2 || code == -3:
		return "", fmt.Errorf("%w: replace %s: user %s is not a winner", ErrInvalidArgument, sale, user)
	}
	return "", fmt.Errorf("draw: replace %s: %w: %v", sale, ErrBadReply, v)
}

// Status is a user's standing in a draw.
type Status string

// Statuses of [Outcome].
const (
	NotEntered Status = "not_entered"
	Entered    Status = "entered"    // entered, not drawn yet
	Winner     Status = "winner"     // drawn (or promoted from the waitlist): may buy
	Waitlisted Status = "waitlisted" // may still replace an unpaid winner
	Lost       Status = "lost"       // beyond the waitlist, or a winner replaced
)

// Outcome is a user's answer to [Drawer.Outcome].
type Outcome struct {
	Status Status
	// Rank is the place in the draw order, from 1 (0 before the draw).
	Rank int64
	// Position is the place on the waitlist, 1 for the next to be
	// promoted (Waitlisted only).
	Position int64
}

// Outcome tells user where they stand in sale's draw, in one script.
func (d *Drawer) Outcome(ctx context.Context, sale, user string) (Outcome, error) {
	k, err := d.userKeys(sale, user)
	if err != nil {
		return Outcome{}, err
	}
	v, err := outcomeScript.Run(ctx, d.rdb, []string{k.meta, k.ent}, user).Int64Slice()
	if err != nil {
		return Outcome{}, fmt.Errorf("draw: outcome %s: %w", sale, err)
	}
	if len(v) != 5 {
		return Outcome{}, fmt.Errorf("draw: outcome %s: %w: %v", sale, ErrBadReply, v)
	}
	rank, next, stock, wait := v[1], v[2], v[3], v[4]
	switch v[0] {
	case 0:
		return Outcome{Status: NotEntered}, nil
	case 1:
		return Outcome{Status: Entered}, nil
	case 2:
		return Outcome{Status: Winner, Rank: rank + 1}, nil
	case 3:
		if rank < stock+wait && rank >= next {
			return Outcome{Status: Waitlisted, Rank: rank + 1, Position: rank - next + 1}, nil
		}
		return Outcome{Status: Lost, Rank: rank + 1}, nil
	case 4:
		return Outcome{Status: Lost, Rank: rank + 1}, nil
	}
	return Outcome{}, fmt.Errorf("draw: outcome %s: %w: %v", sale, ErrBadReply, v)
}

// VerifyParams are what a draw publishes: the seed revealed, the
// commitment published before the window opened, every entry, the stock
// and the winners (the first Stock of the draw order, in order).
type VerifyParams struct {
	Seed       []byte
	Commitment string
	Entries    []string
	Stock      int
	Winners    []string
}

// Verify checks a published draw: the seed matches the commitment and the
// winners are the first Stock of [waitroom.Shuffle](Seed, Entries), in
// order. It returns nil, or an error wrapping [ErrInvalidArgument] that
// says what differs. Anyone can run it (or recompute the shuffle in
// another language from its definition in [waitroom.Shuffle]).
func Verify(p VerifyParams) error {
	if waitroom.Commit(p.Seed) != p.Commitment {
		return fmt.Errorf("%w: the seed does not match the commitment", ErrInvalidArgument)
	}
	order := waitroom.Shuffle(p.Seed, p.Entries)
	want := order[:min(p.Stock, len(order))]
	if !slices.Equal(want, p.Winners) {
		return fmt.Errorf("%w: the winners are not the first %d of the draw order", ErrInvalidArgument, p.Stock)
	}
	return nil
}
