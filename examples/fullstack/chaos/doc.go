// Package chaos is the fault battery of examples/fullstack: the whole chain
// runs as separate processes on real servers — two api processes
// (-role api), one or two workers (-role worker), the standalone broker
// (cmd/broker, log on disk), a private redis-server (AOF everysec) and
// MariaDB in a fresh database — with a fault proxy (toxiproxy, in-process)
// between every process and every backend. Each scenario sells a small
// stock to a crowd of buyers while a fault strikes at a seeded moment
// (kill -9 and restart of a process or of Redis, a partition, latency and
// connection resets, a broker outage, a rebalance storm, consumer lag past
// the reconcile grace, attacks on the signed links, tokens and captchas),
// then waits for the stores to settle and counts every invariant straight
// from SQL and Redis, through the crash package's checker.
//
// What the Kafka proxies cover: the broker's metadata advertises its own
// listen addresses, so the proxies carry the bootstrap (seed) connections
// only; produce, fetch and group traffic go to the broker directly. A
// broker outage therefore acts on the broker process itself — stopped
// (SIGSTOP, F6, as well as disabling its proxies) or killed and restarted
// with its log (F6k) — and a partition of one process from the broker is
// not run (see RELIABILITY.md at the repository root).
//
// The battery runs inside `go test ./...` when SECKILL_MYSQL_DSN is set and
// redis-server is on PATH, and skips with -short. Knobs: SECKILL_CHAOS_SEEDS,
// SECKILL_CHAOS_USERS, SECKILL_CHAOS_STOCK, SECKILL_CHAOS_RUN (scenario IDs)
// and SECKILL_CHAOS_REPORT (a file for the results table and the fault
// timelines).
package chaos
