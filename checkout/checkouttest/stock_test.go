package checkouttest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

// wrapped is the embedded composition with its checkout's Stock made of
// the Deductor by wrap.
func wrapped(wrap func(*stock.Deductor) checkout.Stock) NewSale {
	return func(t testing.TB, c Config) *Sale {
		e := &embedded{t: t, clk: testenv.NewEpochClock(0), openDB: testenv.SQLite, wrap: wrap}
		e.build(c)
		return e.sale
	}
}

// sizeHeld answers Held of a sale in sizes as one ledger would: the
// sale's own, which holds nothing (0), or, with notLoaded, not loaded
// (what Held of a plain activity answered before it summed the sizes).
type sizeHeld struct {
	*stock.Deductor
	notLoaded bool
}

func (s sizeHeld) Held(ctx context.Context, activity, user string) (int64, error) {
	if strings.Contains(activity, "/") {
		return s.Deductor.Held(ctx, activity, user)
	}
	if _, err := s.Deductor.Variants(ctx, activity); err != nil {
		return s.Deductor.Held(ctx, activity, user) // a plain sale
	}
	if s.notLoaded {
		return 0, stock.ErrNotLoaded
	}
	return 0, nil
}

// eagerSoldOut calls a sale in sizes sold out as soon as any size is, and
// refuses every prefix then, whatever the sizes' ledgers hold.
type eagerSoldOut struct {
	*stock.Deductor
	sizes []string
}

func (e eagerSoldOut) SoldOut(activity string) bool {
	if strings.Contains(activity, "/") {
		return e.Deductor.SoldOut(activity)
	}
	return slices.ContainsFunc(e.sizes, func(v string) bool { return e.Deductor.SoldOut(stock.VariantOf(activity, v)) })
}

func (e eagerSoldOut) SoldOutForPrefix(activity, prefix string) bool {
	if strings.Contains(activity, "/") {
		return e.Deductor.SoldOutForPrefix(activity, prefix)
	}
	return e.SoldOut(activity)
}

// blindPrefix answers SoldOutForPrefix of a sale in sizes from the sold-out
// flags alone: a buyer who won a size is refused before the body too.
type blindPrefix struct{ *stock.Deductor }

func (b blindPrefix) SoldOutForPrefix(activity, prefix string) bool {
	if strings.Contains(activity, "/") {
		return b.Deductor.SoldOutForPrefix(activity, prefix)
	}
	return b.Deductor.SoldOut(activity)
}

// TestKitFailsBrokenStock: compositions whose Stock breaks the contract
// for a sale in sizes (checkout.Stock: Held of the sale is the sum over
// its sizes; SoldOut and SoldOutForPrefix of the sale only when every size
// is sold out and no size's ledger holds the prefix) fail the kit, naming
// what they broke.
func TestKitFailsBrokenStock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(*stock.Deductor) checkout.Stock
		marker string
		want   []string
	}{
		{"held_of_one_ledger", func(d *stock.Deductor) checkout.Stock { return sizeHeld{Deductor: d} }, "[held]", []string{"variant_spent_token"}},
		{"held_not_loaded", func(d *stock.Deductor) checkout.Stock { return sizeHeld{Deductor: d, notLoaded: true} }, "[held]", []string{"variant_spent_token"}},
		{"sold_out_at_any_size", func(d *stock.Deductor) checkout.Stock {
			return eagerSoldOut{Deductor: d, sizes: []string{"S", "M", "L"}}
		},
			"[truth] SoldOutFor", []string{"variant_early_sold_out"}},
		{"prefix_blind", func(d *stock.Deductor) checkout.Stock { return blindPrefix{d} }, "[truth] SoldOutFor", []string{"variant_early_sold_out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report := Check(t, wrapped(tc.wrap))
			for _, w := range tc.want {
				if !slices.ContainsFunc(report[w], func(m string) bool { return strings.Contains(m, tc.marker) }) {
					t.Errorf("scenario %s does not fail with %q; report: %v", w, tc.marker, report)
				}
			}
		})
	}
}

// TestEmbeddedRefusesSizesEarly: the reference composition's early
// refusal fires for a sale in sizes once every size is sold out (the kit
// allows a stock that never refuses early; the Deductor does), for a
// buyer who won nothing only.
func TestEmbeddedRefusesSizesEarly(t *testing.T) {
	ctx := context.Background()
	s := Embedded(t, Config{Stock: 2, PerUserLimit: 1, Variants: []stock.Variant{{ID: "S", Stock: 1}, {ID: "M", Stock: 1}},
		Steps: func(d []checkout.Step) []checkout.Step { return d }})
	buy := func(user, req, v string) checkout.Outcome {
		a, err := s.Attempt(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		a.RequestID, a.Variant = req, v
		return s.Checkout.Buy(ctx, &a)
	}
	for _, b := range [][3]string{{"ann", "r1", "S"}, {"bob", "r1", "M"}} {
		if o := buy(b[0], b[1], b[2]); o.Kind != checkout.Accepted {
			t.Fatalf("%v: %+v", b, o)
		}
	}
	for _, v := range []string{"S", "M"} {
		if s.Checkout.SoldOutFor("dave") {
			t.Fatalf("refused early before %s was seen sold out", v)
		}
		if o := buy("carl", "r-"+v, v); o.Kind != checkout.Refused || o.Reason != checkout.SoldOut {
			t.Fatalf("carl at %s: %+v", v, o)
		}
	}
	if !s.Checkout.SoldOutFor("dave") || !s.Checkout.SoldOutFor("carl") {
		t.Error("every size sold out: a buyer who won nothing is not refused early")
	}
	if s.Checkout.SoldOutFor("ann") || s.Checkout.SoldOutFor("bob") {
		t.Error("a buyer who won a size is refused early")
	}
}

// TestKitFailsPlainUndo: the embedded composition with its undo releasing
// straight in Redis (no checkout.Config.Fence) fails both
// resend_during_undo scenarios on conservation: the resend's order is live
// and its units were given back.
func TestKitFailsPlainUndo(t *testing.T) {
	report := Check(t, func(t testing.TB, c Config) *Sale {
		e := &embedded{t: t, clk: testenv.NewEpochClock(0), openDB: testenv.SQLite, plainUndo: true}
		e.build(c)
		return e.sale
	})
	for _, w := range []string{"resend_during_undo", "variant_resend_during_undo"} {
		if !slices.ContainsFunc(report[w], func(m string) bool { return strings.Contains(m, "[conserved]") }) {
			t.Errorf("scenario %s does not fail with [conserved]; report: %v", w, report)
		}
	}
	for sc := range report {
		if !strings.HasSuffix(sc, "resend_during_undo") {
			t.Errorf("a plain undo fails %s too: %v", sc, report[sc])
		}
	}
}
