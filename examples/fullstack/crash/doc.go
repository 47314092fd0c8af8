// Package crash is the crash tier of examples/fullstack: it runs the service
// as a real process (the binary built from ./examples/fullstack) against
// real redis-server processes and MariaDB, kills them with SIGKILL in the
// middle of a sale, starts them again, and counts what the buyers were
// promised against what the stores hold.
//
// The harness is reusable by other fault tests:
//
//   - [Build] compiles the service once (TestMain);
//   - [StartRedis] runs a private standalone redis-server on a free loopback
//     port in a temp dir, without persistence or with an AOF fsynced
//     always or every second; [RedisServer.Kill] is kill -9 by PID and
//     [RedisServer.Restart] starts it again on the same port and dir, with
//     or without its data;
//   - [StartService] runs the service with flags, waits for /healthz,
//     captures its output to a file (the tail is logged when the test
//     fails); [Service.Kill] and [Service.Start] kill and restart it with the
//     same flags;
//   - [Crowd] is N demo users buying over HTTP the way the page does
//     (login, captcha through the demo hook, access token and signed path,
//     buy with a request_id kept across retries of one attempt); it records
//     every answer, and with Crowd.History each buyer's buy and result
//     answers with their times, for history.Check (the rig checks every
//     buyer's history against the settled state with the other
//     invariants);
//   - [Store] reads the truth straight from SQL and from Redis, never
//     through the service, and [State] checks the invariants by counting.
//   - the cart tier ([CartRig], [RunCartKill], [CheckCarts]): buyer
//     processes (./crash/cartbuyer) reserve 3-line carts with
//     stock.Deductor.ReserveLines and write each as one order with lines,
//     journaling every step ([CartRecord]); the tests kill them, fail Redis
//     over under them (the chaos battery's FC scenarios) and count every
//     invariant from SQL and Redis, per sale, variant and limit group.
//
// The tests skip, saying what is missing, without a redis-server binary on
// PATH or without SECKILL_MYSQL_DSN (for the MariaDB scenarios). They never
// touch a server they did not start and end every process they start, by
// PID, also when they fail.
package crash
