package checkouttest_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouttest"
	"github.com/seckillkit/seckill/stock"
)

// editing is the embedded composition with edit applied to its steps
// before the kit's own edit, as a user's Config.Steps would be.
func editing(edit func(t testing.TB, steps []checkout.Step) []checkout.Step) checkouttest.NewSale {
	return func(t testing.TB, c checkouttest.Config) *checkouttest.Sale {
		kit := c.Steps
		c.Steps = func(d []checkout.Step) []checkout.Step { return kit(edit(t, d)) }
		return checkouttest.Embedded(t, c)
	}
}

// withoutUndo drops the Undo of the step named name.
func withoutUndo(name string) func(testing.TB, []checkout.Step) []checkout.Step {
	return func(t testing.TB, d []checkout.Step) []checkout.Step {
		i := slices.IndexFunc(d, func(s checkout.Step) bool { return s.Name == name })
		if i < 0 {
			t.Fatalf("no step %q", name)
		}
		d[i].Undo = nil
		return d
	}
}

// insertAfter inserts s after the step named name.
func insertAfter(name string, s checkout.Step) func(testing.TB, []checkout.Step) []checkout.Step {
	return func(t testing.TB, d []checkout.Step) []checkout.Step {
		i := slices.IndexFunc(d, func(s checkout.Step) bool { return s.Name == name })
		if i < 0 {
			t.Fatalf("no step %q", name)
		}
		return slices.Insert(d, i+1, s)
	}
}

func chain(edits ...func(testing.TB, []checkout.Step) []checkout.Step) func(testing.TB, []checkout.Step) []checkout.Step {
	return func(t testing.TB, d []checkout.Step) []checkout.Step {
		for _, e := range edits {
			d = e(t, d)
		}
		return d
	}
}

// collidingIDs replaces the reservation ID with user + "-" + request ID:
// without the length prefix, ("ann", "x-r1") and ("ann-x", "r1") collide.
var collidingIDs = insertAfter(checkout.StepShape, checkout.Step{Name: "colliding_ids",
	Run: func(_ context.Context, a *checkout.Attempt) checkout.Outcome {
		if a.RequestID != "" {
			a.SetReservation(a.User + "-" + a.RequestID)
		}
		return checkout.Outcome{}
	}})

// variantBlindIDs replaces the reservation ID with one that ignores the
// variant (checkout.ReservationID alone): the same request ID naming
// another variant lands on the first variant's reservation ID.
var variantBlindIDs = insertAfter(checkout.StepShape, checkout.Step{Name: "variant_blind_ids",
	Run: func(_ context.Context, a *checkout.Attempt) checkout.Outcome {
		if a.RequestID != "" {
			id, err := checkout.ReservationID(a.User, a.RequestID)
			if err == nil {
				a.SetReservation(id)
			}
		}
		return checkout.Outcome{}
	}})

// droppedVariant is a step after the shape that drops the attempt's
// variant (a handler that forgets to pass it on): the attempt buys the
// sale itself.
var droppedVariant = insertAfter(checkout.StepShape, checkout.Step{Name: "dropped_variant",
	Run: func(_ context.Context, a *checkout.Attempt) checkout.Outcome {
		a.Variant = ""
		return checkout.Outcome{}
	}})

// flakyAfterReserve inserts, after "reserve", a step that ends each buyer's
// first attempt Busy (a dependency timing out): the loop must give back
// what reserve took. A fresh step per sale.
func flakyAfterReserve(t testing.TB, d []checkout.Step) []checkout.Step {
	var mu sync.Mutex
	seen := map[string]bool{}
	return insertAfter(checkout.StepReserve, checkout.Step{Name: "flaky", Run: func(_ context.Context, a *checkout.Attempt) checkout.Outcome {
		mu.Lock()
		defer mu.Unlock()
		if seen[a.User] {
			return checkout.Outcome{}
		}
		seen[a.User] = true
		return checkout.Outcome{Kind: checkout.Busy, Reason: checkout.TryAgain, Err: errors.New("fraud service timed out")}
	}})(t, d)
}

// failing lists the scenarios whose failures include marker.
func failing(report map[string][]string, marker string) []string {
	var names []string
	for name, msgs := range report {
		if slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, marker) }) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// TestKitPassesEmbedded: the reference composition fails no scenario.
func TestKitPassesEmbedded(t *testing.T) {
	if report := checkouttest.Check(t, checkouttest.Embedded); len(report) != 0 {
		t.Errorf("the embedded composition fails the kit: %v", report)
	}
}

// TestKitFailsBrokenCompositions runs the kit against deliberately broken
// compositions: each must fail the scenarios that exercise what it broke,
// with the invariant it broke.
func TestKitFailsBrokenCompositions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(testing.TB, []checkout.Step) []checkout.Step
		marker string   // the invariant the failures name
		want   []string // scenarios that must fail with it
	}{
		{
			// A retryable refusal after the token keeps it spent.
			name: "no_token_undo", edit: withoutUndo(checkout.StepToken),
			marker: "kept the access token", want: []string{"kafka_and_db_down", "paused", "variant_handoff_failed"},
		},
		{
			// IDs without the length prefix: another buyer's attempt lands on ann's reservation.
			name: "colliding_ids", edit: collidingIDs,
			marker: `"ann-x" sending "r1"`, want: []string{"other_buyer"},
		},
		{
			// A retryable refusal after reserve, and reserve undoes nothing:
			// the buyer is told "retry" while holding a unit.
			name: "no_reserve_undo", edit: chain(withoutUndo(checkout.StepReserve), flakyAfterReserve),
			marker: "[truth]", want: []string{"frozen", "kafka_down", "lost_answer", "non_owner_result", "paused"},
		},
		{
			// The reservation ID ignores the variant: the same request ID
			// naming M gets S's reservation, and M's order is not M's.
			name: "variant_blind_ids", edit: variantBlindIDs,
			marker: "[variant]", want: []string{"variant_retry"},
		},
		{
			// The variant is dropped after the shape: no variant attempt
			// buys what it named.
			name: "dropped_variant", edit: droppedVariant,
			marker: "[expect]", want: []string{"variant_cap", "variant_retry", "variant_sold_out"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report := checkouttest.Check(t, editing(tc.edit))
			got := failing(report, tc.marker)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("scenario %s does not fail with %q; failing with it: %v; report: %v", w, tc.marker, got, report)
				}
			}
		})
	}
}

// TestKitRunsVariantScenarios: the embedded composition builds the
// variants the variant scenarios ask for (they are not skipped), and its
// counts name every variant; a constructor that ignores Config.Variants has
// them skipped, never passed.
func TestKitRunsVariantScenarios(t *testing.T) {
	c := checkouttest.Config{PerUserLimit: 1, Stock: 3, Variants: []stock.Variant{{ID: "S", Stock: 1}, {ID: "M", Stock: 2}}}
	c.Steps = func(d []checkout.Step) []checkout.Step { return d }
	s := checkouttest.Embedded(t, c)
	n, err := s.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.VariantRemaining["S"] != 1 || n.VariantRemaining["M"] != 2 || n.VariantDBRemaining["S"] != 1 || n.VariantDBRemaining["M"] != 2 ||
		n.RedisRemaining != 3 || n.DBRemaining != 3 {
		t.Fatalf("counts of a sale with variants: %+v", n)
	}
	var ran, skipped []string
	t.Run("ignoring", func(t *testing.T) {
		report := checkouttest.Check(t, func(t testing.TB, c checkouttest.Config) *checkouttest.Sale {
			c.Variants = nil
			return checkouttest.Embedded(t, c)
		})
		for sc := range report {
			if strings.HasPrefix(sc, "variant_") {
				t.Errorf("a constructor without variants fails %s: %v", sc, report[sc])
			}
		}
	})
	t.Run("embedded", func(t *testing.T) {
		checkouttest.Run(t, func(t testing.TB, c checkouttest.Config) *checkouttest.Sale {
			s := checkouttest.Embedded(t, c)
			if len(c.Variants) > 0 {
				ran = append(ran, t.Name())
			}
			return s
		})
		for _, sc := range []string{"variant_sold_out", "variant_retry", "variant_cap", "variant_early_sold_out", "variant_spent_token", "variant_resend_during_undo", "variant_handoff_failed"} {
			if !slices.ContainsFunc(ran, func(n string) bool { return strings.HasSuffix(n, "/"+sc) }) {
				skipped = append(skipped, sc)
			}
		}
	})
	if len(skipped) > 0 || len(ran) != 7 {
		t.Errorf("variant scenarios not run on the embedded composition: %v (ran %v)", skipped, ran)
	}
}

// TestKitUndoControl: the same flaky step with reserve's Undo kept breaks
// the scenarios' expected answers but never the truth — so the truth
// failures above are the missing undo's.
func TestKitUndoControl(t *testing.T) {
	report := checkouttest.Check(t, editing(flakyAfterReserve))
	if len(report) == 0 {
		t.Fatalf("a step refusing every buyer's first attempt fails no scenario")
	}
	if got := failing(report, "[truth]"); len(got) != 0 {
		t.Errorf("with reserve's Undo, scenarios %v fail the truth: %v", got, report)
	}
}

// TestKitRejectsBadConstructors: a constructor that returns no sale, or
// ignores Config.Steps, fails every scenario (recorded, not fatal here).
func TestKitRejectsBadConstructors(t *testing.T) {
	for name, newSale := range map[string]checkouttest.NewSale{
		"nil_sale": func(testing.TB, checkouttest.Config) *checkouttest.Sale { return nil },
		"ignores_steps": func(t testing.TB, c checkouttest.Config) *checkouttest.Sale {
			c.Steps = nil
			return checkouttest.Embedded(t, c)
		},
	} {
		t.Run(name, func(t *testing.T) {
			report := checkouttest.Check(t, newSale)
			if len(report) == 0 {
				t.Fatalf("no scenario failed")
			}
			for sc, msgs := range report {
				if len(msgs) != 1 || !strings.Contains(msgs[0], "the constructor must") {
					t.Errorf("%s: %v", sc, msgs)
				}
			}
		})
	}
}
