// Package fused is the seam through which a building block offers one of
// its Redis checks in a form a composer can run inside one script together
// with other blocks' checks: one round trip for a chain of checks instead
// of one per check (package checkout's fused admission).
//
// A block builds a [Check] from the same Lua text its own call runs (never
// a fork of it) and decodes the reply with the same code, so the fused
// form decides exactly what the block's own call decides. Like
// internal/observe, it is a seam under internal/ (so no building block
// imports a sibling), and it imports nothing of the library.
package fused

import "context"

// Check is one Redis check of a building block, in composable form.
//
// A composer wraps Lua as the body of a Lua function of (KEYS, ARGV),
// calls it with Keys and Args, and goes on to the next check only when
// Pass holds for its reply; it hands the reply, as go-redis returns it
// (int64, string, []any, nil), to Decode. Decode returns what the block's
// own call would have returned for that reply, and does what that call
// does after its script (its observer, its hooks, a follow-up command on a
// refusal).
type Check[T any] struct {
	// Lua is the check's script text: a chunk that reads KEYS and ARGV and
	// returns the check's reply. It never reads the caller's KEYS or ARGV
	// beyond its own Keys and Args.
	Lua string
	// Keys and Args are the check's KEYS and ARGV.
	Keys []string
	Args []any
	// Pass is a Lua expression over r, the check's reply, that is true
	// only when the block's call would let the chain go on (never true
	// for a reply the block refuses).
	Pass string
	// Decode turns the reply into the block's result.
	Decode func(ctx context.Context, reply any) (T, error)
}
