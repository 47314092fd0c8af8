package observe_test

import (
	"context"
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
