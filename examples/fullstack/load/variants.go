package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"
)

// A sale with variants (the service's -variants): /api/activity lists the
// sizes, each buyer picks one before buying (Config.VariantWeights, else a
// Zipf law over the sizes in the order the sale lists them: the first is
// the most wanted), the buy body carries it, and the run is counted and
// checked per size as well as over the sale (CheckVariants).

// VariantInvariants is one variant's counts in GET /api/demo/invariants
// (the service's app.VariantCounts).
type VariantInvariants struct {
	ID              string         `json:"id"`
	Initial         int64          `json:"initial"`
	Adjusted        int64          `json:"adjusted"`
	Total           int64          `json:"total"`          // the DB row's total_stock
	PerUserLimit    int64          `json:"per_user_limit"` // the variant's cap per buyer
	RedisLoaded     bool           `json:"redis_loaded"`
	RedisTotal      int64          `json:"redis_total"`
	RedisRemain     int64          `json:"redis_remaining"`
	RedisLive       int64          `json:"redis_live"` // reservations held
	RedisHeld       int64          `json:"redis_held"` // their units
	RedisReleased   int64          `json:"redis_released"`
	RedisMaxPerUser int64          `json:"redis_max_per_user"`
	PoolRemain      int64          `json:"pool_remaining"`    // its DB fallback pool: units left (0 without one)
	PoolLive        int64          `json:"pool_live"`         // reservations held in the pool
	PoolHeld        int64          `json:"pool_held"`         // their units
	PoolMaxPerUser  int64          `json:"pool_max_per_user"` // most units one buyer holds in the pool
	DBStock         int64          `json:"db_stock"`
	Orders          map[string]int `json:"orders"`
	LiveOrders      int64          `json:"live_orders"` // units
	LiveCount       int64          `json:"live_count"`  // orders
	RefundedSale    int64          `json:"refunded_sale"`
	DistinctUsers   int64          `json:"distinct_users"`
	MaxPerUser      int64          `json:"max_per_user"`
	InFlight        int64          `json:"in_flight"`
}

// Units is the variant's stock on sale: initial plus adjustments.
func (v VariantInvariants) Units() int64 { return v.Initial + v.Adjusted }

// VariantView is one size as /api/activity lists it.
type VariantView struct {
	ID        string `json:"id"`
	Total     int64  `json:"total_stock"`
	Remaining int64  `json:"remaining"`
	SoldOut   bool   `json:"sold_out"`
	Limit     int64  `json:"per_user_limit"`
}

// VariantRun is what the buyers of one size got (Report.Variants).
type VariantRun struct {
	ID       string
	Weight   float64        // its share of the buyers' choices
	Attempts int            // buy requests for it
	Outcomes map[string]int // their answers by status
	Accepted int
	// SoldOutAt is when, after the buy phase's start, it was first
	// answered sold_out (0: never).
	SoldOutAt time.Duration
}

// ParseVariantWeights reads "ID=WEIGHT,..." (loadgen -variant-weights).
func ParseVariantWeights(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, w, ok := strings.Cut(p, "=")
		var x float64
		if _, err := fmt.Sscanf(strings.TrimSpace(w), "%g", &x); !ok || err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("variant weight %q: want ID=WEIGHT with WEIGHT >= 0", p)
		}
		id = strings.TrimSpace(id)
		if _, dup := out[id]; dup || id == "" {
			return nil, fmt.Errorf("variant weight %q: empty or repeated ID", p)
		}
		out[id] = x
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no variant weight given (want ID=WEIGHT,...)")
	}
	return out, nil
}

// variantWeights is the share of the buyers' choices of each of vs: the
// given weights (each variant named, at least one above 0), else Zipf with
// exponent s (1 when 0) over vs in order.
func variantWeights(vs []VariantView, given map[string]float64, s float64) ([]float64, error) {
	w := make([]float64, len(vs))
	var sum float64
	if len(given) > 0 {
		for id := range given {
			if !slices.ContainsFunc(vs, func(v VariantView) bool { return v.ID == id }) {
				return nil, fmt.Errorf("load: variant weight for %q, which the sale does not sell", id)
			}
		}
		for i, v := range vs {
			w[i] = given[v.ID]
			sum += w[i]
		}
		if sum == 0 {
			return nil, fmt.Errorf("load: the variant weights are all 0")
		}
	} else {
		if s <= 0 {
			s = 1
		}
		for i := range vs {
			w[i] = 1 / math.Pow(float64(i+1), s)
			sum += w[i]
		}
	}
	for i := range w {
		w[i] /= sum
	}
	return w, nil
}

// pickVariants gives each attempt a size drawn by the weights w of vs.
func pickVariants(atts []*attempt, vs []VariantView, w []float64, rng *rand.Rand) {
	cum := make([]float64, len(w))
	var c float64
	for i, x := range w {
		c += x
		cum[i] = c
	}
	for _, a := range atts {
		i := sort.SearchFloat64s(cum, rng.Float64()*c)
		a.variant = vs[min(i, len(vs)-1)].ID
	}
}

// tallyVariants fills Report.Variants from the answers.
func (r *runner) tallyVariants(vs []VariantView, w []float64) {
	if len(vs) == 0 {
		return
	}
	rep := r.rep
	byID := map[string]*VariantRun{}
	for i, v := range vs {
		rep.Variants = append(rep.Variants, VariantRun{ID: v.ID, Weight: w[i], Outcomes: map[string]int{}})
	}
	for i := range rep.Variants {
		byID[rep.Variants[i].ID] = &rep.Variants[i]
	}
	for _, a := range r.atts {
		vr := byID[a.variant]
		if vr == nil {
			continue
		}
		vr.Attempts++
		vr.Outcomes[a.outcome]++
		// The reservation is of the size asked for (checkout folds the
		// size into a variant attempt's reservation ID: "<attempt>/<size>").
		if a.resv != "" && !strings.HasSuffix(a.resv, "/"+a.variant) {
			rep.Violations = append(rep.Violations, fmt.Sprintf("a buyer asked for size %s and was given reservation %s", a.variant, a.resv))
		}
		if a.outcome == "queued" {
			vr.Accepted++
		}
		if a.outcome == "sold_out" && !a.start.IsZero() {
			at := a.start.Add(a.latency).Sub(rep.Started)
			if vr.SoldOutAt == 0 || at < vr.SoldOutAt {
				vr.SoldOutAt = max(at, time.Nanosecond)
			}
		}
	}
}

// variantReleased counts, per size, the accepted reservations whose final
// result was a release (failed or released).
func (r *runner) variantFinals() {
	if len(r.rep.Variants) == 0 {
		return
	}
	r.rep.VariantReleased = map[string]int{}
	for _, a := range r.atts {
		if a.outcome == "queued" && (a.last == "failed" || a.last == "released") {
			r.rep.VariantReleased[a.variant]++
		}
	}
}

// CheckVariants lists every violated per-variant invariant of a sale with
// variants, counted from the service's Redis and SQL (iv): for each
// variant no oversell, its per-user cap in the DB, in the Redis ledger and
// in its DB fallback pool, conservation over Redis and its pool and in the
// DB (remaining + held = initial ± adjustments, and the same totals in the DB row, the DB ledger and
// Redis), every held reservation a live order once settled; over the
// sale, the activity-wide per-user cap (DB and Redis) and no duplicate
// order. accepted and released, when not nil, are the buyers' accepted
// reservations per variant and those of them released: each variant's
// orders (live, cancelled, refunded to the sale) must be their difference
// (nothing accepted lost).
func CheckVariants(iv Invariants, accepted, released map[string]int) []string {
	var out []string
	add := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	for _, v := range iv.Variants {
		units := v.Units()
		if v.Total != units {
			add("I5 variant %s: db total_stock %d != initial %d + adjustments %d", v.ID, v.Total, v.Initial, v.Adjusted)
		}
		if pool := v.PoolRemain + v.PoolHeld; v.RedisTotal+pool != units {
			add("I5 variant %s: redis total %d + DB pool %d != initial %d + adjustments %d", v.ID, v.RedisTotal, pool, v.Initial, v.Adjusted)
		}
		if v.LiveOrders > units {
			add("I1 variant %s oversold: %d sold > %d units", v.ID, v.LiveOrders, units)
		}
		if v.RedisRemain < 0 || v.DBStock < 0 || v.PoolRemain < 0 {
			add("I1 variant %s: negative stock: redis %d, db %d, DB pool %d", v.ID, v.RedisRemain, v.DBStock, v.PoolRemain)
		}
		if v.MaxPerUser > v.PerUserLimit {
			add("I2 variant %s: a buyer holds %d units in the DB (cap %d)", v.ID, v.MaxPerUser, v.PerUserLimit)
		}
		if v.RedisMaxPerUser > v.PerUserLimit {
			add("I2 variant %s: a buyer holds %d units in the Redis ledger (cap %d)", v.ID, v.RedisMaxPerUser, v.PerUserLimit)
		}
		if v.PoolMaxPerUser > v.PerUserLimit {
			add("I2 variant %s: a buyer holds %d units in the DB pool (cap %d)", v.ID, v.PoolMaxPerUser, v.PerUserLimit)
		}
		if v.RedisRemain+v.RedisHeld+v.PoolRemain+v.PoolHeld != units {
			add("I5 variant %s: redis remaining %d + held %d + DB pool remaining %d + held %d != units %d",
				v.ID, v.RedisRemain, v.RedisHeld, v.PoolRemain, v.PoolHeld, units)
		}
		if v.DBStock+v.LiveOrders != units {
			add("I5 variant %s: db stock %d + live orders %d != units %d", v.ID, v.DBStock, v.LiveOrders, units)
		}
		if iv.Settled && v.RedisLive+v.PoolLive != v.LiveCount {
			add("I3 variant %s: redis (and the DB pool) hold %d+%d live reservations but the DB %d live orders", v.ID, v.RedisLive, v.PoolLive, v.LiveCount)
		}
		if accepted != nil {
			n := v.LiveCount + int64(v.Orders["CANCELLED"]) + v.RefundedSale
			if want := int64(accepted[v.ID] - released[v.ID]); n != want {
				add("I3 variant %s: orders %d (live %d + cancelled %d + refunded to the sale %d) != accepted %d - released %d",
					v.ID, n, v.LiveCount, v.Orders["CANCELLED"], v.RefundedSale, accepted[v.ID], released[v.ID])
			}
		}
	}
	if iv.MaxPerUser > iv.PerUserLimit {
		add("I2 a buyer holds %d units over all variants in the DB (the sale's cap %d)", iv.MaxPerUser, iv.PerUserLimit)
	}
	if iv.RedisMaxPerUser > iv.PerUserLimit {
		add("I2 a buyer holds %d units over all variants in the Redis ledgers (the sale's cap %d)", iv.RedisMaxPerUser, iv.PerUserLimit)
	}
	if iv.PoolMaxPerUser > iv.PerUserLimit {
		add("I2 a buyer holds %d units over all variants in the DB pools (the sale's cap %d)", iv.PoolMaxPerUser, iv.PerUserLimit)
	}
	if iv.DuplicateOrders > 0 {
		add("I4 %d orders beyond one per reservation", iv.DuplicateOrders)
	}
	return out
}

// variantAccepted is the accepted reservations per variant of the run.
func (r *Report) variantAccepted() map[string]int {
	if len(r.Variants) == 0 {
		return nil
	}
	m := map[string]int{}
	for _, v := range r.Variants {
		m[v.ID] = v.Accepted
	}
	return m
}

// variantLines is the terminal report's table of the sizes.
func (r *Report) variantLines() string {
	if len(r.Variants) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("variants    size  weight  initial  sold  left  sold out at  answers\n")
	for _, row := range r.variantRows() {
		fmt.Fprintf(&b, "            %-5s %6s  %7d  %4d  %4d  %11s  %s\n", row.ID, row.Weight, row.Initial, row.Sold, row.Left, row.SoldOutAt, row.Answers)
	}
	return b.String()
}

// variantRow is one size in the reports.
type variantRow struct {
	ID, Weight, SoldOutAt, Answers string
	Initial, Sold, Left, Accepted  int64
}

func (r *Report) variantRows() []variantRow {
	counts := map[string]VariantInvariants{}
	for _, v := range r.Server.Variants {
		counts[v.ID] = v
	}
	out := make([]variantRow, 0, len(r.Variants))
	for _, v := range r.Variants {
		c := counts[v.ID]
		row := variantRow{ID: v.ID, Weight: fmt.Sprintf("%.1f%%", 100*v.Weight), Initial: c.Units(), Sold: c.LiveOrders,
			Left: c.RedisRemain, Accepted: int64(v.Accepted), SoldOutAt: "-", Answers: fmtMap(v.Outcomes)}
		if v.SoldOutAt > 0 {
			row.SoldOutAt = v.SoldOutAt.Round(time.Millisecond).String()
		}
		out = append(out, row)
	}
	return out
}
