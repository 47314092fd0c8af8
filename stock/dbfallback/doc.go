// Package dbfallback is a database fallback for [stock.Deductor]: a
// [stock.WithFallback] function (Store.Reserve) over gorm (MySQL/MariaDB or
// SQLite) that keeps selling a share of an activity while Redis is down,
// without ever selling a unit Redis also sells.
//
//	store, err := dbfallback.New(db)          // *gorm.DB, not inside a transaction
//	err = store.AutoMigrate(ctx)              // or apply SchemaMySQL
//	err = store.Open(ctx, sale, quota)        // the pool: quota units of sale.Stock
//	redisSale := sale
//	redisSale.Stock -= quota                  // the carve-out
//	_, err = d.Load(ctx, redisSale)           // d built with stock.WithFallback(store.Reserve)
//	…
//	units, err := store.Drain(ctx, sale.ID)   // Redis is back: the pool's units go back to the sale
//
// # The carve-out
//
// [Store.Open] gives an activity a pool of quota units; the caller loads
// Redis with Stock − quota. The two stores therefore hold disjoint units and
// cannot oversell together, however a request is routed, retried or
// replayed: Redis sells at most Stock − quota, the pool at most quota. The
// price is that the pool's units are sold only while Redis is unavailable
// (the Deductor asks its fallback only after an error matching
// [stock.ErrUnavailable]), so without an outage they are idle: once Redis is
// back, [Store.Drain] takes what the pool has left out of it (remaining → 0,
// the quota shrinks by as much), exactly once, and returns the count for
// the caller to give back to the Redis sale, so that no unit stays
// stranded (a top-up with [stock.Deductor.Adjust], under an ID of its own so
// a retry adds them once).
// Releases of fallback reservations put units back in the pool; drain again
// after them. Pick a quota as large as the sales an outage
// must carry; it can be the whole stock, at the cost of draining it all.
//
// # Sales in sizes
//
// A sale in sizes ([stock.Activity.Variants]) has one pool per size,
// addressed as the [stock.Deductor] addresses the size, "<sale>/<size>"
// ([stock.VariantOf]): the Deductor hands its fallback a Request whose
// Activity is that string. [Store.Open] of such a sale takes quota per
// size, capped at the size's stock: each size's pool holds min(quota,
// size's Stock) units (load each size in Redis with its Stock minus its
// pool), and takes the size's per-user limit (or the sale's when 0). The
// sale's own row (the "sizes" column counts its sizes; it holds no units)
// keeps the sale's per-user limit over all its sizes and the window.
//
// Every Reserve and Release of a size locks the sale's row first, then the
// size's, so the writers of one sale are serialised and the buyer's units
// over all the sale's sizes, summed under that lock, hold the sale's
// limit as reserve_lines.lua does in Redis (a size's LimitReached reports
// the size's Held and Limit, as there). Conservation, replay, tombstones,
// [Store.Drain], [Store.Lookup], [Store.Reservations] and [Store.Overlap]
// are per size; the sale's own ID sells nothing ([stock.NotLoaded]),
// drains nothing (an error: drain each size), and gives the sum over its
// sizes in [Store.Stats] and [Store.Held].
//
// # What one Reserve does
//
// One transaction: lock the activity's pool row (MySQL: SELECT … FOR
// UPDATE; SQLite: a write as first statement, which takes the database's
// write lock); look the reservation ID up and replay its outcome if known;
// check the per-user limit, the window (Start <= now < End on the Store's
// [Clock], default the process's time.Now: not the database's clock and not
// Redis TIME), the stock (SoldOut) and the buyer's held units
// (LimitReached; read under the pool lock, which every writer of the
// activity's rows holds to its commit), in the order of the Redis script;
// then UPDATE pool SET remaining = remaining - qty WHERE activity_id = ?
// AND remaining >= qty and insert the reservation row. Denials and replays
// roll back and write nothing. The [stock.Result] has the Redis path's shape;
// ReservedAt is the Store clock's time and Fallback is left for the
// Deductor to set. A transaction that meets a duplicate key (the same
// reservation ID inserted meanwhile) or an InnoDB deadlock is run again, up to
// five times.
//
// # Idempotence and Release
//
// The reservation ID is the primary key of the reservation table (VARBINARY on
// MySQL: byte for byte). A retried Reserve answers its first outcome with
// Replayed set and deducts nothing; an ID reused for another user,
// quantity or activity fails with [stock.ErrIDConflict]. [Store.Release]
// gives a reservation's units back exactly once; an unknown ID leaves a
// tombstone (state released, qty 0), so a Reserve of that ID arriving later
// deducts nothing and answers [stock.Released], as release.lua does in
// Redis. Releasing an ID in the store that does not hold it is harmless in
// both directions, so a canceller may release every reservation ID in both
// stores. Conservation, checked by the tests by counting rows: remaining +
// held units = quota, for every pool at every commit; opened quota = quota
// + drained.
//
// # Across the two stores
//
// A request can hold units in both stores: a Redis call that timed out may
// have run its script before the Deductor asked the fallback, and a request
// reserved here may be retried through Redis once it is back. Nothing is
// oversold (the units are disjoint) but the request holds twice what it
// asked for. After an outage, [Store.Overlap] lists those reservation IDs (it
// reads the Redis ledger through [Ledger], which *stock.Deductor
// implements); release their copy here, then Drain. [Store.Reservations]
// pages through the held reservations for the reconciler.
//
// The per-user limit is enforced per store: a buyer may hold up to the limit
// in Redis and up to the limit in the pool. Where that matters, the order
// table's own per-buyer constraint is the guard across the two.
//
// # Tables
//
//	<prefix>pool         activity_id PK (VARCHAR(129): an activity, or a
//	                     size "<sale>/<size>"), quota, remaining (CHECK >= 0
//	                     and <= quota), drained, per_user_limit, start_ms,
//	                     end_ms, updated_ms, sizes (a sale in sizes' own
//	                     row: its number of sizes; else 0)
//	<prefix>reservation  request_id PK (VARBINARY(128)), activity_id (VARCHAR(129)),
//	                     user_id (VARCHAR(64); '' for a tombstone), qty,
//	                     state ('R' held, 'X' released; a tombstone when
//	                     qty = 0), created_ms, released_ms;
//	                     KEY (activity_id, user_id),
//	                     KEY (activity_id, state, request_id)
//
// The prefix defaults to "seckill_fallback_" ([WithTablePrefix]). Times are
// Unix milliseconds (0 = none), so no driver time-zone or parseTime setting
// matters. [SchemaMySQL] (schema.sql) is the DDL for MySQL 8 / MariaDB
// 10.6+; [Store.AutoMigrate] builds the same tables on MySQL and SQLite.
// Activity and user IDs are [stock.ValidID] strings (a size's activity
// is two of them joined by '/') in VARCHAR columns, ASCII with the binary
// collation on MySQL, so they compare byte for byte as the Redis keys do.
// AutoMigrate alters the BIGINT ID columns of tables made by earlier
// releases, and widens their VARCHAR(64) activity_id to VARCHAR(129) and
// adds the sizes column, keeping every row (MySQL: in place; SQLite: gorm
// copies the table in one transaction); their rows keep their IDs in
// decimal, which is what a shop with numeric IDs passes
// (strconv.FormatInt). Over tables that are up to date it runs no DDL.
//
// # Concurrency and limits
//
// A Store is safe for concurrent use by multiple goroutines and processes.
// Every writer of one activity takes its pool row lock first, so they never
// deadlock among themselves (writers of different activities share the
// reservation table's index pages; a rare InnoDB deadlock between them is
// run again), and one activity's fallback sales are serialised: about a thousand reservations per second on MariaDB, enough
// to carry an outage, far below the Redis path. A sale in sizes is
// serialised as a whole (every size locks the sale's row first), and a
// size's Reserve has two statements more (the sale's lock and its
// per-user sum over the sizes): about 1.4 times a plain one's time
// (BenchmarkReserveSize). On SQLite use WAL and a
// busy_timeout (writers queue for the database's write lock). Errors are
// database failures, bad input ([stock.ErrInvalidArgument]) and conflicts
// ([stock.ErrIDConflict], [ErrPoolConflict]); bad configuration given to
// [New] wraps [ErrInvalidConfig]. The Deductor joins a fallback
// error with the Redis one. The Deductor gives the fallback the caller's
// context: a deadline already spent on Redis leaves the database nothing.
//
// # When not to use it
//
// Without it the Deductor fails fast while Redis is down, which is often
// the right answer for a flash sale. Use it when sales must go on through a
// Redis outage and a carved-out share is acceptable.
package dbfallback
