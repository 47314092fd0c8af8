package crash

import "testing"

// TestCartKillBetweenLines is issue #27's "a cart of 3 lines is atomic
// under the crash tier": three buyer processes reserve 3-line carts
// (ReserveLines: two plain sales and a variant, every line in one limit
// group) and write each as one order with lines; buyer1 is stopped (by
// its own go-redis hook) after line 0 of its 2nd cart is held and before
// line 1, buyer2 after lines 0 and 1 of its 3rd cart, and both are killed
// with SIGKILL there, other carts in flight; buyer3 is killed at a seeded
// moment. The reconciler then releases every held line with no order:
// counted, Redis holds exactly the live order lines and each cart is an
// order with all its lines or holds no stock; the killed carts'
// limit-group allowances stay taken (the reconciler releases ledger
// entries, not allowances) until the group's sweep
// (stock.Deductor.SweepGroup) gives them back: then every allowance equals
// the buyer's live lines and nothing of a cut cart is held anywhere,
// without the buyers. The buyers restarted settle their killed runs' carts
// (ReleaseLines, idempotent) and buy on; reconciled again, the same holds.
func TestCartKillBetweenLines(t *testing.T) {
	if testing.Short() {
		t.Skip("crash tier: real processes")
	}
	dsn := needMySQL(t)
	redisSrv := StartRedis(t, NoPersistence)
	RunCartKill(t, dsn, redisSrv.Client(), CartBuyerConfig{Redis: redisSrv.Addr()}, 1)

}
