package waitroom

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Start reveals seed at the start of sale and places the pre-queue: the
// entries that joined before the start, sorted, in the order [Shuffle]
// gives them. seed must match the [Config].Commitment ([Commit]); before
// the start Start fails with [ErrInvalidArgument], so does another seed.
//
// The shuffle runs in Go, not in one Lua script (a million entries would
// block Redis): Start freezes the pre-queue and stores the seed (one
// script), reads the pre-queue (HSCAN), shuffles it, and writes the places
// in batches of 1,000, each one script behind a fence (the revealed seed
// and the count of places written): a batch is written exactly once, so a
// crash mid-write is resumed by calling Start again with the same seed,
// from any instance, and gives the same order; concurrent Starts write each
// batch once. Nothing is admitted until the last batch is written.
func (r *Room) Start(ctx context.Context, sale string, seed []byte) error {
	k, err := r.keys(sale)
	if err != nil {
		return err
	}
	if len(seed) < 16 {
		return fmt.Errorf("%w: start %s: seed shorter than 16 bytes", ErrInvalidArgument, sale)
	}
	seedHex := hex.EncodeToString(seed)
	v, err := revealScript.Run(ctx, r.rdb, []string{k.meta}, seedHex, Commit(seed), r.now()).Int64Slice()
	if err != nil {
		return fmt.Errorf("waitroom: start %s: %w", sale, err)
	}
	if len(v) != 3 {
		return fmt.Errorf("waitroom: start %s: %w: %v", sale, ErrBadReply, v)
	}
	switch v[0] {
	case 2:
		return nil
	case 1:
	case -1:
		return fmt.Errorf("%w: start: sale %s not configured", ErrInvalidArgument, sale)
	case -2:
		return fmt.Errorf("%w: start %s: the seed does not match the commitment", ErrInvalidArgument, sale)
	case -3:
		return fmt.Errorf("%w: start %s: before the start", ErrInvalidArgument, sale)
	default:
		return fmt.Errorf("waitroom: start %s: %w: %v", sale, ErrBadReply, v)
	}
	pcount, written := v[1], v[2]
	entries, err := r.preQueue(ctx, k)
	if err != nil {
		return fmt.Errorf("waitroom: start %s: %w", sale, err)
	}
	if int64(len(entries)) != pcount {
		return fmt.Errorf("waitroom: start %s: %w: %d pre-queue entries read, %d counted", sale, ErrBadReply, len(entries), pcount)
	}
	order := Shuffle(seed, entries)
	for off := written; off < pcount; {
		end := min(off+int64(r.batch), pcount)
		args := make([]any, 0, 2+end-off)
		args = append(args, seedHex, off)
		for _, u := range order[off:end] {
			args = append(args, u)
		}
		w, err := placeScript.Run(ctx, r.rdb, []string{k.meta, k.ent, k.pq}, args...).Int64()
		if err != nil {
			return fmt.Errorf("waitroom: start %s: place: %w", sale, err)
		}
		if w <= off {
			return fmt.Errorf("waitroom: start %s: place: %w: %d at offset %d", sale, ErrBadReply, w, off)
		}
		off = w
		if r.afterBatch != nil {
			if err := r.afterBatch(int(w)); err != nil {
				return err
			}
		}
	}
	return nil
}

// preQueue reads the pre-queue entries (values "p:…" or "P…") of the room.
func (r *Room) preQueue(ctx context.Context, k roomKeys) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		kv, next, err := r.rdb.HScan(ctx, k.ent, cursor, "*", 1000).Result()
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if strings.HasPrefix(kv[i+1], "p") || strings.HasPrefix(kv[i+1], "P") {
				out = append(out, kv[i])
			}
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	slices.Sort(out)
	return slices.Compact(out), nil // HSCAN may return an element twice
}
