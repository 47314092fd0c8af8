package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/internal/testenv"

	"github.com/alicebob/miniredis/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/orderkafka"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// Miniredis returns the embedded Redis of a, nil on a real server (tests
// only: it moves Redis's clock).
func Miniredis(a *App) *miniredis.Miniredis { return a.in.mini }

// The helpers below let tests stage what a crash or a lost reply leaves
// behind, through the same library calls the service makes.

// ConsumeToken spends user's access token, as a request that died right
// after the consume would have.
func ConsumeToken(ctx context.Context, a *App, user, tok string) error {
	return a.p.pool.Consume(ctx, token.ConsumeParams{Activity: a.sale.key, User: user, Token: tok})
}

// ReserveAs reserves one unit for user under resv, as a request whose
// Reserve ran in Redis but whose reply was lost.
func ReserveAs(ctx context.Context, a *App, user, resv string) (stock.Result, error) {
	return a.p.stock.Reserve(ctx, stock.Request{Activity: a.sale.act.ID, User: user, Qty: 1, ReservationID: resv})
}

// ReleaseFenced releases resv through the fence, as the reconciler does.
func ReleaseFenced(ctx context.Context, a *App, user, resv string) error {
	f, err := handoff.NewFence(a.in.DB, order.ReleaserFunc(func(ctx context.Context, activity, id string) error {
		_, err := a.p.stock.Release(ctx, activity, id)
		return err
	}))
	if err != nil {
		return err
	}
	return f.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: a.sale.act.ID, User: user, ReservationID: resv})
}

// ClientReservationID is the reservation ID of a client's request ID.
func ClientReservationID(user, requestID string) string { return clientReservationID(user, requestID) }

// DB returns a's database, for counting rows.
func DB(a *App) *gorm.DB { return a.in.DB }

// RedisClient returns a's Redis client, for reading keys directly.
func RedisClient(a *App) redis.UniversalClient { return a.in.Redis }

// Held reads what user holds in the sale's stock.
func Held(ctx context.Context, a *App, user string) (int64, error) {
	return a.p.stock.Held(ctx, a.sale.act.ID, user)
}

// SetReadTimeout sets a's server ReadTimeout; call it before Start.
func SetReadTimeout(a *App, d time.Duration) { a.srv.readTimeout = d }

// CheckTicket checks an SSE ticket for resv as the stream does, at now.
func CheckTicket(a *App, ticket, resv string, now time.Time) (string, bool) {
	return a.checkTicket(ticket, resv, now)
}

// CountQueries makes cfg count the SQL queries whose text contains substr
// and that no HTTP request made (no request ID in their context): the
// background workers' queries. The counter is registered on the database
// before any worker starts (gorm's callbacks may not change while queries
// run); the returned function reads it.
func CountQueries(cfg *Config, substr string) func() int64 {
	var n atomic.Int64
	cfg.dbHook = func(db *gorm.DB) error {
		return db.Callback().Query().After("gorm:query").Register("count-"+substr, func(db *gorm.DB) {
			if requestID(db.Statement.Context) == "" && strings.Contains(db.Statement.SQL.String(), substr) {
				n.Add(1)
			}
		})
	}
	return n.Load
}

// Pushed reads how many result messages a pushed over transport ("sse",
// "ws").
func Pushed(a *App, transport string) float64 {
	m := &dto.Metric{}
	_ = a.m.pushed.WithLabelValues(transport).Write(m)
	return m.GetCounter().GetValue()
}

// AdminBackend returns the admin API's Backend over a's parts.
func AdminBackend(t interface{ Fatal(...any) }, a *App) admin.Backend {
	return &adminBackend{a: a, orders: a.p.orders, recon: a.p.recon, dry: a.p.reconDry}
}

// Stock returns a's stock deductor.
func Stock(a *App) *stock.Deductor { return a.p.stock }

// The helpers below serve the checkout conformance kit
// (conformance_test.go): the sale's checkout, fresh credentials, the
// pipeline's state, and faults of Kafka and the outbox.

// SetCheckoutSteps makes the checkout of an app built from cfg apply edit
// to its steps last, after the app's own edit (shapeAfterGlobal).
func SetCheckoutSteps(cfg *Config, edit func([]checkout.Step) []checkout.Step) {
	cfg.checkoutSteps = edit
}

// SetPreloadEvery replaces the preloader's poll interval of an app built
// from cfg (the first load still runs at start).
func SetPreloadEvery(cfg *Config, d time.Duration) { cfg.preloadEvery = d }

// Checkout returns a's checkout of the sale (what POST /api/buy runs).
func Checkout(a *App) *checkout.Checkout { return a.co }

// ActivityID is the sale's activity ID.
func ActivityID(a *App) string { return a.sale.act.ID }

// Credentials are fresh credentials of user for one attempt, taken from
// a's own parts as the HTTP API hands them out: the user's access token
// (the pool's Take: the same token while it is bound or spent), a new
// captcha with its demo answer (demo mode only), and the signed buy path.
func Credentials(ctx context.Context, a *App, user string) (checkout.Attempt, error) {
	g, err := a.p.pool.Take(ctx, a.sale.key, user)
	if err != nil {
		return checkout.Attempt{}, err
	}
	if g.Token == "" {
		return checkout.Attempt{}, fmt.Errorf("no access token for %q: %v", user, g.Status)
	}
	ch, err := a.p.captcha.New(ctx, user, false)
	if err != nil {
		return checkout.Attempt{}, err
	}
	answer, ok := a.p.captcha.Answer(ctx, ch.ID, user)
	if !ok {
		return checkout.Attempt{}, fmt.Errorf("no demo answer of captcha %s for %q (demo mode off?)", ch.ID, user)
	}
	sig, err := a.p.signer.Sign(token.SignParams{Activity: a.sale.key, User: user, Start: a.sale.act.Start, Expiry: a.sale.act.End})
	if err != nil {
		return checkout.Attempt{}, err
	}
	return checkout.Attempt{User: user, Token: g.Token, CaptchaID: ch.ID, Captcha: answer, Link: sig}, nil
}

// TokenStats reads the sale's access-token pool.
func TokenStats(ctx context.Context, a *App) (token.Stats, error) {
	return a.p.pool.Stats(ctx, a.sale.key)
}

// Backlog reads what is on its way to an order: the outbox rows not yet
// relayed and the consumer group's lag on the order topic.
func Backlog(ctx context.Context, a *App) (outboxPending, kafkaLag int64, err error) {
	bl, err := outbox.Stats(ctx, a.in.DB)
	if err != nil {
		return 0, 0, err
	}
	lag, _, err := orderkafka.ObserveLag(ctx, nil, a.in.KafkaAdmin, a.in.KafkaClient, consumerGroup, a.cfg.Topic)
	return bl.Pending, lag, err
}

// Reconcile runs a's reconciler once over the sale, as its worker does.
func Reconcile(ctx context.Context, a *App) (reconcile.Report, error) {
	return a.p.recon.Reconcile(ctx, a.sale.act.ID)
}

// FailKafka returns a switch of the embedded Kafka (kfake): while down,
// every produce request is answered TOPIC_AUTHORIZATION_FAILED, an error
// the producer does not retry, so the order producer and the outbox relay
// fail at once; fetches and the consumer group work on. It panics on real
// brokers (tests only).
func FailKafka(a *App) func(down bool) {
	c := a.in.kafka
	if c == nil {
		panic("FailKafka: not on the embedded Kafka")
	}
	down := testenv.FailProduce(c)
	down(false)
	return down
}

// errOutboxDown is the error of an outbox write while FailOutboxWrites's
// switch is down.
var errOutboxDown = errors.New("test: database down (outbox write)")

// FailOutboxWrites makes an app built from cfg fail every insert into the
// outbox table while the returned switch is down (the hand-off's
// fallback; nothing else writes there). It uses cfg's dbHook (so not with
// CountQueries).
func FailOutboxWrites(cfg *Config) func(down bool) {
	var down atomic.Bool
	cfg.dbHook = func(db *gorm.DB) error {
		return db.Callback().Create().Before("gorm:create").Register("test:outbox-down", func(db *gorm.DB) {
			if down.Load() && db.Statement.Table == (outbox.Message{}).TableName() {
				_ = db.AddError(errOutboxDown)
			}
		})
	}
	return down.Store
}

// HookRedis adds h to the Redis clients of an app built from cfg before
// any worker starts (counting round trips).
func HookRedis(cfg *Config, h redis.Hook) { cfg.redisHook = h }

// Limited reads seckill_limiter_refusals_total{limiter=name}.
func Limited(a *App, name string) float64 {
	m := &dto.Metric{}
	_ = a.m.limited.WithLabelValues(name).Write(m)
	return m.GetCounter().GetValue()
}

// SetReconcileClock makes the reconcilers of an app built from cfg read
// the time from c (the grace), so a test moves past it without waiting.
func SetReconcileClock(cfg *Config, c interface{ Now() time.Time }) { cfg.reconcileClock = c }

// SetBeforeOrphanFreeze runs f once the reconciler of an app built from
// cfg has confirmed an orphan, before it freezes the activity.
func SetBeforeOrphanFreeze(cfg *Config, f func()) { cfg.beforeOrphanFreeze = f }

// RepairOrphans runs the reconciler's repair of the orphans orderNos of
// activity (what its loop does after a report with orphans).
func RepairOrphans(ctx context.Context, a *App, activity string, orderNos []string) {
	a.repairOrphans(ctx, activity, orderNos)
}

// KillConsumer closes the consumer group of a's worker, as a killed worker
// leaves it: nothing is consumed until a member joins again
// (JoinConsumer). It returns once the group is closed (its marked offsets
// committed).
func KillConsumer(a *App) error { return a.p.group.Close() }

// Member is one consumer-group member JoinConsumer started.
type Member struct {
	cancel context.CancelFunc
	done   chan struct{}
	group  sarama.ConsumerGroup
	once   sync.Once
}

// Leave closes the member's group (it leaves: a rebalance) and waits for
// its loop to end. Safe to call more than once.
func (m *Member) Leave() {
	m.once.Do(func() {
		m.cancel()
		_ = m.group.Close()
		<-m.done
	})
}

// JoinConsumer joins a's consumer group with a new member over a's own
// handler, as a restarted worker does; while hold is open (not closed) its
// sessions consume nothing — each claim waits for hold or for the
// session's end (a rebalance) — as a consumer stalled by rebalances or a
// slow database. A nil hold consumes at once. The member leaves at
// cleanup.
func JoinConsumer(t interface{ Cleanup(func()) }, a *App, hold <-chan struct{}) (*Member, error) {
	g, err := sarama.NewConsumerGroup(a.in.Brokers, consumerGroup, a.in.kafkaCfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{cancel: cancel, done: make(chan struct{}), group: g}
	var h sarama.ConsumerGroupHandler = a.p.handler
	if hold != nil {
		h = heldHandler{ConsumerGroupHandler: h, hold: hold}
	}
	go func() {
		defer close(m.done)
		_ = consume(ctx, g, a.cfg.Topic, h, a.log)
	}()
	t.Cleanup(m.Leave)
	return m, nil
}

// heldHandler delays every claim until hold is closed or its session ends.
type heldHandler struct {
	sarama.ConsumerGroupHandler
	hold <-chan struct{}
}

func (h heldHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	select {
	case <-h.hold:
		return h.ConsumerGroupHandler.ConsumeClaim(sess, claim)
	case <-sess.Context().Done():
		return nil
	}
}

// BuyerResult is what GET /api/result answers user about resv ("queued",
// "created", "failed", …).
func BuyerResult(ctx context.Context, a *App, user, resv string) (string, error) {
	v, err := a.resultOf(ctx, user, resv)
	return v.Status, err
}

// OpenStreams is how many result and fair streams user holds open on a.
func OpenStreams(a *App, user string) int {
	a.p.streams.mu.Lock()
	defer a.p.streams.mu.Unlock()
	return a.p.streams.n[user]
}

// LapseDrawDeadline moves user's pay deadline in the draw into the past,
// as if the winner had let it go by: the draw worker's next round replaces
// them if they hold nothing (tests: no wait on the wall clock).
func LapseDrawDeadline(ctx context.Context, a *App, user string) error {
	f := a.p.fair
	return f.rdb.HSet(ctx, f.app, "due:"+user, time.Now().Add(-time.Second).UnixMilli()).Err()
}
