package app

import (
	"cmp"
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
	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/internal/fused"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
	"github.com/seckillkit/seckill/observe"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/orderkafka"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/stock/dbfallback"
	"github.com/seckillkit/seckill/token"
)

// parts are the library parts of a node, built by build over the
// connections of Infra. The handlers call them; nothing else holds them.
type parts struct {
	nodeTag string        // this node's random tag (newNodeTag)
	obs     observe.Multi // every part reports here: Prometheus + Config.Observer
	built   bool          // build finished (Shutdown drains only then)

	// Breakers: one around Redis, one around Kafka.
	brRedis, brKafka *breaker.Breaker

	// Stock: the deductor (Redis), its preloader, the optional DB pool, and
	// the two as the buy sees them (fallback.go).
	stock     *stock.Deductor
	preloader *stock.Preloader
	fallback  *dbfallback.Store // nil unless -db-fallback-quota > 0
	units     *saleStock

	// Credentials: access tokens, the signed buy path, captchas, stream
	// tickets.
	pool      *token.Pool
	signer    *token.Signer
	captcha   *captchaGate
	ticketKey []byte    // HMAC key of stream tickets (ticket.go)
	streams   streamCap // concurrent SSE/WebSocket streams per user

	// Risk: sessions, client IPs, the rules.
	sessions  *risk.SessionStore
	authn     *risk.AuthCache
	ips       *risk.IPResolver
	checker   *risk.Checker
	blacklist *risk.Blacklist

	// Limits: the node's global bucket and the per-user windows.
	global                            *limiter.TokenBucket
	perUser, tokenLimit, captchaLimit limiter.Limiter
	bots                              botParts // -bot-defence (botdefence.go)

	// Orders: results, the orders (read, pay), the hand-off, reconciliation.
	results         *status.Results
	orders          *status.Orders
	canceller       *status.Canceller // pays and cancels orders
	pay             *payments         // the payment callback and the fake provider (fakepay.go)
	submit          submitFunc
	fence           *handoff.Fence // the submitter's, and the checkout's undo (checkout.Config.Fence)
	recon, reconDry *reconcile.Reconciler
	relay           *outbox.Relay // nil on an api node (the admin API's requeue)
	// positions: where the broker wrote each order message (the hand-off's
	// and the relay's acknowledgements), so the reconciler keeps a
	// reservation whose message the consumer group will still deliver.
	positions *orderkafka.Positions

	// The consumer's handler and group (the worker's start sets the
	// group): tests stop and restart the consumer through them.
	handler sarama.ConsumerGroupHandler
	group   sarama.ConsumerGroup

	fair      *fair       // the fair sale mode (fairsale.go); nil in fcfs mode
	fairChain []tokenStep // its token chain (tokenSteps)
	fairKicks fairKicks   // wakes this instance's fair streams (fairpush.go)
}

// build puts every library part together over a's connections, lists the
// node's workers and builds the sale's checkout. It does no I/O
// (TestBuildDoesNoIO): whatever needs a server runs in a worker's start.
func (a *App) build(node string, pool *dbfallback.Store) error {
	p := &parts{nodeTag: node, fallback: pool, obs: observe.Multi{a.m.obs}}
	if a.cfg.Observer != nil {
		p.obs = append(p.obs, a.cfg.Observer)
	}
	a.p = p
	for _, step := range []func() error{a.buildBreakers, a.buildStock, a.buildCredentials, a.buildRisk, a.buildLimits, a.buildBotDefence, a.buildOrders, a.buildFair, a.buildCheckout} {
		if err := step(); err != nil {
			return err
		}
	}
	a.run.add(worker{name: "metrics", run: every(2*time.Second, a.refreshGauges)})
	p.built = true
	return nil
}

// buildBreakers: denials are results, so only real failures count. The
// Redis breaker trips on the failure ratio alone (≥ 50 % of ≥ 50 calls in
// 10 s): at tens of thousands of calls a second, five failures in a row are
// a blip (a failover, a slow fork), not an outage worth 2 s of 503s.
func (a *App) buildBreakers() (err error) {
	stateHook := func(ctx context.Context, name string, from, to breaker.State) {
		a.log.WarnContext(ctx, "breaker state change", "breaker", name, "from", from.String(), "to", to.String())
	}
	if a.p.brRedis, err = breaker.New("redis", breaker.WithConsecutiveFailures(0), breaker.WithFailureRatio(0.5, 50), breaker.WithWindow(10*time.Second, 10),
		breaker.WithOpenTimeout(2*time.Second), breaker.WithOnStateChange(stateHook), breaker.WithClassifier(classify), breaker.WithObserver(a.p.obs)); err != nil {
		return err
	}
	a.p.brKafka, err = breaker.New("kafka", breaker.WithConsecutiveFailures(3), breaker.WithOpenTimeout(5*time.Second),
		breaker.WithOnStateChange(stateHook), breaker.WithObserver(a.p.obs))
	return err
}

// classify tells the Redis breaker which errors are the dependency's fault.
// Refusals (every one wraps its package's ErrRefused) are errors by the
// token and captcha contracts but say nothing about Redis health.
func classify(err error) breaker.Outcome {
	if errors.Is(err, token.ErrRefused) || errors.Is(err, captcha.ErrRefused) {
		return breaker.Success
	}
	return breaker.DefaultClassifier(err)
}

// buildStock: the one Lua call with the in-process sold-out flag (many
// buyers' in one call with -coalesce-window, the sale over -shards keys),
// the DB pool when there is one, and the preloader that loads the sale from the
// database and rebuilds it after Redis lost it.
func (a *App) buildStock() (err error) {
	p, cfg, log := a.p, a.cfg, a.log
	opts := []stock.DeductorOption{stock.WithKeyPrefix(cfg.KeyPrefix), stock.WithLogger(log), stock.WithObserver(p.obs),
		stock.WithOnLoss(func(ctx context.Context, activity, reason string) {
			a.m.workerErrors.WithLabelValues("redis_data_loss").Inc()
			log.ErrorContext(ctx, "ALERT: Redis lost or rolled back the sale's state; frozen until rebuilt from the DB",
				"activity", activity, "reason", reason)
		}),
		stock.WithOnRelease(func(ctx context.Context, activity, id string, res stock.ReleaseResult, err error) {
			if err == nil && res.Status == stock.ReleaseDone {
				a.m.released.WithLabelValues("released").Inc()
			}
		})}
	if p.fallback != nil {
		opts = append(opts, stock.WithFallback(p.fallback.Reserve))
	}
	if cfg.CoalesceWindow > 0 {
		opts = append(opts, stock.WithCoalescing(cfg.CoalesceWindow, cfg.CoalesceBatch))
	}
	if p.stock, err = stock.New(a.in.StockRedis, opts...); err != nil {
		return err
	}
	p.units = &saleStock{d: p.stock, pool: p.fallback, counted: a.m.reserve}
	src := stock.Source(func(ctx context.Context, from, to time.Time) ([]stock.Activity, error) {
		var rows []order.Activity
		if err := a.in.DB.WithContext(ctx).Where("start_time < ? AND end_time > ?", to, from).Find(&rows).Error; err != nil {
			return nil, err
		}
		// A variant's row ("<activity>/<variant>") is loaded with its
		// activity (stock.Activity.Variants), never on its own.
		plain, variants := variantRows(rows, a.sale.variants)
		out := make([]stock.Activity, 0, len(plain))
		for _, r := range plain {
			act := stock.Activity{ID: r.ID, Stock: r.Stock - a.poolQuota(r.ID), PerUserLimit: r.PerUserLimit,
				Start: r.Start, End: r.End, TTL: cfg.PayTimeout + 24*time.Hour, Shards: cfg.Shards}
			if vs := variants[r.ID]; len(vs) > 0 {
				for i := range vs { // each size's DB pool is carved out of it
					vs[i].Stock -= a.poolQuota(stock.VariantOf(r.ID, vs[i].ID))
				}
				act.Stock, act.Shards, act.Variants = 0, 1, vs
			}
			out = append(out, act)
		}
		return out, nil
	})
	poll := cmp.Or(a.cfg.preloadEvery, 5*time.Second)
	if p.preloader, err = stock.NewPreloader(p.stock, src, stock.WithLeadTime(10*time.Minute), stock.WithPollInterval(poll),
		stock.WithLogger(log), stock.WithRecovery(a.recoverStock), stock.WithOnRecover(a.afterRebuild)); err != nil {
		return err
	}
	a.run.add(
		worker{name: "stock_soldout", run: p.stock.Run, stop: p.stock.Close},
		// start makes the first pass (the sale is loaded before the server
		// answers); Run makes its own first pass at once, so it starts one
		// poll later: a second pass right after the first would undo an
		// operator's freeze made in between (TestAdjustUndoesTheFirstStore).
		worker{name: "preloader", run: func(ctx context.Context) error {
			t := time.NewTimer(poll)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			return p.preloader.Run(ctx)
		}, start: func(ctx context.Context) error {
			if _, err := p.preloader.Tick(ctx); err != nil { // load now; Run keeps watching
				return fmt.Errorf("preload: %w", err)
			}
			return nil
		}},
	)
	return nil
}

// recoverStock rebuilds the sale's Redis state from the database after
// Redis lost it (a restart without persistence, a failover to a replica
// that missed writes, the embedded miniredis after a crash): the ledger is
// the reservations of the live orders, remaining is total − their units.
// It is ready only when nothing is in flight any more — no outbox row
// pending and no Kafka lag for the consumer group — because an in-flight
// message becomes an order (or a FAILED outcome) that the rebuild must
// count. Until then buyers are answered "busy" (stock.Frozen).
func (a *App) recoverStock(ctx context.Context, act stock.Activity) ([]stock.Reservation, bool, error) {
	backlog, err := outbox.Stats(ctx, a.in.DB)
	if err != nil {
		return nil, false, err
	}
	lag, _, err := orderkafka.ObserveLag(ctx, nil, a.in.KafkaAdmin, a.in.KafkaClient, consumerGroup, a.cfg.Topic)
	if err != nil {
		return nil, false, err
	}
	if backlog.Pending > 0 || lag > 0 {
		a.log.Warn("sale frozen: waiting for in-flight orders before the rebuild", "activity", act.ID,
			"outbox_pending", backlog.Pending, "kafka_lag", lag)
		return nil, false, nil
	}
	live, err := reconcile.LiveReservations(ctx, a.in.DB, act.ID)
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
			out = append(out, stock.Reservation{ID: r.ID, User: r.User, Qty: r.Qty, State: stock.Held, ReservedAt: r.At})
		}
	}
	return out, true, nil
}

// consumerGroup is the Kafka consumer group of the order consumer.
const consumerGroup = "seckill-orders"

// afterRebuild runs after the preloader rebuilt an activity's stock from the
// database (a first load, or a recovery after Redis lost it): the access
// tokens lived in the same Redis, so the pool is issued again, for the
// sale's total as rebuilt (its top-ups and withdrawals included; in sizes,
// every size rebuilt so far: the last size's rebuild issues for them all).
// Issue is idempotent and never shrinks, so a pool that survived is left as
// it is.
func (a *App) afterRebuild(tick context.Context, activity string, rebuilt bool) {
	if _, ok := a.sale.variantOfSale(activity); ok {
		activity = a.sale.act.ID // a variant rebuilt: the sale's pool
	}
	if !rebuilt || activity != a.sale.act.ID {
		return
	}
	ctx, cancel := context.WithTimeout(a.run.bg, 10*time.Second)
	defer cancel()
	total, err := a.saleTotal(ctx)
	if err == nil {
		_, err = a.p.pool.Issue(ctx, a.sale.key, total)
	}
	if err != nil {
		a.log.WarnContext(tick, "access-token pool not issued after the rebuild", "activity", activity, "err", err)
	}
}

// saleTotal is the units on sale now as Redis holds them (Stats' Total:
// the initial stock ± every adjustment; in sizes, the sum over the sizes
// loaded) plus the DB pool's carve-out, or the initial stock while nothing
// is loaded.
func (a *App) saleTotal(ctx context.Context) (int64, error) {
	ids := a.sale.ledgers()
	var total int64
	for _, id := range ids {
		st, err := a.p.stock.Stats(ctx, id)
		if err != nil {
			return 0, err
		}
		if st.Loaded {
			total += st.Total + a.poolQuota(id) // the DB pool's carve-out is the sale's too
		}
	}
	if total == 0 {
		return a.sale.act.Stock, nil
	}
	return total, nil
}

// buildCredentials: the access-token pool (stock × 3, issued when the
// worker starts, reclaimed every 5 s), the signed buy path, the stream
// ticket key and the captcha.
func (a *App) buildCredentials() (err error) {
	p, cfg := a.p, a.cfg
	if p.pool, err = token.NewPool(a.in.Redis, token.WithKeyPrefix(cfg.KeyPrefix), token.WithObserver(p.obs)); err != nil {
		return err
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
	if p.signer, err = token.NewSigner([]token.Key{{ID: "k1", Secret: secret}}, token.WithLeadTime(cfg.PathLead), token.WithObserver(p.obs),
		token.WithClock(skewClock(cfg.ClockSkew))); err != nil {
		return err
	}
	// The stream ticket key (ticket.go), derived so that no ticket is ever
	// a valid signature of anything else.
	tk := hmac.New(sha256.New, secret)
	tk.Write([]byte("seckill sse tickets v1"))
	p.ticketKey = tk.Sum(nil)
	if p.captcha, err = newCaptchaGate(a.in.Redis, cfg, p.obs); err != nil {
		return err
	}
	a.run.add(worker{name: "token_pool",
		start: func(ctx context.Context) error {
			if _, err := p.pool.Issue(ctx, a.sale.key, a.sale.act.Stock); err != nil {
				return fmt.Errorf("issue access tokens: %w", err)
			}
			return nil
		},
		run: every(5*time.Second, func(ctx context.Context) {
			if _, err := p.pool.Reclaim(ctx, a.sale.key); err != nil && ctx.Err() == nil {
				a.log.Warn("token reclaim", "err", err)
			}
		})})
	return nil
}

// sessionCacheTTL bounds how long this instance trusts a cached session
// that nobody revoked (a session that expired in Redis meanwhile).
const sessionCacheTTL = 10 * time.Minute

// buildRisk: sessions (Redis) behind an in-process cache, IP
// resolution, blacklist → behaviour → device binding.
func (a *App) buildRisk() (err error) {
	p, rdb, prefix := a.p, a.in.Redis, a.cfg.KeyPrefix
	if p.sessions, err = risk.NewSessionStore(rdb, risk.SessionConfig{KeyPrefix: prefix}); err != nil {
		return err
	}
	// Revocations (logout) reach every instance's cache at once through
	// the store's pub/sub channel, so the cache can outlive a sale's
	// run-up: buyers signed in minutes before the start are not all looked
	// up in Redis again at the opening. A session's own expiry is not
	// announced: it stays accepted here for up to sessionCacheTTL.
	if p.authn, err = risk.NewAuthCache(p.sessions, risk.AuthCacheConfig{TTL: sessionCacheTTL, Max: 200000,
		Revocations: p.sessions, Logger: a.log}); err != nil {
		return err
	}
	a.run.add(worker{name: "session_revocations", run: p.authn.Run, stop: p.authn.Close})
	if p.ips, err = risk.NewIPResolver(risk.IPResolverConfig{TrustedProxies: a.cfg.TrustedProxies}); err != nil {
		return err
	}
	if p.blacklist, err = risk.NewBlacklist(rdb, risk.BlacklistConfig{KeyPrefix: prefix}); err != nil {
		return err
	}
	behaviour, err := risk.NewBehaviour(rdb, risk.BehaviourConfig{Window: 10 * time.Second, FlagAt: 30, DenyAt: 60,
		KeyPrefix: prefix, AutoBlacklist: p.blacklist, Logger: a.log})
	if err != nil {
		return err
	}
	devices, err := risk.NewDeviceBinder(rdb, risk.DeviceBinderConfig{KeyPrefix: prefix})
	if err != nil {
		return err
	}
	p.checker, err = risk.NewChecker([]risk.Rule{p.blacklist, behaviour, devices}, risk.WithLogger(a.log), risk.WithObserver(p.obs))
	return err
}

// buildLimits: the node-local global bucket (no I/O) and the per-user
// windows in Redis (buy, access token, captcha), each falling back to a
// local per-user bucket if Redis fails: that policy, not the breaker,
// decides what an outage does (allowUser).
func (a *App) buildLimits() (err error) {
	p, cfg := a.p, a.cfg
	if p.global, err = limiter.NewTokenBucket(limiter.Limit(cfg.GlobalRate), cfg.GlobalBurst); err != nil {
		return err
	}
	window := func(name, prefix string, n int, per time.Duration) (limiter.Limiter, error) {
		return redislimit.NewSlidingWindow(a.in.Redis, n, per, redislimit.WithKeyPrefix(prefix), redislimit.WithName(name),
			redislimit.WithFailurePolicy(limiter.FallbackLocal), redislimit.WithLogger(a.log), redislimit.WithObserver(p.obs))
	}
	if p.perUser, err = window("user", cfg.KeyPrefix, cfg.UserRate, cfg.UserWindow); err != nil {
		return err
	}
	// Access tokens are scarce and a captcha image costs milliseconds of CPU.
	if p.tokenLimit, err = window("token", cfg.KeyPrefix+"tok:", tokenRate, time.Minute); err != nil {
		return err
	}
	p.captchaLimit, err = window("captcha", cfg.KeyPrefix+"cap:", captchaRate, time.Minute)
	return err
}

// refreshGauges is the metrics worker's tick: the invariants' gauges and
// the consumer lag.
func (a *App) refreshGauges(ctx context.Context) {
	iv, err := a.Invariants(ctx)
	if err != nil {
		return
	}
	a.m.outboxBacklog.Set(float64(iv.OutboxPending))
	a.m.inFlight.Set(float64(iv.InFlight))
	if lag, _, err := orderkafka.ObserveLag(ctx, nil, a.in.KafkaAdmin, a.in.KafkaClient, consumerGroup, a.cfg.Topic); err == nil {
		a.m.consumerLag.Set(float64(lag))
	}
	for _, s := range []string{order.OrderCreated, order.OrderPaid, order.OrderCancelled} {
		a.m.orders.WithLabelValues(s).Set(float64(iv.Orders[s]))
	}
}

// leasedIDs is the processor's ID source: the generator of the machine ID
// this node leases, set by the lease worker's start (build does no I/O).
type leasedIDs struct {
	g atomic.Pointer[orderid.Generator]
}

var errNoLease = errors.New("app: no machine ID leased yet")

func (l *leasedIDs) NextID() (int64, error) {
	g := l.g.Load()
	if g == nil {
		return 0, errNoLease
	}
	return g.NextID()
}

// buildOrders: results and reads, IDs leased per node, the processor, the
// hand-off, the canceller and reconciler, and — on a node that works — the
// outbox relay and the consumer.
func (a *App) buildOrders() (err error) {
	p, cfg, db := a.p, a.cfg, a.in.DB
	if p.results, err = status.NewResults(a.in.Redis, db, status.WithKeyPrefix(cfg.KeyPrefix)); err != nil {
		return err
	}
	if a.in.KafkaAdmin != nil { // nil only in a test's offline build (TestBuildDoesNoIO)
		if p.positions, err = orderkafka.NewPositions(a.in.Redis, a.in.KafkaAdmin, a.in.KafkaClient,
			orderkafka.PositionsConfig{Group: consumerGroup, Topic: cfg.Topic, KeyPrefix: cfg.KeyPrefix,
				OnError: func(ctx context.Context, err error) {
					a.logger(ctx).Warn("kafka positions not recorded; the reconcile grace alone guards their reservations", "err", err)
				}}); err != nil {
			return err
		}
	}
	proc, err := order.NewProcessor(db, a.leaseIDs(), order.WithPayTimeout(cfg.PayTimeout))
	if err != nil {
		return err
	}
	releaser := order.ReleaserFunc(p.units.release)
	if err := a.buildHandOff(releaser); err != nil {
		return err
	}
	canc, err := a.buildCanceller(releaser)
	if err != nil {
		return err
	}
	p.canceller = canc
	if err := a.buildPayments(); err != nil {
		return err
	}
	if p.orders, err = status.NewOrders(db); err != nil {
		return err
	}
	if err := a.buildReconcilers(releaser); err != nil {
		return err
	}
	if !cfg.works() { // an api process: the workers run elsewhere
		return nil
	}
	if err := a.buildRelay(); err != nil {
		return err
	}
	return a.buildConsumer(proc, releaser, canc)
}

// leaseIDs lists the machine-lease worker (it leases this node's machine
// ID when it starts) and returns the ID source that lease feeds.
func (a *App) leaseIDs() *leasedIDs {
	ids := &leasedIDs{}
	var lease *orderid.Lease
	a.run.add(worker{name: "machine_lease",
		start: func(ctx context.Context) error {
			l, err := orderid.AcquireMachine(ctx, a.in.Redis, orderid.WithKeyPrefix(a.cfg.KeyPrefix))
			if err != nil {
				return fmt.Errorf("lease machine id: %w", err)
			}
			g, err := l.NewGenerator()
			if err != nil {
				_ = l.Close()
				return err
			}
			lease = l
			ids.g.Store(g)
			return nil
		},
		run:  func(ctx context.Context) error { return lease.Run(ctx) },
		stop: func() error { return lease.Close() },
	})
	return ids
}

// buildHandOff: the submitter hands a reservation to Kafka (the producer,
// behind the Kafka breaker), else to an outbox row, else releases it
// through the fence: the publish may have reached Kafka all the same, and
// the fence makes that message deduct nothing when it is consumed.
func (a *App) buildHandOff(rel order.Releaser) error {
	p, cfg, db, log := a.p, a.cfg, a.in.DB, a.log
	popts := []orderkafka.ProducerOption{orderkafka.WithHeaders(cfg.Trace.Inject), orderkafka.WithObserver(p.obs),
		orderkafka.WithOnAck(a.recordPosition)}
	if cfg.ProduceBatch > 0 {
		popts = append(popts, orderkafka.WithBatching(cfg.ProduceLinger, cfg.ProduceBatch))
	}
	prod, err := orderkafka.NewProducer(a.in.Producer, cfg.Topic, popts...)
	if err != nil {
		return err
	}
	if cfg.ProduceBatch > 0 {
		// Stopped before the infrastructure closes the SyncProducer: sends
		// what is gathered and waits for its acknowledgements.
		a.run.add(worker{name: "order_producer", stop: prod.Close})
	}
	kafkaPub := handoff.Publisher(func(ctx context.Context, m order.Message) error {
		return p.brKafka.Execute(ctx, func(ctx context.Context) error { return prod.Publish(ctx, m) })
	})
	ow, err := outbox.NewWriter(outbox.WithLogger(log), outbox.WithObserver(p.obs))
	if err != nil {
		return err
	}
	fallback := handoff.Fallback(func(ctx context.Context, m order.Message) error {
		b, err := m.Encode()
		if err != nil {
			return err
		}
		return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			return ow.Write(ctx, tx, outbox.Message{MsgID: m.MsgID, Topic: cfg.Topic, Key: m.Key(), ReservationID: m.ReservationID, Payload: b})
		})
	})
	fence, err := handoff.NewFence(db, rel, handoff.WithResults(p.results), handoff.WithLogger(log))
	if err != nil {
		return err
	}
	p.fence = fence
	// No QUEUED result at the hand-off: a reservation in flight reads
	// queued from the stock ledger (resultOf, checkout.Result), which
	// saves a Redis round trip per accepted buy; the fence still records
	// FAILED after a release, and the consumer the outcome.
	sub, err := handoff.NewSubmitter(kafkaPub, fallback, fence, handoff.WithLogger(log), handoff.WithObserver(p.obs))
	if err != nil {
		return err
	}
	p.submit = func(ctx context.Context, m order.Message) (handoff.Route, error) {
		route, err := sub.Submit(ctx, m)
		if err != nil {
			a.logger(ctx).Warn("hand-off failed", "reservation", m.ReservationID, "released", errors.Is(err, handoff.ErrRetry), "err", err)
			return route, err
		}
		a.m.published.WithLabelValues(route.String()).Inc()
		return route, nil
	}
	return nil
}

// recordPosition records where the broker wrote m (orderkafka.WithOnAck).
// A failure is logged and leaves the position unknown: the reconciler then
// applies its grace alone to m's reservation (buildReconcilers).
func (a *App) recordPosition(ctx context.Context, m order.Message, partition int32, offset int64) {
	if a.p.positions == nil {
		return
	}
	if err := a.p.positions.Record(context.WithoutCancel(ctx), m, partition, offset); err != nil {
		a.logger(ctx).Warn("kafka position not recorded; the reconcile grace alone guards the reservation",
			"reservation", m.ReservationID, "partition", partition, "offset", offset, "err", err)
	}
}

// ackedProducer is the relay's SyncProducer: it records the position of
// each order message it sends (the outbox keeps the encoded message; other
// payloads are sent as they are).
type ackedProducer struct {
	sarama.SyncProducer
	a     *App
	topic string
}

func (p ackedProducer) SendMessage(pm *sarama.ProducerMessage) (int32, int64, error) {
	part, off, err := p.SyncProducer.SendMessage(pm)
	if err == nil {
		p.record(pm)
	}
	return part, off, err
}

func (p ackedProducer) SendMessages(pms []*sarama.ProducerMessage) error {
	err := p.SyncProducer.SendMessages(pms)
	var failed sarama.ProducerErrors
	errors.As(err, &failed)
	bad := make(map[*sarama.ProducerMessage]bool, len(failed))
	for _, e := range failed {
		bad[e.Msg] = true
	}
	if err != nil && len(failed) == 0 {
		return err // no message is known to be acknowledged
	}
	for _, pm := range pms {
		if !bad[pm] {
			p.record(pm)
		}
	}
	return err
}

func (p ackedProducer) record(pm *sarama.ProducerMessage) {
	if pm.Topic != p.topic || pm.Value == nil {
		return
	}
	b, err := pm.Value.Encode()
	if err != nil {
		return
	}
	m, err := order.Decode(b)
	if err != nil {
		return
	}
	p.a.recordPosition(context.Background(), m, pm.Partition, pm.Offset)
}

// submitFunc is the hand-off as checkout takes it (checkout.Submitter).
type submitFunc func(ctx context.Context, m order.Message) (handoff.Route, error)

// Submit hands m on.
func (f submitFunc) Submit(ctx context.Context, m order.Message) (handoff.Route, error) {
	return f(ctx, m)
}

// buildCheckout is the buy: one checkout.Checkout of the sale over the
// parts above. Its steps, their order, the undo of a retryable end, the
// spent-token rule and the reservation IDs are checkout's; handleBuy
// (buy.go) reads a request into an attempt and answers its outcome.
func (a *App) buildCheckout() (err error) {
	p, act := a.p, a.sale.act
	a.co, err = checkout.New(checkout.Config{
		Activity: act.ID,
		Price:    int64(act.ActivityPrice),
		Start:    act.Start,
		End:      act.End,
		Now:      a.now, // -clock-skew moves this node's window check (tests only)
		Node:     p.nodeTag,

		Stock:     p.units.forCheckout(a.in.StockRedis == a.in.Redis),
		Submitter: p.submit,
		Results:   p.results.Reservation,
		Fence:     p.fence.ReleaseFor, // the undo releases through the fence: a resend's order keeps its units
		Tokens:    p.pool,
		Link:      p.signer.Verify,
		Captcha:   p.captcha.check,
		PoW:       a.powCheck(), // -bot-defence=pow
		Risk:      p.checker.Check,
		PerUser:   counted(p.perUser, a.m, "user"),
		Global:    a.globalAllow(), // -bot-defence=priority: the classes' step instead
		Breaker:   p.brRedis.Execute,
		// the fused admission: the per-user window, the replay lookup
		// (without a DB pool or -stock-redis: forCheckout), the captcha
		// and the access token in one script (checkout README, "Fused
		// admission"); never on a Cluster
		Redis:        a.in.Redis,
		Sequential:   a.cfg.SequentialAdmission,
		CaptchaCheck: p.captcha.store.VerifyCheck,
		RiskCheck:    p.checker.CheckCheck, // its three built-in rules join the script

		Steps:       a.steps,
		OnUndoError: a.undoFailed,
	})
	return err
}

// steps is the app's edit of checkout's default steps (shapeAfterGlobal),
// then a test's (Config.checkoutSteps), which is applied last.
func (a *App) steps(defaults []checkout.Step) []checkout.Step {
	steps := a.fairSteps(a.botSteps(shapeAfterGlobal(defaults)))
	if a.cfg.checkoutSteps != nil {
		steps = a.cfg.checkoutSteps(steps)
	}
	return steps
}

// shapeAfterGlobal moves the shape step after the window, sold-out and
// global steps, as the API has always answered: a buy of a sale not yet
// open, sold out (a winner's new attempt too: it has no access token left)
// or over this node's intake hears that before what is wrong with its
// credentials.
func shapeAfterGlobal(steps []checkout.Step) []checkout.Step {
	out := make([]checkout.Step, 0, len(steps))
	var shape []checkout.Step
	at := 0
	for _, s := range steps {
		switch s.Name {
		case checkout.StepShape:
			shape = append(shape, s)
			continue
		case checkout.StepWindow, checkout.StepSoldOut, checkout.StepGlobal:
			at = len(out) + 1
		}
		out = append(out, s)
	}
	return append(out[:at], append(shape, out[at:]...)...)
}

// undoFailed hears an undo of a retryable end that failed: an access token
// not restored (the buyer needs a new one; nothing is lost) or a
// reservation not released (the reconciler releases it).
func (a *App) undoFailed(ctx context.Context, step string, at *checkout.Attempt, err error) {
	if step == checkout.StepToken {
		a.m.refused.WithLabelValues("token_restore_error").Inc()
		a.logger(ctx).Warn("access token not restored", "user", at.User, "err", err)
		return
	}
	a.logger(ctx).Warn("release after a refused hand-off failed; the reconciler will release it",
		"step", step, "reservation", at.Reservation(), "err", err)
}

// countedWindow is a per-user window that counts its refusals
// (seckill_limiter_refusals_total{limiter=name}) and the answers of its
// local fallback (name_fallback), as userLimit does.
type countedWindow struct {
	limiter.Limiter
	m    *metrics
	name string
}

func (c countedWindow) AllowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	res, err := c.Limiter.AllowN(ctx, key, n)
	if err != nil {
		return res, err
	}
	c.count(res)
	return res, nil
}

func (c countedWindow) count(res limiter.Result) {
	if res.Degraded {
		c.m.limited.WithLabelValues(c.name + "_fallback").Inc()
	}
	if !res.Allowed {
		c.m.limited.WithLabelValues(c.name).Inc()
	}
}

// windowCheck is the fused form of a per-user window
// (*redislimit.SlidingWindow's), which checkout recognises on
// Config.PerUser.
type windowCheck interface {
	AllowCheck(key string) fused.Check[limiter.Result]
}

// fusedWindow is a countedWindow whose window offers the fused form: it
// offers it too, counting in the decoder what AllowN counts.
type fusedWindow struct {
	countedWindow
	w windowCheck
}

// AllowCheck is the window's fused check; its answer is counted as
// AllowN's.
func (f fusedWindow) AllowCheck(key string) fused.Check[limiter.Result] {
	ch := f.w.AllowCheck(key)
	decode := ch.Decode
	ch.Decode = func(ctx context.Context, reply any) (limiter.Result, error) {
		res, err := decode(ctx, reply)
		if err == nil {
			f.count(res)
		}
		return res, err
	}
	return ch
}

// counted is l with its answers counted under name: a fusedWindow when l
// offers the fused form, so checkout runs it in the fused admission.
func counted(l limiter.Limiter, m *metrics, name string) limiter.Limiter {
	c := countedWindow{Limiter: l, m: m, name: name}
	if w, ok := l.(windowCheck); ok {
		return fusedWindow{countedWindow: c, w: w}
	}
	return c
}

// buildCanceller: the unpaid-order canceller (Redis delay queue + DB scan
// backstop). Every node pays through it (parts.orders); a working node runs
// its loops.
func (a *App) buildCanceller(rel order.Releaser) (*status.Canceller, error) {
	log := a.log
	// The canceller knows each reservation it releases was made (its order
	// exists): ReleaseOrder turns a ledger entry Redis lost into a freeze
	// and a rebuild instead of a tombstone.
	canc, err := status.NewCanceller(a.in.DB, a.in.Redis, orderReleaser{Releaser: rel, a: a}, append(a.payCancellerOptions(),
		status.WithKeyPrefix(a.cfg.KeyPrefix),
		status.WithPollInterval(500*time.Millisecond),
		status.WithScanInterval(30*time.Second),
		status.WithLogger(log),
		status.WithOnPayCancelled(func(ctx context.Context, o order.Order) {
			log.Warn("payment for a cancelled order: refund it", "order_no", o.OrderNo, "user", o.UserID)
		}),
		status.WithOnError(func(ctx context.Context, err error) {
			a.m.workerErrors.WithLabelValues("canceller").Inc()
			log.Warn("canceller", "err", err)
		}))...)
	if err != nil {
		return nil, err
	}
	w := worker{name: "canceller", stop: canc.Close}
	if a.cfg.works() {
		w.run = canc.Run
	}
	a.run.add(w)
	return canc, nil
}

// buildReconcilers: the Redis ledger against the DB, every ReconcileEvery
// on a working node, and its dry-run twin for the admin API. A reservation
// is released only when it has no live order, is older than the grace
// period, no outbox row still carries its message, and its message is not
// still deliverable in Kafka: recorded at or after the consumer group's
// committed offset of its partition and not trimmed by retention (read
// once per pass, orderkafka.Positions), however long the consumer lags —
// the buyer reads "queued" meanwhile. A reservation whose message position
// is unknown (the record failed) has the grace alone. A released
// reservation is fenced in the DB first, so a late message deducts
// nothing and its buyer reads "failed".
func (a *App) buildReconcilers(rel order.Releaser) (err error) {
	p, log := a.p, a.log
	ledger := reconcile.Ledger(a.ledgerPage)
	pending := reconcile.Pending(func(ctx context.Context, resv string) (bool, error) {
		return outbox.HasPendingReservation(ctx, a.in.DB, resv)
	})
	opts := []reconcile.Option{reconcile.WithGrace(a.cfg.ReconcileGrace), reconcile.WithPending(pending),
		reconcile.WithResults(p.results), reconcile.WithLogger(log)}
	if p.positions != nil {
		opts = append(opts, reconcile.WithPendingPass(func(ctx context.Context, activity string) (reconcile.Pending, error) {
			return p.positions.Pending(ctx, activity)
		}))
	}
	if a.cfg.reconcileClock != nil { // tests only
		opts = append(opts, reconcile.WithClock(a.cfg.reconcileClock))
	}
	if p.recon, err = reconcile.NewReconciler(a.in.DB, ledger, rel, opts...); err != nil {
		return err
	}
	if p.reconDry, err = reconcile.NewReconciler(a.in.DB, ledger, rel, append(opts, reconcile.WithDryRun(true))...); err != nil {
		return err
	}
	if !a.cfg.works() {
		return nil
	}
	a.run.add(worker{name: "reconciler", run: every(a.cfg.ReconcileEvery, func(ctx context.Context) {
		for _, activity := range a.sale.ledgers() { // each variant's ledger of a sale with variants
			rep, err := p.recon.Reconcile(ctx, activity)
			if err != nil {
				a.m.workerErrors.WithLabelValues("reconciler").Inc()
				log.Warn("reconcile", "activity", activity, "err", err)
				continue
			}
			if len(rep.Released) > 0 || len(rep.Orphans) > 0 || !rep.Conserved {
				a.m.released.WithLabelValues("reconciler").Add(float64(len(rep.Released)))
				log.Warn("reconciler repaired", "activity", activity, "released", len(rep.Released), "orphans", len(rep.Orphans), "conserved", rep.Conserved)
			}
			// An activity without its DB row has no orphans to judge;
			// orphans in a loaded one are a loss the fence missed.
			if len(rep.Orphans) > 0 && !rep.ActivityMissing {
				a.repairOrphans(ctx, activity, rep.Orphans)
			}
		}
	})})
	return nil
}

// repairOrphans acts on the reconciler's orphans of activity: live orders
// whose reservation the ledger did not list. The data-loss fence judges
// only the calls a Deductor makes, so a copy of the sale that lost
// acknowledged writes (a failover to a replica that missed them) goes
// unnoticed while no buyer asks again (every process has it sold out in
// its cache), and that copy counts the lost units as free: Redis would
// then accept buyers the DB refuses (RELIABILITY, FC2l). Each orphan is
// confirmed first by a lookup in the ledger (and the DB pool) — a
// reservation made after the reconciler read the ledger is there now, and
// is not a loss — and one confirmed orphan freezes the activity: buyers
// are answered "busy", and the preloader's recovery rebuilds it from the
// DB's live orders as after any other loss (recoverStock).
//
// Only the copy judged is frozen: an activity not in Redis (wiped) is the
// preloader's, whose recovery rebuilds it from the DB anyway, and a copy
// whose epoch changed after the lookups (rebuilt from the DB meanwhile) is
// left alone. Before, the reconciler could confirm its orphans on a wiped
// copy and then freeze the copy the preloader had just rebuilt: a second,
// needless freeze and rebuild, buyers answered "busy" in between.
func (a *App) repairOrphans(ctx context.Context, activity string, orderNos []string) {
	judged, err := a.p.stock.Stats(ctx, activity)
	if err != nil || !judged.Loaded || judged.Frozen {
		return // unknown now, not loaded (the preloader rebuilds it), or frozen already
	}
	ids, err := a.orphanReservations(ctx, activity, orderNos)
	if err != nil {
		a.m.workerErrors.WithLabelValues("reconciler").Inc()
		a.log.Warn("reconciler: orphans not checked", "activity", activity, "err", err)
		return
	}
	for _, id := range ids {
		_, found, err := a.p.stock.Lookup(ctx, activity, id)
		if err == nil && !found && a.p.fallback != nil {
			_, found, err = a.p.fallback.Lookup(ctx, activity, id)
		}
		if errors.Is(err, stock.ErrFrozen) {
			return // frozen already: the recovery rebuilds it
		}
		if err != nil {
			a.m.workerErrors.WithLabelValues("reconciler").Inc()
			a.log.Warn("reconciler: orphan not checked", "activity", activity, "reservation", id, "err", err)
			continue
		}
		if found {
			continue
		}
		if a.cfg.beforeOrphanFreeze != nil { // tests only
			a.cfg.beforeOrphanFreeze()
		}
		if now, err := a.p.stock.Stats(ctx, activity); err != nil || !now.Loaded || now.Epoch != judged.Epoch {
			return // rebuilt (or lost) since the lookups: not the copy judged
		}
		a.m.workerErrors.WithLabelValues("redis_data_loss").Inc()
		// The same alert as the fence's (WithOnLoss above): one line for
		// operators to watch, whichever noticed the loss first.
		a.log.Error("ALERT: Redis lost or rolled back the sale's state (a live order's reservation is missing: the reconciler's orphan); frozen until rebuilt from the DB",
			"activity", activity, "reservation", id)
		if err := a.p.stock.Freeze(ctx, activity); err != nil {
			a.m.workerErrors.WithLabelValues("reconciler").Inc()
			a.log.Warn("reconciler: freeze after an orphan", "activity", activity, "err", err)
		}
		return // one is enough: the rebuild restores every live order
	}
}

// orphanReservations returns the reservation IDs of the orphans orderNos
// of activity: the orders' own, or their lines' in activity.
func (a *App) orphanReservations(ctx context.Context, activity string, orderNos []string) ([]string, error) {
	var ids, lines []string
	db := a.in.DB.WithContext(ctx)
	t, err := order.TablesOf()
	if err != nil {
		return nil, err
	}
	if err := db.Table(t.Order).Where("activity_id = ? AND order_no IN ? AND qty > 0", activity, orderNos).
		Pluck("reservation_id", &ids).Error; err != nil {
		return nil, err
	}
	if err := db.Table(t.Line).Where("activity_id = ? AND order_no IN ?", activity, orderNos).
		Pluck("reservation_id", &lines).Error; err != nil {
		return nil, err
	}
	return append(ids, lines...), nil
}

// ledgerPage is the reconciler's view of the stock ledger: the held
// reservations of Redis, and of the DB pool with the last page.
func (a *App) ledgerPage(ctx context.Context, activity string, cursor uint64, count int64) ([]reconcile.Reservation, uint64, error) {
	page, next, err := a.p.stock.Reservations(ctx, activity, cursor, count)
	if err != nil {
		return nil, 0, err
	}
	if next == 0 && a.hasPool(activity) {
		pool, err := a.poolReservations(ctx, activity)
		if err != nil {
			return nil, 0, err
		}
		page = append(page, pool...)
	}
	out := make([]reconcile.Reservation, 0, len(page))
	for _, r := range page {
		if r.State == stock.Held {
			out = append(out, reconcile.Reservation{ID: r.ID, User: r.User, Qty: r.Qty, At: r.ReservedAt})
		}
	}
	return out, next, nil
}

// buildRelay: outbox rows → Kafka (the same producer, behind the Kafka
// breaker).
func (a *App) buildRelay() error {
	spub, err := outbox.NewSaramaPublisher(ackedProducer{SyncProducer: a.in.Producer, a: a, topic: a.cfg.Topic})
	if err != nil {
		return err
	}
	relayPub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		return a.p.brKafka.Execute(ctx, func(ctx context.Context) error { return spub.Publish(ctx, m) })
	})
	relay, err := outbox.NewRelay(a.in.DB, relayPub, outbox.WithLogger(a.log), outbox.WithObserver(a.p.obs), outbox.WithPollInterval(200*time.Millisecond),
		outbox.WithOnFailed(func(ctx context.Context, m outbox.Message, err error) {
			a.log.ErrorContext(ctx, "ALERT: outbox message failed for good", "msg_id", m.MsgID, "err", err)
		}))
	if err != nil {
		return err
	}
	a.p.relay = relay
	a.run.add(worker{name: "outbox_relay", run: relay.Run, stop: relay.Close})
	return nil
}

// buildConsumer: Kafka → one DB transaction per batch → results → push.
// The consumer group connects when the worker starts.
func (a *App) buildConsumer(proc *order.Processor, rel order.Releaser, canc *status.Canceller) error {
	cfg, log := a.cfg, a.log
	dlq, err := orderkafka.NewDeadLetterTopic(a.in.Producer, cfg.Topic+".dlq")
	if err != nil {
		return err
	}
	// The push view is built from what the consumer already knows, and only
	// when a stream on this node waits for the reservation: no DB read on
	// the consumer goroutine.
	notify := notifierFunc(func(ctx context.Context, r order.Result) {
		a.m.consumed.Inc()
		if r.ReservationID != "" && a.hub.waiting(r.ReservationID) {
			a.hub.publish(r.ReservationID, settledView(r))
		}
	})
	cons, err := order.NewConsumer(proc, rel, order.WithResults(a.p.results), order.WithNotifier(notify), order.WithDeadLetter(dlq),
		order.WithObserver(a.p.obs), order.WithContextFrom(cfg.Trace.Extract), order.WithScheduler(canc),
		order.WithLogger(log), order.WithOnError(func(ctx context.Context, err error) {
			a.m.workerErrors.WithLabelValues("consumer").Inc()
			log.Warn("consumer", "err", err)
		}))
	if err != nil {
		return err
	}
	handler, err := orderkafka.NewHandler(cons)
	if err != nil {
		return err
	}
	a.p.handler = handler
	a.run.add(worker{name: "consumer",
		start: func(ctx context.Context) (err error) {
			if a.p.group, err = sarama.NewConsumerGroup(a.in.Brokers, consumerGroup, a.in.kafkaCfg); err != nil {
				return fmt.Errorf("kafka consumer group: %w", err)
			}
			return nil
		},
		run:  func(ctx context.Context) error { return consume(ctx, a.p.group, cfg.Topic, handler, a.log) },
		stop: func() error { return a.p.group.Close() },
	})
	return nil
}

// consume runs the consumer group's session loop until ctx ends or the
// group closes, logging the group's errors meanwhile.
func consume(ctx context.Context, group sarama.ConsumerGroup, topic string, h sarama.ConsumerGroupHandler, log interface{ Warn(string, ...any) }) error {
	errsDone := make(chan struct{})
	go func() { // ends when the group is closed (the worker's stop)
		defer close(errsDone)
		for err := range group.Errors() {
			log.Warn("consumer group error", "err", err)
		}
	}()
	defer func() { <-errsDone }()
	for ctx.Err() == nil {
		err := group.Consume(ctx, []string{topic}, h)
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, sarama.ErrClosedConsumerGroup):
			return nil
		default:
			log.Warn("consumer group", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
	return nil
}

// notifierFunc adapts a function to order.Notifier.
type notifierFunc func(ctx context.Context, r order.Result)

func (f notifierFunc) Notify(ctx context.Context, r order.Result) { f(ctx, r) }
