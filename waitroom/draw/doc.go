// Package draw is the draw mode of a fair sale: users enter in a window
// (one entry per user, idempotent), the window closes, and [Drawer.Draw]
// orders the entries with the waiting room's commit-and-reveal shuffle
// ([waitroom.Shuffle] of the seed whose [waitroom.Commit] was published
// when the window opened). The first Stock of the order win (exactly Stock,
// or every entry when fewer entered); the next Waitlist may replace an
// unpaid winner, in draw order ([Drawer.Replace]); everyone else has lost.
// [Drawer.Outcome] tells a user where they stand; [Verify] lets anyone
// check a published draw.
//
// Use it when every entrant should have the same chance whatever their
// speed; not when the stock should go to whoever comes first (no room at
// all) or to everyone in a fair order over time (the [waitroom.Room]).
//
// Reservations, pay deadlines and telling losers are the shop's: it
// reserves for each winner, and calls Replace when a winner's deadline
// passes unpaid.
//
// Like the pre-queue of [waitroom.Room.Start], the shuffle runs in Go and
// the ranks are written in batches behind a fence, so a Draw that dies
// half-way resumes to the same order when called again.
//
// A Drawer is safe for concurrent use. Every operation is one Lua script
// (Draw: one per batch, plus HSCAN); no script reads the time. Redis 6.2
// or later, or Redis Cluster: a draw's keys share the hash tag {dr:<sale>}.
// A refusal ([ErrWindowClosed]) wraps [ErrRefused]; Redis failures do not.
package draw
