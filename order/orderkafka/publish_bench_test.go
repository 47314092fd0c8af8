package orderkafka

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	kafkamsg "github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
)

// BenchmarkPublish measures Producer.Publish from many concurrent callers
// (64 goroutines per GOMAXPROCS, like buyers waiting for their 202) into an
// in-process kfake cluster of three brokers, one topic of three
// partitions, sarama configured by SaramaConfig (acks=all, idempotent, one
// request in flight per broker). mode=one-by-one is today's path (one
// SendMessage per Publish); mode=batched is WithBatching(linger, max). Run
// them in one invocation: the ratio is what counts. Metrics:
// calls/msg — produce calls (SendMessage or SendMessages) per message, from
// WithObserver; reqs/msg — Produce requests the brokers received per
// message (sarama packs what meets in its queue into one request per
// broker either way).
func BenchmarkPublish(b *testing.B) {
	for _, bc := range []struct {
		name   string
		opts   []ProducerOption
		linger time.Duration
	}{
		{"mode=one-by-one", nil, 0},
		{"mode=batched/linger=0/max=256", []ProducerOption{WithBatching(0, 256)}, 0},
		{"mode=batched/linger=200µs/max=256", []ProducerOption{WithBatching(200*time.Microsecond, 256)}, 0},
		{"mode=batched/linger=1ms/max=256", []ProducerOption{WithBatching(time.Millisecond, 256)}, 0},
	} {
		b.Run(bc.name, func(b *testing.B) { benchPublish(b, bc.opts) })
	}
}

func benchPublish(b *testing.B, opts []ProducerOption) {
	k, err := testenv.StartKafka(3, "orders")
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	var reqs atomic.Int64
	k.ControlKey(int16(kafkamsg.Produce), func(kafkamsg.Request) (kafkamsg.Response, error, bool) {
		k.KeepControl()
		reqs.Add(1)
		return nil, nil, false // counted; the cluster handles it
	})
	var calls, msgs atomic.Int64
	obs := observeFunc(func(e float64) { calls.Add(1); msgs.Add(int64(e)) })
	p, err := NewProducer(syncProducer(b, k.ListenAddrs()), "orders", append(opts, WithObserver(obs))...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// Warm up: metadata and producer IDs, outside the measurement.
	if err := p.Publish(ctx, order.Message{MsgID: "warm", ReservationID: "warm", ActivityID: "1", UserID: "0", Qty: 1,
		CreatedAt: testenv.Epoch()}); err != nil {
		b.Fatal(err)
	}
	calls.Store(0)
	msgs.Store(0)
	reqs.Store(0)
	var seq atomic.Int64
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			m := order.Message{MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i), ActivityID: "1",
				UserID: num(i), Qty: 1, CreatedAt: testenv.Epoch()}
			if err := p.Publish(ctx, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	n := float64(msgs.Load())
	if n > 0 {
		b.ReportMetric(float64(calls.Load())/n, "calls/msg")
		b.ReportMetric(float64(reqs.Load())/n, "reqs/msg")
	}
}

// observeFunc is an observer that passes each event's Value to f.
type observeFunc func(v float64)

func (f observeFunc) Observe(_ context.Context, e observe.Event) { f(e.Value) }
