// Command seckillctl operates a live sale through the admin API of the
// reference deployment (package examples/fullstack/admin): load an
// activity, inspect it, pause and resume it, top it up or withdraw units,
// reconcile it (dry run first), retry FAILED outbox rows, ban and unban,
// and read the audit log.
//
//	export SECKILL_ADMIN_TOKEN=…        # never on the command line
//	seckillctl --addr http://127.0.0.1:8080/admin/ stats 42
//	seckillctl pause 42
//	seckillctl topup 42 50 --idempotency-key topup-42-1
//	seckillctl reconcile 42                          # dry run: prints a dry-run ID
//	seckillctl reconcile 42 --apply --dry-run-id <id>
//	seckillctl audit --activity 42 -o json
//
// The address may also come from SECKILL_ADMIN_ADDR. Output is a table, or
// the server's JSON with -o json. On an error answer
// ({"status":"<code>","message":"<text>"}) the line
// "seckillctl: <status>: <message> (HTTP <n>)" goes to stderr and the exit
// status is 1 (2 for a usage error).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
