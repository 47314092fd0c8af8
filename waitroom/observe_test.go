package waitroom

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
)

// TestObserver: one event per call with the stable stage and outcome
// names, the sale as Activity, and the number admitted as Value.
func TestObserver(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	c := testenv.NewClock(t0)
	var mu sync.Mutex
	var got []string
	var admittedValue float64
	obs := observe.Func(func(_ context.Context, e observe.Event) {
		mu.Lock()
		defer mu.Unlock()
		if !observe.ValidStage(e.Stage) || !observe.ValidWord(e.Outcome) || e.Activity != "s1" {
			t.Errorf("bad event %+v", e)
		}
		got = append(got, e.Stage+"/"+e.Outcome)
		if e.Stage == stageAdmit && e.Value > 0 {
			admittedValue = e.Value
		}
	})
	r := newRoom(t, rdb, c, WithObserver(obs))
	configure(t, r, "s1", 0, 5)
	tk := join(t, r, "s1", "u")
	r.Start(ctx, "s1", testSeed)
	r.Admit(ctx, "s1", 5)
	p, _ := r.Poll(ctx, Credential{Sale: "s1", User: "u", Token: tk["u"]})
	r.Verify(ctx, Credential{Sale: "s1", User: "u", Token: p.Pass})
	r.Verify(ctx, Credential{Sale: "s1", User: "u", Token: tk["u"]})
	c.Add(7 * time.Hour)
	r.Poll(ctx, Credential{Sale: "s1", User: "u", Token: tk["u"]})
	want := []string{"waitroom.join/ok", "waitroom.admit/ok", "waitroom.poll/ok", "waitroom.verify/ok", "waitroom.verify/malformed", "waitroom.poll/expired"}
	if !slices.Equal(got, want) || admittedValue != 1 {
		t.Fatalf("events %v (admit value %v), want %v", got, admittedValue, want)
	}
}
