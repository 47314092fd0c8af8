// Command seckillctl operates a live sale through the admin API, the
// library's package admin (github.com/seckillkit/seckill/admin) as the
// reference deployment or any shop mounts it: load an activity, inspect it,
// pause and resume it, top it up or withdraw units, refund a paid order,
// reconcile it (dry run first), retry FAILED outbox rows, ban and unban, and read the audit log.
//
//	export SECKILL_ADMIN_TOKEN=…        # never on the command line (or --token-file FILE, - for stdin)
//	seckillctl --addr http://127.0.0.1:9090/admin/ stats 42
//	seckillctl pause 42
//	seckillctl topup 42 50 --idempotency-key topup-42-1
//	seckillctl refund 42 1000042 --restock sale      # or shop, or none: required
//	seckillctl reconcile 42                          # dry run: prints a dry-run ID and its plan
//	seckillctl reconcile 42 --apply --dry-run-id <id> # releases that plan's still-due reservations, no other
//	seckillctl ban user 7 --reason bot               # prints "ban ends <time>"
//	seckillctl bans --kind user                      # a page; --after <next> for the following one
//	seckillctl audit --activity 42 -o json
//
// --addr (or SECKILL_ADMIN_ADDR, the variable the service's admin listener
// reads too) is the URL the service logs ("admin API listening url=…"), as
// it is, or without its /admin/ path, or host:port; there is no default.
// Plain http goes only to a loopback address (else https), and no redirect
// is followed. --token still works but warns: argv is visible to other
// users. Output is a table, or the server's JSON with -o json. On an error answer
// ({"status":"<code>","message":"<text>"}) the line
// "seckillctl: <status>: <message> (HTTP <n>)" goes to stderr and the exit
// status is 1 (2 for a usage error).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
