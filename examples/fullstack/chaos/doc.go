// Package chaos is the fault battery of examples/fullstack: the whole chain
// runs as separate processes on real servers — two api processes
// (-role api), one or two workers (-role worker), the standalone broker
// (cmd/broker, log on disk), a private redis-server (AOF everysec) and
// MariaDB in a fresh database — with a fault proxy (toxiproxy, in-process)
// between every process and every backend. Each scenario sells a small
// stock to a crowd of buyers while a fault strikes at a seeded moment
// (kill -9 and restart of a process, of Redis or of a private mariadbd, a
// partition, latency and connection resets, a broker outage, a rebalance
// storm, consumer lag past the reconcile grace, two apis' clocks skewed
// ±5 s, a Redis Cluster master killed and its replica promoted, attacks on
// the signed links, tokens and captchas; P1: the payment provider's
// callbacks duplicated and reordered, an api killed between a charge and
// its callback, refunds racing the expiry), then waits for the stores to
// settle and counts every invariant straight from SQL and Redis, through
// the crash package's checker, and checks every buyer's history: each
// answer the crowds and agents were given, in real-time order, against
// the model of a buy and the settled state (package history).
//
// What the Kafka proxies cover: the broker's metadata advertises its own
// listen addresses, so the shared proxies ("kafka-<i>") carry the
// bootstrap (seed) connections only; produce, fetch and group traffic go
// to the broker directly. A process can be given proxies of its own that
// carry all of its Kafka traffic: the service's -kafka-addr-map maps each
// advertised broker address to the process's proxy in front of that
// broker (F7d cuts the worker off the broker that way, and checks in
// /proc that it holds no connection to the broker's own ports). A broker
// outage for everyone acts on the broker process itself — stopped
// (SIGSTOP, F6, as well as disabling its proxies) or killed and restarted
// with its log (F6k).
//
// F5p, F7bp and F7cp run the chain on PostgreSQL (the service's
// -postgres): the partitions on SECKILL_POSTGRES_DSN's server, in a fresh
// database, the kill -9 on a private server (initdb; as the postgres user
// when run as root). F12s runs the services on a private Sentinel-managed
// Redis (-redis-sentinel: a master, its replica and 3 Sentinels) and kills
// the master. F13 reshards the private Redis Cluster mid-sale: the sale's
// slot migrated to another master and back (SETSLOT IMPORTING/MIGRATING,
// MIGRATE in small batches) while the buys run.
//
// The cart scenarios (TestChaosCarts, carts_test.go; issue #27) run
// buyer processes of the crash tier (crash/cartbuyer) that reserve 3-line
// carts with stock.Deductor.ReserveLines — two sales and a variant of a
// third, every line in one limit group — and write each as one order with
// lines (order.Processor, whose TxHook holds the group's cap in the
// database): FC1 kills them with SIGKILL between the lines of a cart
// (crash.RunCartKill); FC2 fails a Sentinel-managed Redis over mid-cart
// without losing a write (the master refuses writes, the replica is
// brought in step, SENTINEL FAILOVER); FC2l fails it over losing the last
// writes (the replica cut off 0.3–0.8 s, the master killed), then resumes
// the sale; FC3 splits a limit group over 3 sales on 3 Cluster masters,
// 4 buyer processes racing for 10 buyers' caps, and kills the master of
// one sale and a buyer. After the buyers end, the units the data-loss
// fence froze (and those in which the reconciler finds orphans: lost
// reservations no Deductor noticed) are rebuilt from the database, the
// reconciler runs, and crash.CheckCarts counts every invariant from SQL
// and Redis. SECKILL_CHAOS_RUN selects them by ID like the others.
//
// The soak (TestSoak, soak.go: SECKILL_SOAK=short in CI, long for `make
// soak`) runs the same chain for minutes or hours under continuous load
// while a nemesis strikes faults of this catalogue on a seeded random
// schedule with overlaps (kill -9 of an api, a worker, redis-server with
// and without its data, the broker or mariadbd; both workers down longer
// than the grace; the broker stalled; partitions; Redis latency and
// resets; the database down for everyone; api2's clock 3 s ahead
// throughout), checks every invariant and every buyer's history at each
// quiet checkpoint and at the end, and prints each seed with the line
// that replays its schedule (SECKILL_SOAK_SEED).
//
// F5 runs a private mariadbd (the CI MariaDB is shared and must not be
// killed) and F12 a private 3-master + 3-replica Redis Cluster, which the
// services reach directly (a Cluster's redirections name the nodes' own
// addresses). Either is skipped, saying why, when its binaries
// (mariadbd and mariadb-install-db; redis-cli) are not installed.
//
// The battery runs inside `go test ./...` when SECKILL_MYSQL_DSN is set and
// redis-server is on PATH, and skips with -short. Knobs: SECKILL_CHAOS_SEEDS,
// SECKILL_CHAOS_USERS, SECKILL_CHAOS_STOCK, SECKILL_CHAOS_RUN (scenario IDs),
// SECKILL_CHAOS_REPORT (a file for the results table and the fault
// timelines), SECKILL_CHAOS_KNOWN=1 (also run the scenarios listed with
// a known violation, none at present; skipped with that reason otherwise)
// and SECKILL_CHAOS_PARALLEL (rows run at once, default 3). The rows of
// TestChaos, and those of TestChaosCarts, run 3 at a time: each row starts
// its own processes, Redis (or Cluster, or Sentinels), broker, proxies and
// private servers on free ports and writes a database of its own, so rows
// share only the machine (and the CI MariaDB and PostgreSQL servers, a
// database each). SECKILL_CHAOS_PARALLEL=1 runs them one after another.
package chaos
