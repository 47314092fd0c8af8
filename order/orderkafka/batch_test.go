package orderkafka

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/reconcile"
)

// never is a linger no test outlives: a batch is sent because it is full
// or closed, never by its timer, so the tests do not depend on timing.
const never = time.Hour

// fakeSP is a sarama.SyncProducer that records its calls. SendMessages
// blocks on gate when it is set, and fail decides each message's error.
type fakeSP struct {
	sarama.SyncProducer // not called

	mu      sync.Mutex
	one     int                         // SendMessage calls
	many    [][]*sarama.ProducerMessage // SendMessages calls
	gate    chan struct{}
	entered chan struct{} // a SendMessages call began (when set)
	fail    func(m *sarama.ProducerMessage) error
	whole   error // when set, SendMessages fails as a whole
}

func (f *fakeSP) SendMessage(m *sarama.ProducerMessage) (int32, int64, error) {
	f.mu.Lock()
	f.one++
	f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(m); err != nil {
			return -1, -1, err
		}
	}
	return 0, 0, nil
}

func (f *fakeSP) SendMessages(ms []*sarama.ProducerMessage) error {
	f.mu.Lock()
	f.many = append(f.many, ms)
	f.mu.Unlock()
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.whole != nil {
		return f.whole
	}
	var errs sarama.ProducerErrors
	for _, m := range ms {
		if f.fail != nil {
			if err := f.fail(m); err != nil {
				errs = append(errs, &sarama.ProducerError{Msg: m, Err: err})
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func (f *fakeSP) calls() (one int, many [][]*sarama.ProducerMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.one, append([][]*sarama.ProducerMessage(nil), f.many...)
}

// queued is the number of messages in p's open batch.
func queued(p *Producer) int {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.b.open == nil {
		return 0
	}
	return len(p.b.open.calls)
}

// waitQueued blocks until p's open batch holds n messages (the callers'
// goroutines enqueue without any clock; this only waits for them to run).
func waitQueued(t *testing.T, p *Producer, n int) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool { return queued(p) == n }, "%d messages queued", n)
}

// publishAll publishes msgs concurrently and returns each one's error.
func publishAll(ctx context.Context, p *Producer, msgs []order.Message) []error {
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Publish(ctx, m)
		}()
	}
	wg.Wait()
	return errs
}

func testMsgs(n int) []order.Message {
	ms := make([]order.Message, n)
	for i := range ms {
		ms[i] = msg(i, "1", num(1+i))
	}
	return ms
}

func TestWithBatchingConfig(t *testing.T) {
	t.Parallel()
	sp := &fakeSP{}
	for _, o := range []ProducerOption{WithBatching(-time.Millisecond, 10), WithBatching(0, -1), WithBatching(0, maxPublishBatch+1)} {
		_, err := NewProducer(sp, "orders", o)
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
	p, err := NewProducer(sp, "orders", WithBatching(0, 0), WithObserver(nil))
	require.NoError(t, err)
	assert.Equal(t, defaultPublishBatch, p.b.max, "zero max batch is the default")
	assert.Nil(t, p.obs, "a nil observer is ignored")
}

// A full batch is one SendMessages call carrying every caller's message
// with its key, value and headers; every caller gets nil.
func TestBatchingFullBatchIsOneCall(t *testing.T) {
	t.Parallel()
	sp := &fakeSP{}
	rec := &recorder{}
	p, err := NewProducer(sp, "orders", WithBatching(never, 8), WithObserver(rec),
		WithHeaders(func(context.Context) map[string]string { return map[string]string{"traceparent": "tp"} }))
	require.NoError(t, err)
	ms := testMsgs(16)
	for _, err := range publishAll(context.Background(), p, ms) {
		require.NoError(t, err)
	}
	one, many := sp.calls()
	assert.Zero(t, one)
	require.Len(t, many, 2, "16 messages, batches of 8")
	seen := map[string]int{}
	for _, batch := range many {
		assert.Len(t, batch, 8)
		for _, pm := range batch {
			k, _ := pm.Key.Encode()
			v, _ := pm.Value.Encode()
			got, err := order.Decode(v)
			require.NoError(t, err)
			assert.Equal(t, got.Key(), string(k))
			assert.Equal(t, []sarama.RecordHeader{{Key: []byte("traceparent"), Value: []byte("tp")}}, pm.Headers)
			seen[got.MsgID]++
		}
	}
	for _, m := range ms {
		assert.Equal(t, 1, seen[m.MsgID], "message %s sent exactly once", m.MsgID)
	}
	evs := rec.of("orderkafka.produce")
	require.Len(t, evs, 2, "one event per produce call")
	for _, e := range evs {
		assert.Equal(t, "ok", e.Outcome)
		assert.EqualValues(t, 8, e.Value, "messages in the call")
	}
}

// An error sarama reports for one message reaches that message's caller
// only; the others were acknowledged.
func TestBatchingPerMessageErrorReachesItsCaller(t *testing.T) {
	t.Parallel()
	bad := errors.New("record too large")
	sp := &fakeSP{fail: func(m *sarama.ProducerMessage) error {
		if k, _ := m.Key.Encode(); string(k) == "3" {
			return bad
		}
		return nil
	}}
	p, err := NewProducer(sp, "orders", WithBatching(never, 5))
	require.NoError(t, err)
	ms := testMsgs(5)
	errs := publishAll(context.Background(), p, ms)
	for i, err := range errs {
		if ms[i].UserID == "3" {
			require.ErrorIs(t, err, bad)
			assert.Contains(t, err.Error(), ms[i].MsgID)
			continue
		}
		require.NoError(t, err, "message %d", i)
	}
	_, many := sp.calls()
	assert.Len(t, many, 1)
}

// An error of the whole call (or one sarama does not tie to a message of
// the batch) reaches every caller of that batch.
func TestBatchingWholeBatchErrorReachesEveryCaller(t *testing.T) {
	t.Parallel()
	for name, whole := range map[string]error{
		"plain":         errors.New("broker gone"),
		"unknown-msg":   sarama.ProducerErrors{&sarama.ProducerError{Msg: &sarama.ProducerMessage{}, Err: errors.New("other")}},
		"nil-msg-entry": sarama.ProducerErrors{&sarama.ProducerError{Err: errors.New("no message")}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sp := &fakeSP{whole: whole}
			p, err := NewProducer(sp, "orders", WithBatching(never, 4))
			require.NoError(t, err)
			for _, err := range publishAll(context.Background(), p, testMsgs(4)) {
				require.Error(t, err)
			}
		})
	}
}

// A caller whose context ends while its message waits in the batch gets
// the context's error and the message is never sent; a caller whose
// message was already sent waits for its real answer.
func TestBatchingCancelledCaller(t *testing.T) {
	t.Parallel()
	sp := &fakeSP{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	p, err := NewProducer(sp, "orders", WithBatching(never, 3))
	require.NoError(t, err)
	ms := testMsgs(4)

	// Message 0 waits alone in a batch; its caller gives up.
	ctx0, cancel0 := context.WithCancel(context.Background())
	res0 := make(chan error, 1)
	go func() { res0 <- p.Publish(ctx0, ms[0]) }()
	waitQueued(t, p, 1)
	cancel0()
	require.ErrorIs(t, <-res0, context.Canceled)

	// Messages 1 and 2 fill the batch: it is sent without message 0.
	ctx1, cancel1 := context.WithCancel(context.Background())
	res := make(chan error, 2)
	go func() { res <- p.Publish(ctx1, ms[1]) }()
	waitQueued(t, p, 2)
	go func() { res <- p.Publish(context.Background(), ms[2]) }()
	<-sp.entered // the batch is in SendMessages
	cancel1()    // too late: message 1 was sent, its caller waits for the answer
	close(sp.gate)
	require.NoError(t, <-res)
	require.NoError(t, <-res)
	_, many := sp.calls()
	require.Len(t, many, 1)
	var keys []string
	for _, pm := range many[0] {
		k, _ := pm.Key.Encode()
		keys = append(keys, string(k))
	}
	assert.Equal(t, []string{ms[1].UserID, ms[2].UserID}, keys, "the abandoned message is never sent")
}

// A batch all of whose callers gave up is no produce call at all.
func TestBatchingAllCancelledSendsNothing(t *testing.T) {
	t.Parallel()
	sp := &fakeSP{}
	p, err := NewProducer(sp, "orders", WithBatching(never, 10))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- p.Publish(ctx, testMsgs(1)[0]) }()
	waitQueued(t, p, 1)
	cancel()
	require.ErrorIs(t, <-res, context.Canceled)
	require.NoError(t, p.Close())
	one, many := sp.calls()
	assert.Zero(t, one)
	assert.Empty(t, many)
}

// Close sends the batch still gathering and waits for its answers; a
// Publish after Close sends alone.
func TestBatchingCloseFlushes(t *testing.T) {
	t.Parallel()
	sp := &fakeSP{}
	p, err := NewProducer(sp, "orders", WithBatching(never, 100))
	require.NoError(t, err)
	ms := testMsgs(4)
	res := make(chan error, 3)
	for _, m := range ms[:3] {
		go func() { res <- p.Publish(context.Background(), m) }()
	}
	waitQueued(t, p, 3)
	require.NoError(t, p.Close())
	_, many := sp.calls()
	require.Len(t, many, 1, "Close sent the open batch")
	assert.Len(t, many[0], 3)
	for range 3 {
		require.NoError(t, <-res)
	}
	require.NoError(t, p.Publish(context.Background(), ms[3]))
	one, many := sp.calls()
	assert.Equal(t, 1, one, "after Close: one by one")
	assert.Len(t, many, 1)
	require.NoError(t, p.Close(), "Close twice")
}

// The linger sends a batch that never fills (the only test that lets the
// timer fire; it asserts no duration).
func TestBatchingLingerSendsAPartialBatch(t *testing.T) {
	t.Parallel()
	sp := &fakeSP{}
	p, err := NewProducer(sp, "orders", WithBatching(0, 100))
	require.NoError(t, err)
	require.NoError(t, p.Publish(context.Background(), testMsgs(1)[0]))
	_, many := sp.calls()
	require.Len(t, many, 1)
	assert.Len(t, many[0], 1)
}

// topicMessages reads every record of topic, all partitions, up to the
// high-water marks.
func topicMessages(t *testing.T, brokers []string, topic string) []*sarama.ConsumerMessage {
	t.Helper()
	client, err := sarama.NewClient(brokers, testSaramaConfig())
	require.NoError(t, err)
	defer client.Close()
	cons, err := sarama.NewConsumerFromClient(client)
	require.NoError(t, err)
	defer cons.Close()
	parts, err := client.Partitions(topic)
	require.NoError(t, err)
	var out []*sarama.ConsumerMessage
	for _, part := range parts {
		hwm, err := client.GetOffset(topic, part, sarama.OffsetNewest)
		require.NoError(t, err)
		if hwm == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(topic, part, sarama.OffsetOldest)
		require.NoError(t, err)
		for m := range pc.Messages() {
			out = append(out, m)
			if m.Offset == hwm-1 {
				break
			}
		}
		require.NoError(t, pc.Close())
	}
	return out
}

// Against kfake: many concurrent publishers, fewer produce calls than
// messages, and every message on the topic exactly once with its key and
// headers. Fails if batching loses or duplicates a message.
func TestKafkaBatchingDeliversEveryMessageOnce(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t, 3, "orders")
	rec := &recorder{}
	p, err := NewProducer(syncProducer(t, brokers), "orders", WithBatching(never, 10), WithObserver(rec),
		WithHeaders(func(context.Context) map[string]string { return map[string]string{"x-h": "v"} }))
	require.NoError(t, err)
	ms := testMsgs(95) // nine full batches and five messages Close sends
	res := make(chan error, len(ms))
	for _, m := range ms {
		go func() { res <- p.Publish(context.Background(), m) }()
	}
	for range 90 {
		require.NoError(t, <-res)
	}
	waitQueued(t, p, 5)
	require.NoError(t, p.Close())
	for range 5 {
		require.NoError(t, <-res)
	}
	calls, carried := 0, 0
	for _, e := range rec.of("orderkafka.produce") {
		require.Equal(t, "ok", e.Outcome)
		calls++
		carried += int(e.Value)
	}
	assert.Equal(t, 10, calls, "produce calls")
	assert.Equal(t, len(ms), carried)

	got := map[string]int{}
	for _, r := range topicMessages(t, brokers, "orders") {
		m, err := order.Decode(r.Value)
		require.NoError(t, err)
		assert.Equal(t, m.Key(), string(r.Key))
		assert.Equal(t, map[string]string{"x-h": "v"}, headersOf(r.Headers))
		got[m.MsgID]++
	}
	require.Len(t, got, len(ms), "every message on the topic")
	for _, m := range ms {
		assert.Equal(t, 1, got[m.MsgID], "message %s exactly once", m.MsgID)
	}
}

// The invariant of the hand-off through handoff.Submitter with a batching
// producer: every Submit that returned RouteKafka (the 202) has its message
// on the topic, and every other accepted one is in the fallback; with the
// broker down, the batch fails and each buyer goes to the fallback.
func TestKafkaBatchingSubmitterInvariant(t *testing.T) {
	t.Parallel()
	k, err := testenv.StartKafka(3, "orders")
	require.NoError(t, err)
	t.Cleanup(k.Close)
	brokers := k.ListenAddrs()
	p, err := NewProducer(syncProducer(t, brokers), "orders", WithBatching(never, 8))
	require.NoError(t, err)
	led := newLedger()
	fb := &memFallback{}
	sub, err := handoff.NewSubmitter(p.Publish, fb.Store, led)
	require.NoError(t, err)

	type outcome struct {
		m     order.Message
		route handoff.Route
		err   error
	}
	submitAll := func(from, n int) []outcome {
		out := make([]outcome, n)
		var wg sync.WaitGroup
		for i := range n {
			m := msg(from+i, "1", num(from+i+1))
			led.reserve("1", reconcile.Reservation{ID: m.ReservationID})
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := sub.Submit(context.Background(), m)
				out[i] = outcome{m, r, err}
			}()
		}
		wg.Wait()
		return out
	}
	up := submitAll(0, 32)
	down := testenv.FailProduce(k)
	failed := submitAll(100, 16)
	down(false)

	onTopic := map[string]int{}
	for _, r := range topicMessages(t, brokers, "orders") {
		m, err := order.Decode(r.Value)
		require.NoError(t, err)
		onTopic[m.MsgID]++
	}
	stored := map[string]bool{}
	for _, m := range fb.rows {
		stored[m.MsgID] = true
	}
	for _, o := range append(up, failed...) {
		require.NoError(t, o.err)
		switch o.route {
		case handoff.RouteKafka:
			assert.Equal(t, 1, onTopic[o.m.MsgID], "accepted via Kafka: on the topic once (%s)", o.m.MsgID)
		case handoff.RouteFallback:
			assert.True(t, stored[o.m.MsgID], "accepted via the fallback: stored (%s)", o.m.MsgID)
		default:
			t.Fatalf("route %v", o.route)
		}
	}
	for _, o := range up {
		assert.Equal(t, handoff.RouteKafka, o.route)
	}
	for _, o := range failed {
		assert.Equal(t, handoff.RouteFallback, o.route, "the broker refused the batch")
		assert.Zero(t, onTopic[o.m.MsgID])
	}
	assert.Len(t, onTopic, len(up))
	assert.Zero(t, led.releases())
	require.NoError(t, p.Close())
}
