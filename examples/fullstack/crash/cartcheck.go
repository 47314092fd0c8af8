package crash

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/order"
	orderreconcile "github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/stock"
)

// ReconcileCarts runs the order reconciler over every unit of the sale,
// with grace (the buyers are stopped: nothing is on its way), and returns
// the reservations it released.
func ReconcileCarts(ctx context.Context, db *gorm.DB, d *stock.Deductor, s CartSale, grace time.Duration) ([]string, error) {
	rec, err := orderreconcile.NewReconciler(db, checkout.Ledger(d), checkout.Releaser(d), orderreconcile.WithGrace(grace))
	if err != nil {
		return nil, err
	}
	var released []string
	for _, u := range s.Units() {
		rep, err := rec.Reconcile(ctx, u)
		if err != nil {
			return released, fmt.Errorf("reconcile %s: %w", u, err)
		}
		if len(rep.ReleaseErrors) > 0 {
			return released, fmt.Errorf("reconcile %s: %d releases failed", u, len(rep.ReleaseErrors))
		}
		released = append(released, rep.Released...)
	}
	return released, nil
}

// CartCount is what [CheckCarts] counted.
type CartCount struct {
	Carts, Ordered, Refused, Unsettled int            // journaled carts: with an order, finished without, neither (reconciled)
	Orders, Lines                      int            // live orders with lines, their lines
	Units                              int64          // units sold (live lines)
	GroupHeldRedis, GroupHeldDB        int64          // allowances taken in Redis, units of the group's live lines
	LeakedAllowances                   int64          // allowance units Redis holds beyond the buyers' live lines
	MaxGroup                           int64          // the most units one buyer holds in the group (DB)
	SoldOut                            int            // units with nothing left
	GroupRefused, DBGroupRefused       int            // carts refused by the group's cap in Redis, in the database
	Reasons                            map[string]int // the journals' F and E reasons, counted
}

func (c CartCount) String() string {
	return fmt.Sprintf("carts=%d ordered=%d refused=%d unsettled=%d orders=%d lines=%d units=%d group redis=%d db=%d leaked=%d max/buyer=%d soldout-units=%d group-refused redis=%d db=%d",
		c.Carts, c.Ordered, c.Refused, c.Unsettled, c.Orders, c.Lines, c.Units, c.GroupHeldRedis, c.GroupHeldDB,
		c.LeakedAllowances, c.MaxGroup, c.SoldOut, c.GroupRefused, c.DBGroupRefused)
}

// CartCheck says what [CheckCarts] holds to.
type CartCheck struct {
	// Settled: the reconciler has run and every buyer has ended, so
	// Redis holds exactly the live lines (a cart is an order with all its
	// lines, or holds nothing) and Redis and the database agree on every
	// unit's stock.
	Settled bool
	// ExactGroup: Redis's allowances are exactly the buyers' live lines
	// in the group (every cart cut short was given back by ReleaseLines or
	// the group's sweep, stock.Deductor.SweepGroup; after lost writes,
	// the group rebuilt with stock.Deductor.RebuildGroup and swept).
	// Without it, Redis may hold more (a cart killed between its
	// allowance and its order, not yet recovered: it errs on the buyer's
	// side) but every cap is still counted.
	ExactGroup bool
	// LostWrites: Redis lost acknowledged writes (a failover without
	// them); a journaled order whose ledger entry is gone is then
	// expected (the fence froze the unit and a rebuild restored it) and,
	// unless ExactGroup, the allowances may be under the live lines (the
	// group's fence freezes the group; RebuildGroup restores them).
	LostWrites bool
}

type liveLine struct {
	Resv, User, Unit, OrderNo string
	Qty                       int64
}

// CheckCarts counts every invariant of the cart sale from the database
// and from Redis (never through a buyer) and returns the violations.
func CheckCarts(ctx context.Context, db *gorm.DB, rdb redis.UniversalClient, s CartSale, journals string, ck CartCheck) (CartCount, []string, error) {
	c := CartCount{Reasons: map[string]int{}}
	var viol []string
	bad := func(f string, a ...any) { viol = append(viol, fmt.Sprintf(f, a...)) }
	d, err := stock.New(rdb, stock.WithKeyPrefix(s.Prefix), stock.WithoutSoldOutCache())
	if err != nil {
		return c, nil, err
	}
	carts, err := ReadJournals(journals)
	if err != nil {
		return c, nil, err
	}

	// The database: live lines, orders, activity rows, the group table.
	var lines []liveLine
	if err := db.Raw(`SELECT l.reservation_id AS resv, l.user_id AS user, l.activity_id AS unit, l.order_no AS order_no, l.qty AS qty
		FROM seckill_order_line l JOIN seckill_order o ON o.order_no = l.order_no
		WHERE l.status = '' AND o.status IN (?, ?)`, order.OrderCreated, order.OrderPaid).Scan(&lines).Error; err != nil {
		return c, nil, err
	}
	type ord struct{ OrderNo, ReservationID, UserID, Status string }
	var orders []ord
	if err := db.Raw("SELECT order_no, reservation_id, user_id, status FROM seckill_order").Scan(&orders).Error; err != nil {
		return c, nil, err
	}
	var acts []order.Activity
	if err := db.Where("id IN ?", s.Units()).Find(&acts).Error; err != nil {
		return c, nil, err
	}
	type gRow struct {
		UserID string
		Held   int64
	}
	var grows []gRow
	if err := db.Raw("SELECT user_id, held FROM "+GroupTable+" WHERE grp = ?", s.Group).Scan(&grows).Error; err != nil {
		return c, nil, err
	}

	byOrder := map[string][]liveLine{}
	liveByResv := map[string]liveLine{}
	unitUser := map[string]map[string]int64{}
	unitSold := map[string]int64{}
	groupDB := map[string]int64{}
	variedDB := map[string]int64{}
	for _, l := range lines {
		byOrder[l.OrderNo] = append(byOrder[l.OrderNo], l)
		if _, dup := liveByResv[l.Resv]; dup {
			bad("line reservation %s is live twice", l.Resv)
		}
		liveByResv[l.Resv] = l
		if unitUser[l.Unit] == nil {
			unitUser[l.Unit] = map[string]int64{}
		}
		unitUser[l.Unit][l.User] += l.Qty
		unitSold[l.Unit] += l.Qty
		groupDB[l.User] += l.Qty
		if strings.HasPrefix(l.Unit, s.Varied+"/") {
			variedDB[l.User] += l.Qty
		}
		c.Lines++
		c.Units += l.Qty
	}
	resvOrders := map[string][]ord{}
	for _, o := range orders {
		resvOrders[o.ReservationID] = append(resvOrders[o.ReservationID], o)
	}
	for r, os := range resvOrders {
		if len(os) > 1 {
			bad("duplicate order: reservation %s has %d orders", r, len(os))
		}
	}
	for _, o := range orders {
		if o.Status != order.OrderCreated && o.Status != order.OrderPaid {
			continue
		}
		c.Orders++
		ls := byOrder[o.OrderNo]
		if len(ls) != 3 {
			bad("order %s (cart %s) has %d live lines, want 3", o.OrderNo, o.ReservationID, len(ls))
		}
		for _, l := range ls {
			if !strings.HasPrefix(l.Resv, o.ReservationID+"#") || l.User != o.UserID {
				bad("order %s has line %s of %s", o.OrderNo, l.Resv, l.User)
			}
		}
	}
	for u, n := range groupDB {
		c.GroupHeldDB += n
		c.MaxGroup = max(c.MaxGroup, n)
		if n > s.GroupLimit {
			bad("limit group in the DB: buyer %s holds %d units of group %s, cap %d", u, n, s.Group, s.GroupLimit)
		}
	}
	for u, n := range variedDB {
		if n > s.VariedLimit {
			bad("DB: buyer %s holds %d units over %s's variants, cap %d", u, n, s.Varied, s.VariedLimit)
		}
	}
	counter := map[string]int64{}
	for _, g := range grows {
		counter[g.UserID] = g.Held
		if g.Held > s.GroupLimit {
			bad("the group table holds %d units for %s, cap %d", g.Held, g.UserID, s.GroupLimit)
		}
	}
	for u, n := range groupDB {
		if counter[u] != n {
			bad("the group table holds %d units for %s, its live lines %d", counter[u], u, n)
		}
	}

	// Redis and the database, unit by unit.
	for _, a := range acts {
		u := a.ID
		init := s.initial(u)
		if a.Stock != init {
			bad("%s: DB total %d, want %d", u, a.Stock, init)
		}
		if a.Remaining < 0 {
			bad("oversell in the DB: %s has %d units", u, a.Remaining)
		}
		if a.Remaining+unitSold[u] != init {
			bad("conservation in the DB: %s remaining %d + live lines %d != %d", u, a.Remaining, unitSold[u], init)
		}
		for usr, n := range unitUser[u] {
			if n > s.limit(u) {
				bad("DB: buyer %s holds %d units of %s, cap %d", usr, n, u, s.limit(u))
			}
		}
		st, err := d.Stats(ctx, u)
		if err != nil {
			return c, viol, fmt.Errorf("stats %s: %w", u, err)
		}
		if st.Remaining == 0 {
			c.SoldOut++
		}
		heldIDs := map[string]stock.Reservation{} // HSCAN may repeat an entry: each counted once
		for cur := uint64(0); ; {
			page, next, err := d.Reservations(ctx, u, cur, 500)
			if err != nil {
				return c, viol, fmt.Errorf("ledger %s: %w", u, err)
			}
			for _, r := range page {
				if r.State == stock.Held {
					heldIDs[r.ID] = r
				}
			}
			if cur = next; cur == 0 {
				break
			}
		}
		var held int64
		heldBy := map[string]int64{}
		for _, r := range heldIDs {
			held += r.Qty
			heldBy[r.User] += r.Qty
		}
		if st.Remaining < 0 {
			bad("oversell in Redis: %s has %d units", u, st.Remaining)
		}
		if st.Remaining+held != st.Total || st.Total != init {
			bad("conservation in Redis: %s remaining %d + held %d != total %d (initial %d)", u, st.Remaining, held, st.Total, init)
		}
		if ck.Settled {
			for id, r := range heldIDs {
				if l, ok := liveByResv[id]; !ok || l.Qty != r.Qty {
					bad("%s: Redis holds %s (%d units) with no live order line", u, id, r.Qty)
				}
			}
			for id, l := range liveByResv {
				if l.Unit == u {
					if _, ok := heldIDs[id]; !ok {
						bad("%s: live line %s of order %s is not held in Redis", u, id, l.OrderNo)
					}
				}
			}
			if st.Remaining != a.Remaining {
				bad("%s: Redis remaining %d, DB remaining %d", u, st.Remaining, a.Remaining)
			}
		}
		for usr, n := range heldBy {
			if n > s.limit(u) {
				bad("Redis: buyer %s holds %d units of %s, cap %d", usr, n, u, s.limit(u))
			}
		}
	}

	// The limit group in Redis.
	gh, err := rdb.HGetAll(ctx, GroupHeldKey(s.Prefix, s.Group)).Result()
	if err != nil {
		return c, viol, err
	}
	for u, v := range gh {
		n, _ := strconv.ParseInt(v, 10, 64)
		c.GroupHeldRedis += n
		if n > s.GroupLimit {
			bad("limit group in Redis: buyer %s holds %d units, cap %d", u, n, s.GroupLimit)
		}
		switch {
		case n > groupDB[u]:
			c.LeakedAllowances += n - groupDB[u]
			if ck.ExactGroup {
				bad("limit group: Redis holds %d units of %s's allowance, its live lines %d (a cart cut short kept its allowance)", n, u, groupDB[u])
			}
		case n < groupDB[u] && (!ck.LostWrites || ck.ExactGroup):
			bad("limit group: Redis holds %d units of %s's allowance, under its live lines %d", n, u, groupDB[u])
		}
	}
	for u, n := range groupDB {
		if _, ok := gh[u]; !ok && (!ck.LostWrites || ck.ExactGroup) && n > 0 {
			bad("limit group: Redis holds no allowance of %s, its live lines %d", u, n)
		}
	}

	// The journals: nothing accepted lost, every cart all or nothing.
	ids := make([]string, 0, len(carts))
	for id := range carts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		cart := carts[id]
		if cart.K == "" {
			continue // a record of a cart begun by a run whose begin line was cut
		}
		c.Carts++
		os := resvOrders[id]
		live := len(os) == 1 && (os[0].Status == order.OrderCreated || os[0].Status == order.OrderPaid)
		switch {
		case cart.Order != "":
			c.Ordered++
			if !live || os[0].OrderNo != cart.Order {
				bad("accepted cart %s (order %s) is not a live order", id, cart.Order)
			}
		case contains(cart.Kinds, "F"):
			c.Refused++
			for _, w := range cart.Whys {
				c.Reasons[w]++
				switch {
				case strings.Contains(w, "(group true)"):
					c.GroupRefused++
				case strings.Contains(w, "group cap"):
					c.DBGroupRefused++
				}
			}
			if len(os) > 0 {
				bad("cart %s finished without an order has order %s", id, os[0].OrderNo)
			}
		default:
			c.Unsettled++
			for _, w := range cart.Whys {
				c.Reasons["unsettled: "+w]++
			}
		}
		if !live && ck.Settled {
			for i := range cart.Lines {
				lid := id + "#" + strconv.Itoa(i)
				if _, ok := liveByResv[lid]; ok {
					bad("cart %s has no live order but its line %s is live", id, lid)
				}
			}
		}
	}
	return c, viol, nil
}

func contains(ks []string, k string) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
