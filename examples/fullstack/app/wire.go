package app

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/breaker"
	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/orderkafka"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// parts holds the pieces the handlers call through small functions, so the
// wiring of each package stays in one place (this file).
type parts struct {
	captcha *captchaGate
	submit  func(ctx context.Context, m order.Message) error
	pay     func(ctx context.Context, orderNo string) error
	wired   bool
}

func (p parts) ready() bool { return p.wired }

type atomicCounter struct{ n atomic.Uint64 }

func (c *atomicCounter) next() uint64 { return c.n.Add(1) }

// wire builds every library part over the borrowed Redis client, DB and
// Kafka brokers.
func (a *App) wire(ctx context.Context) error {
	cfg, rdb, db, log := a.cfg, a.in.Redis, a.in.DB, a.log
	var err error

	// Breakers: one around Redis, one around Kafka. Denials are results, so
	// only real failures count. The Redis one trips on the failure ratio
	// alone (≥ 50 % of ≥ 50 calls in 10 s): at tens of thousands of calls a
	// second, five failures in a row are a blip (a failover, a slow fork),
	// not an outage worth 2 s of 503s.
	stateHook := func(name string, from, to breaker.State) {
		log.Warn("breaker state change", "breaker", name, "from", from.String(), "to", to.String())
	}
	if a.brRedis, err = breaker.New("redis", breaker.WithConsecutiveFailures(0), breaker.WithFailureRatio(0.5, 50), breaker.WithWindow(10*time.Second, 10),
		breaker.WithOpenTimeout(2*time.Second), breaker.WithOnStateChange(stateHook), breaker.WithClassifier(a.classify), breaker.WithObserver(a.obs)); err != nil {
		return err
	}
	if a.brKafka, err = breaker.New("kafka", breaker.WithConsecutiveFailures(3), breaker.WithOpenTimeout(5*time.Second),
		breaker.WithOnStateChange(stateHook), breaker.WithObserver(a.obs)); err != nil {
		return err
	}

	// Stock: the one Lua call, with the in-process sold-out flag; with
	// -db-fallback-quota, a DB pool of units set aside for Redis outages.
	stockOpts, err := a.dbFallback(ctx)
	if err != nil {
		return err
	}
	if a.stock, err = stock.New(a.in.StockRedis, append(stockOpts, stock.WithKeyPrefix(cfg.KeyPrefix), stock.WithLogger(log), stock.WithObserver(a.obs),
		stock.WithOnLoss(func(activity, reason string) {
			a.m.workerErrors.WithLabelValues("redis_data_loss").Inc()
			log.Error("ALERT: Redis lost or rolled back the sale's state; frozen until rebuilt from the DB",
				"activity", activity, "reason", reason)
		}),
		stock.WithOnRelease(func(ctx context.Context, activity, id string, res stock.ReleaseResult, err error) {
			if err == nil && res.Released() {
				a.m.released.WithLabelValues("released").Inc()
			}
		}))...); err != nil {
		return err
	}
	a.goWorker("stock_soldout", a.stock.Run)
	a.closers = append(a.closers, a.stock.Close)
	src := stock.SourceFunc(func(ctx context.Context, from, to time.Time) ([]stock.Activity, error) {
		var rows []order.Activity
		if err := db.WithContext(ctx).Where("start_time < ? AND end_time > ?", to, from).Find(&rows).Error; err != nil {
			return nil, err
		}
		out := make([]stock.Activity, 0, len(rows))
		for _, r := range rows {
			out = append(out, stock.Activity{ID: r.ID, Stock: r.TotalStock - a.poolQuota(r.ID), PerUserLimit: r.UserLimit,
				Start: r.StartTime, End: r.EndTime, TTL: cfg.PayTimeout + 24*time.Hour})
		}
		return out, nil
	})
	recovery, err := a.stockRecovery()
	if err != nil {
		return err
	}
	// The access-token pool lives in Redis too: built before the preloader,
	// whose rebuild after a Redis loss issues it again (Issue is
	// idempotent: a pool that survived is not grown).
	if a.pool, err = token.NewPool(rdb, token.WithKeyPrefix(cfg.KeyPrefix), token.WithObserver(a.obs)); err != nil {
		return err
	}
	if a.preloader, err = stock.NewPreloader(a.stock, src, stock.WithLeadTime(10*time.Minute), stock.WithPollInterval(5*time.Second),
		stock.WithPreloadLogger(log), stock.WithRecovery(recovery), stock.WithOnRecover(a.afterRebuild)); err != nil {
		return err
	}
	if _, err := a.preloader.Tick(ctx); err != nil { // load now; Run keeps watching
		return fmt.Errorf("preload: %w", err)
	}
	a.goWorker("preloader", a.preloader.Run)

	// Tokens: the access-token pool (stock × 3) and the signed buy path.
	if _, err := a.pool.Issue(ctx, a.actKey, a.act.TotalStock); err != nil {
		return fmt.Errorf("issue access tokens: %w", err)
	}
	// The secret (>= MinSecretLen bytes, checked by Validate) is hashed to
	// the 32-byte key; without one, a random key (one instance only).
	secret := []byte(cfg.Secret)
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	} else {
		sum := sha256.Sum256(secret)
		secret = sum[:]
	}
	if a.signer, err = token.NewSigner([]token.Key{{ID: "k1", Secret: secret}}, token.WithLeadTime(cfg.PathLead), token.WithObserver(a.obs),
		token.WithClock(skewClock(cfg.ClockSkew))); err != nil {
		return err
	}
	// The SSE ticket key (ticket.go), derived so that no ticket is ever a
	// valid signature of anything else.
	tk := hmac.New(sha256.New, secret)
	tk.Write([]byte("seckill sse tickets v1"))
	a.ticketKey = tk.Sum(nil)

	// Risk: sessions (Redis) behind a short in-process cache, IP resolution,
	// blacklist → behaviour → device binding.
	if a.sessions, err = risk.NewSessionStore(rdb, risk.WithKeyPrefix(cfg.KeyPrefix)); err != nil {
		return err
	}
	if a.authn, err = risk.NewAuthCache(a.sessions, time.Minute, 200000); err != nil {
		return err
	}
	if a.auth, err = risk.NewAuth(a.authn, risk.WithLogger(log)); err != nil {
		return err
	}
	if a.ips, err = risk.NewIPResolver(cfg.TrustedProxies); err != nil {
		return err
	}
	if a.blacklist, err = risk.NewBlacklist(rdb, risk.WithKeyPrefix(cfg.KeyPrefix)); err != nil {
		return err
	}
	behaviour, err := risk.NewBehaviour(rdb, 10*time.Second, 30, 60, risk.WithKeyPrefix(cfg.KeyPrefix), risk.WithAutoBlacklist(a.blacklist), risk.WithLogger(log))
	if err != nil {
		return err
	}
	devices, err := risk.NewDeviceBinder(rdb, risk.WithKeyPrefix(cfg.KeyPrefix))
	if err != nil {
		return err
	}
	if a.checker, err = risk.NewChecker([]risk.Rule{a.blacklist, behaviour, devices}, risk.WithLogger(log), risk.WithObserver(a.obs)); err != nil {
		return err
	}

	// Limits: the node-local global bucket (no I/O) and the per-user window
	// in Redis, falling back to a local per-user bucket if Redis fails.
	if a.global, err = limiter.NewTokenBucket(limiter.Limit(cfg.GlobalRate), cfg.GlobalBurst); err != nil {
		return err
	}
	if a.perUser, err = limiter.NewSlidingWindow(rdb, cfg.UserRate, cfg.UserWindow, limiter.WithKeyPrefix(cfg.KeyPrefix),
		limiter.WithName("user"), limiter.WithFailurePolicy(limiter.FallbackLocal), limiter.WithLogger(log), limiter.WithObserver(a.obs)); err != nil {
		return err
	}
	// Per-user windows of the credential endpoints: access tokens are scarce
	// and a captcha image costs milliseconds of CPU.
	if a.tokenLimit, err = limiter.NewSlidingWindow(rdb, tokenRate, time.Minute, limiter.WithKeyPrefix(cfg.KeyPrefix+"tok:"),
		limiter.WithName("token"), limiter.WithFailurePolicy(limiter.FallbackLocal), limiter.WithLogger(log), limiter.WithObserver(a.obs)); err != nil {
		return err
	}
	if a.captchaLimit, err = limiter.NewSlidingWindow(rdb, captchaRate, time.Minute, limiter.WithKeyPrefix(cfg.KeyPrefix+"cap:"),
		limiter.WithName("captcha"), limiter.WithFailurePolicy(limiter.FallbackLocal), limiter.WithLogger(log), limiter.WithObserver(a.obs)); err != nil {
		return err
	}

	// Captcha.
	if a.parts.captcha, err = newCaptchaGate(rdb, cfg, a.obs); err != nil {
		return err
	}

	// Orders: results, IDs leased per node, processor, Kafka producer,
	// submitter (Kafka → outbox → release), consumer, relay.
	if a.results, err = order.NewResults(rdb, db, order.WithKeyPrefix(cfg.KeyPrefix)); err != nil {
		return err
	}
	lease, err := orderid.AcquireMachine(ctx, rdb, orderid.WithKeyPrefix(cfg.KeyPrefix))
	if err != nil {
		return fmt.Errorf("lease machine id: %w", err)
	}
	a.closers = append(a.closers, lease.Close)
	a.goWorker("machine_lease", lease.Run)
	ids, err := lease.NewGenerator()
	if err != nil {
		return err
	}
	proc, err := order.NewProcessor(db, ids, order.WithPayTimeout(cfg.PayTimeout))
	if err != nil {
		return err
	}
	scfg := orderkafka.SaramaConfig()
	scfg.ClientID = "seckill-fullstack-" + a.nodeTag
	scfg.Producer.Timeout = 5 * time.Second
	scfg.Net.DialTimeout = 3 * time.Second
	scfg.Metadata.Retry.Max = 3
	a.in.Sarama(scfg) // -kafka-addr-map
	sp, err := sarama.NewSyncProducer(a.in.Brokers, scfg)
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	a.producer = sp
	a.closers = append(a.closers, sp.Close)
	prod, err := orderkafka.NewProducer(sp, cfg.Topic, orderkafka.WithHeaders(cfg.Trace.Inject))
	if err != nil {
		return err
	}
	releaser := order.ReleaserFunc(a.releaseUnits)
	kafkaPub := order.PublisherFunc(func(ctx context.Context, m order.Message) error {
		return a.brKafka.Execute(ctx, func(ctx context.Context) error { return prod.Publish(ctx, m) })
	})
	if a.outboxW, err = outbox.NewWriter(outbox.WithLogger(log), outbox.WithObserver(a.obs)); err != nil {
		return err
	}
	fallback := order.FallbackFunc(func(ctx context.Context, m order.Message) error {
		b, err := m.Encode()
		if err != nil {
			return err
		}
		return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			return a.outboxW.Write(ctx, tx, outbox.Message{MsgID: m.MsgID, Topic: cfg.Topic, Key: m.Key(), Ref: m.ReservationID, Payload: b})
		})
	})
	// A hand-off that failed both ways releases through the fence: the
	// publish may have reached Kafka all the same, and the fence makes that
	// message deduct nothing when it is consumed.
	fence, err := order.NewFence(db, releaser, order.WithResults(a.results), order.WithLogger(log))
	if err != nil {
		return err
	}
	sub, err := order.NewSubmitter(kafkaPub, fallback, fence, order.WithResults(a.results), order.WithLogger(log), order.WithObserver(a.obs))
	if err != nil {
		return err
	}
	a.parts.submit = func(ctx context.Context, m order.Message) error {
		route, err := sub.Submit(ctx, m)
		if err == nil {
			a.m.published.WithLabelValues(route.String()).Inc()
		}
		return err
	}

	if !cfg.works() { // an api process: the workers run elsewhere
		a.parts.wired = true
		_, err := a.cancellerOptions(ctx, proc, releaser) // Pay, without the canceller's loops
		return err
	}

	// Relay: outbox rows → Kafka (same producer, behind the Kafka breaker).
	spub, err := outbox.NewSaramaPublisher(sp)
	if err != nil {
		return err
	}
	relayPub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		return a.brKafka.Execute(ctx, func(ctx context.Context) error { return spub.Publish(ctx, m) })
	})
	if a.relay, err = outbox.NewRelay(db, relayPub, outbox.WithLogger(log), outbox.WithObserver(a.obs), outbox.WithPollInterval(200*time.Millisecond),
		outbox.WithOnFailed(func(m outbox.Message, err error) {
			log.Error("ALERT: outbox message failed for good", "msg_id", m.MsgID, "err", err)
		})); err != nil {
		return err
	}
	a.goWorker("outbox_relay", a.relay.Run)
	a.closers = append(a.closers, a.relay.Close)

	// Consumer: Kafka → one DB transaction per batch → results → push.
	dlq, err := orderkafka.NewDeadLetterTopic(sp, cfg.Topic+".dlq")
	if err != nil {
		return err
	}
	// The push view is built from what the consumer already knows, and only
	// when a stream on this node waits for the reservation: no DB read on
	// the consumer goroutine.
	notify := order.NotifierFunc(func(ctx context.Context, r order.Result) {
		a.m.consumed.Inc()
		if r.ReservationID != "" && a.hub.waiting(r.ReservationID) {
			a.hub.publish(r.ReservationID, settledView(r))
		}
	})
	consumerOpts := []order.ConsumerOption{order.WithResults(a.results), order.WithNotifier(notify), order.WithDeadLetter(dlq),
		order.WithObserver(a.obs), order.WithContextFrom(cfg.Trace.Extract),
		order.WithLogger(log), order.WithOnError(func(ctx context.Context, err error) {
			a.m.workerErrors.WithLabelValues("consumer").Inc()
			log.Warn("consumer", "err", err)
		})}
	cancelOpts, err := a.cancellerOptions(ctx, proc, releaser)
	if err != nil {
		return err
	}
	consumerOpts = append(consumerOpts, cancelOpts...)
	cons, err := order.NewConsumer(proc, releaser, consumerOpts...)
	if err != nil {
		return err
	}
	consHandler, err := orderkafka.NewHandler(cons)
	if err != nil {
		return err
	}
	group, err := sarama.NewConsumerGroup(a.in.Brokers, consumerGroup, scfg)
	if err != nil {
		return fmt.Errorf("kafka consumer group: %w", err)
	}
	a.closers = append(a.closers, group.Close)
	a.goWorker("consumer", func(ctx context.Context) error {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{cfg.Topic}, consHandler); err != nil && ctx.Err() == nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return nil
				}
				log.Warn("consumer group", "err", err)
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
		}
		return nil
	})
	a.goWorker("consumer_errors", func(ctx context.Context) error {
		for {
			select {
			case err, ok := <-group.Errors():
				if !ok {
					return nil
				}
				log.Warn("consumer group error", "err", err)
			case <-ctx.Done():
				return nil
			}
		}
	})
	a.parts.wired = true
	return nil
}

// classify tells the Redis breaker which errors are the dependency's fault.
// Refusals (every one wraps its package's ErrRefused) are errors by the
// token and captcha contracts but say nothing about Redis health.
func (a *App) classify(err error) breaker.Outcome {
	if errors.Is(err, token.ErrRefused) || errors.Is(err, captcha.ErrRefused) {
		return breaker.Success
	}
	return breaker.DefaultClassifier(err)
}

// startWorkers starts the periodic chores that are not a package's Run.
func (a *App) startWorkers() {
	a.goWorker("token_reclaim", func(ctx context.Context) error {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if _, err := a.pool.Reclaim(ctx, a.actKey); err != nil && ctx.Err() == nil {
					a.log.Warn("token reclaim", "err", err)
				}
			case <-ctx.Done():
				return nil
			}
		}
	})
	a.goWorker("metrics", func(ctx context.Context) error {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				iv, err := a.Invariants(ctx)
				if err != nil {
					continue
				}
				a.m.outboxBacklog.Set(float64(iv.OutboxPending))
				a.m.inFlight.Set(float64(iv.InFlight))
				if lag, _, err := orderkafka.Lag(ctx, a.kadmin, a.kclient, consumerGroup, a.cfg.Topic); err == nil {
					a.m.consumerLag.Set(float64(lag))
				}
				for _, s := range []string{order.OrderCreated, order.OrderPaid, order.OrderCancelled} {
					a.m.orders.WithLabelValues(s).Set(float64(iv.Orders[s]))
				}
			case <-ctx.Done():
				return nil
			}
		}
	})
}

// stockRecovery rebuilds the sale's Redis state from the database after
// Redis lost it (a restart without persistence, a failover to a replica
// that missed writes, the embedded miniredis after a crash): the ledger is
// the reservations of the live orders, remaining is total − their units.
// It is ready only when nothing is in flight any more — no outbox row
// pending and no Kafka lag for the consumer group — because an in-flight
// message becomes an order (or a FAILED outcome) that the rebuild must
// count. Until then buyers are answered "busy" (stock.Frozen).
func (a *App) stockRecovery() (stock.Recovery, error) {
	client, err := sarama.NewClient(a.in.Brokers, a.in.Sarama(kafkaAdminConfig(a.nodeTag)))
	if err != nil {
		return nil, fmt.Errorf("kafka client for lag: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("kafka admin for lag: %w", err)
	}
	a.closers = append(a.closers, admin.Close) // closes the client too
	a.kadmin, a.kclient = admin, client
	return stock.RecoveryFunc(func(ctx context.Context, act stock.Activity) ([]stock.Reservation, bool, error) {
		backlog, err := outbox.Stats(ctx, a.in.DB)
		if err != nil {
			return nil, false, err
		}
		lag, _, err := orderkafka.Lag(ctx, admin, client, consumerGroup, a.cfg.Topic)
		if err != nil {
			return nil, false, err
		}
		if backlog.Pending > 0 || lag > 0 {
			a.log.Warn("sale frozen: waiting for in-flight orders before the rebuild", "activity", act.ID,
				"outbox_pending", backlog.Pending, "kafka_lag", lag)
			return nil, false, nil
		}
		live, err := order.LiveReservations(ctx, a.in.DB, act.ID)
		if err != nil {
			return nil, false, err
		}
		inPool, err := a.poolHeld(ctx)
		if err != nil {
			return nil, false, err
		}
		out := make([]stock.Reservation, 0, len(live))
		for _, r := range live {
			if !inPool[r.ID] { // the DB pool's units are not Redis's
				out = append(out, stock.Reservation{RequestID: r.ID, User: r.User, Qty: r.Qty, State: stock.Held, ReservedAt: r.At})
			}
		}
		return out, true, nil
	}), nil
}

// consumerGroup is the Kafka consumer group of the order consumer.
const consumerGroup = "seckill-orders"

func kafkaAdminConfig(node string) *sarama.Config {
	c := orderkafka.SaramaConfig()
	c.ClientID = "seckill-fullstack-admin-" + node
	c.Net.DialTimeout = 3 * time.Second
	c.Metadata.Retry.Max = 3
	return c
}

// afterRebuild runs after the preloader rebuilt an activity's stock from the
// database (a first load, or a recovery after Redis lost it): the access
// tokens lived in the same Redis, so the pool is issued again. Issue is
// idempotent, so a pool that survived is left as it is.
func (a *App) afterRebuild(activity string, rebuilt bool) {
	if !rebuilt || activity != a.act.ID {
		return
	}
	ctx, cancel := context.WithTimeout(a.bg, 10*time.Second)
	defer cancel()
	if _, err := a.pool.Issue(ctx, a.actKey, a.act.TotalStock); err != nil {
		a.log.Warn("access-token pool not issued after the rebuild", "activity", activity, "err", err)
	}
}
