package observe_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

type key struct{}

func TestFuncAndMulti(t *testing.T) {
	var got []string
	rec := func(tag string) observe.Observer {
		return observe.Func(func(ctx context.Context, e observe.Event) {
			got = append(got, tag+":"+e.Stage+":"+e.Outcome+":"+ctx.Value(key{}).(string))
		})
	}
	ctx := context.WithValue(context.Background(), key{}, "caller")
	m := observe.Multi{rec("a"), nil, rec("b")}
	m.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: observe.OK, Duration: time.Millisecond})
	want := []string{"a:stock.reserve:ok:caller", "b:stock.reserve:ok:caller"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v (in order, nil skipped, ctx passed)", got, want)
	}
	observe.Multi(nil).Observe(ctx, observe.Event{}) // empty: no panic
}

func TestValidStageAndWord(t *testing.T) {
	for s, want := range map[string]bool{
		"stock.reserve": true, "order.consumer_lag": true, "a.b.c": true,
		"stock": false, "Stock.reserve": false, "stock..reserve": false, ".stock": false,
		"stock.reserve.": false, "stock.9x": false, "stock.re-serve": false, "": false,
		"a." + strings.Repeat("b", 99): false,
	} {
		if got := observe.ValidStage(s); got != want {
			t.Errorf("ValidStage(%q) = %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]bool{"ok": true, "sold_out": true, "x9": true, "": false, "Ok": false, "9x": false, "a-b": false, strings.Repeat("a", 65): false} {
		if got := observe.ValidWord(s); got != want {
			t.Errorf("ValidWord(%q) = %v, want %v", s, got, want)
		}
	}
}
