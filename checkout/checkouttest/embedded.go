package checkouttest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/captcha/captchatest"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

const (
	embeddedActivity = "kit-sale"
	embeddedTopic    = "orders"
	embeddedAnswer   = "42"
	embeddedGrace    = time.Minute
	drainRounds      = 20
)

var (
	errKafkaDown  = errors.New("checkouttest: kafka down")
	errOutboxDown = errors.New("checkouttest: database down (outbox)")
)

// Embedded is the reference composition, every part real and embedded:
// miniredis (testenv.Miniredis) for the stock ledger (stock.Deductor), the
// access-token pool (token.Pool), the captcha store (captcha.Store with a
// fixed answer from captchatest) and the results (status.Results); SQLite
// (testenv.SQLite) for the activity row, the orders (order.Processor behind
// order.Consumer), the dedup fence (handoff.Fence), the outbox (outbox.Writer
// and outbox.Relay) and the reconciler (reconcile.Reconciler); token.Signer for
// the buy link; the default checkout steps. The one stand-in is Kafka: an
// in-process queue of encoded order messages, consumed by Drain.
// Faults.KafkaDown fails its publisher, Faults.OutboxDown the outbox write,
// Freeze and Pause call the Deductor. Every clock is one
// testenv.NewEpochClock (miniredis time follows it); Drain moves it past
// the reconciler's grace. Risk, limiters and the breaker are left out: they
// keep no units.
func Embedded(t testing.TB, c Config) *Sale {
	t.Helper()
	return embeddedOn(t, c, testenv.SQLite, nil)
}

// embeddedOn is Embedded over the database openDB opens (the kit's
// MySQL/MariaDB tier opens testenv.MySQL) and, when rdb is not nil, over
// that real Redis server or Cluster instead of miniredis: every key under
// the scenario's testenv.Prefix, the clock real time (a real server's
// TIME cannot follow a fake one), moved ahead of it by Drain past the
// reconciler's grace.
func embeddedOn(t testing.TB, c Config, openDB func(testing.TB) *gorm.DB, rdb redis.UniversalClient) *Sale {
	t.Helper()
	e := &embedded{t: t, clk: testenv.NewEpochClock(0), openDB: openDB, rdb: rdb}
	if rdb != nil {
		e.clk = testenv.NewRealClock()
	}
	e.build(c)
	return e.sale
}

type embedded struct {
	t      testing.TB
	clk    *testenv.Clock
	sale   *Sale
	q      queue
	openDB func(testing.TB) *gorm.DB
	rdb    redis.UniversalClient // a real server; nil: miniredis
	// wrap, when set (the kit's own tests), is the checkout's Stock made
	// of the Deductor: a composition that breaks Stock's contract.
	wrap func(*stock.Deductor) checkout.Stock
	// plainUndo (the kit's own tests) leaves checkout.Config.Fence unset:
	// the undo releases without fencing.
	plainUndo bool
}

// queue is the stand-in for Kafka: encoded order messages in the order
// they were published.
type queue struct {
	mu         sync.Mutex
	recs       []order.Record
	offset     int64
	kafkaDown  bool
	outboxDown bool
}

func (q *queue) push(key string, value []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.kafkaDown {
		return errKafkaDown
	}
	q.recs = append(q.recs, order.Record{Topic: embeddedTopic, Offset: q.offset, Key: []byte(key), Value: value})
	q.offset++
	return nil
}

func (q *queue) take() []order.Record {
	q.mu.Lock()
	defer q.mu.Unlock()
	recs := q.recs
	q.recs = nil
	return recs
}

func (q *queue) has(reservation string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range q.recs {
		if m, err := order.Decode(r.Value); err == nil && m.ReservationID == reservation {
			return true
		}
	}
	return false
}

func (q *queue) set(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f()
}

func (e *embedded) must(what string, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("checkouttest: embedded: %s: %v", what, err)
	}
}

func (e *embedded) build(c Config) {
	t, clk, q := e.t, e.clk, &e.q
	t.Helper()
	ctx := context.Background()
	act := embeddedActivity
	rdb := e.rdb
	var mr *miniredis.Miniredis
	// On a real server, every key under the scenario's own prefix.
	var stockOpts []stock.DeductorOption
	var tokenOpts []token.PoolOption
	var captchaOpts []captcha.Option
	var statusOpts []status.ResultsOption
	if rdb == nil {
		var c *redis.Client
		c, mr = testenv.Miniredis(t)
		rdb = c
		mr.SetTime(clk.Now())
	} else {
		p := testenv.Prefix(t)
		stockOpts, tokenOpts = []stock.DeductorOption{stock.WithKeyPrefix(p)}, []token.PoolOption{token.WithKeyPrefix(p)}
		captchaOpts, statusOpts = []captcha.Option{captcha.WithKeyPrefix(p)}, []status.ResultsOption{status.WithKeyPrefix(p)}
	}
	db := e.openDB(t)
	e.must("migrate orders", order.AutoMigrate(ctx, db))
	e.must("migrate outbox", outbox.AutoMigrate(ctx, db))
	now := clk.Now()
	e.must("activity row", db.Create(&order.Activity{ID: act, Name: "checkouttest", ActivityPrice: 990, OriginalPrice: 1990,
		Stock: c.Stock, Remaining: c.Stock, PerUserLimit: max(c.PerUserLimit, 1), Status: order.ActivityActive,
		Start: now.Add(-time.Hour), End: now.Add(24 * time.Hour)}).Error)
	ledgers := []string{act} // what the reconciler reconciles
	if len(c.Variants) > 0 {
		ledgers = ledgers[:0]
	}
	for _, v := range c.Variants {
		id := stock.VariantOf(act, v.ID)
		limit := v.PerUserLimit
		if limit == 0 {
			limit = max(c.PerUserLimit, 1)
		}
		e.must("variant row", db.Create(&order.Activity{ID: id, Name: "checkouttest " + v.ID, ActivityPrice: 990, OriginalPrice: 1990,
			Stock: v.Stock, Remaining: v.Stock, PerUserLimit: limit, Status: order.ActivityActive,
			Start: now.Add(-time.Hour), End: now.Add(24 * time.Hour)}).Error)
		ledgers = append(ledgers, id)
	}

	d, err := stock.New(rdb, append(stockOpts, stock.WithClock(clk))...)
	e.must("stock", err)
	if len(c.Variants) > 0 {
		_, err = d.Load(ctx, stock.Activity{ID: act, PerUserLimit: c.PerUserLimit, Variants: c.Variants})
	} else {
		_, err = d.Load(ctx, stock.Activity{ID: act, Stock: c.Stock, PerUserLimit: c.PerUserLimit})
	}
	e.must("load stock", err)
	pool, err := token.NewPool(rdb, append(tokenOpts, token.WithClock(clk), token.WithBindTTL(24*time.Hour))...)
	e.must("token pool", err)
	_, err = pool.Issue(ctx, act, c.Stock+16)
	e.must("issue tokens", err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	signer, err := token.NewSigner([]token.Key{{ID: "k1", Secret: secret}}, token.WithClock(clk))
	e.must("signer", err)
	captchas, err := captcha.New(rdb, captchatest.Fixed("six times seven?", embeddedAnswer),
		append(captchaOpts, captcha.WithClock(clk), captcha.WithTTL(24*time.Hour))...)
	e.must("captcha", err)

	results, err := status.NewResults(rdb, db, append(statusOpts, status.WithClock(clk))...)
	e.must("results", err)
	ids, err := orderid.New(1, orderid.WithClock(clk), orderid.WithEpoch(clk.Now().Add(-24*time.Hour)))
	e.must("order ids", err)
	proc, err := order.NewProcessor(db, ids, order.WithClock(clk))
	e.must("processor", err)
	release := checkout.Releaser(d)
	fence, err := handoff.NewFence(db, release, handoff.WithResults(results), handoff.WithClock(clk))
	e.must("fence", err)
	consumer, err := order.NewConsumer(proc, release, order.WithResults(results))
	e.must("consumer", err)
	writer, err := outbox.NewWriter(outbox.WithClock(clk))
	e.must("outbox writer", err)
	fallback := handoff.Fallback(func(ctx context.Context, m order.Message) error {
		q.mu.Lock()
		down := q.outboxDown
		q.mu.Unlock()
		if down {
			return errOutboxDown
		}
		b, err := m.Encode()
		if err != nil {
			return err
		}
		return writer.Write(ctx, db.WithContext(ctx), outbox.Message{MsgID: m.MsgID, Topic: embeddedTopic, Key: m.Key(), ReservationID: m.ReservationID, Payload: b})
	})
	publish := handoff.Publisher(func(_ context.Context, m order.Message) error {
		b, err := m.Encode()
		if err != nil {
			return err
		}
		return q.push(m.Key(), b)
	})
	// No QUEUED result at the hand-off, as in the reference deployment:
	// checkout.Checkout.Result answers an in-flight reservation from the
	// ledger (the non_owner_result scenario reads it before the drain).
	submitter, err := handoff.NewSubmitter(publish, fallback, fence, handoff.WithClock(clk))
	e.must("submitter", err)
	relay, err := outbox.NewRelay(db, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error { return q.push(m.Key, m.Payload) }),
		outbox.WithClock(clk), outbox.WithoutCleanup())
	e.must("outbox relay", err)
	ledger := checkout.Ledger(d)
	pending := reconcile.Pending(func(ctx context.Context, id string) (bool, error) {
		if q.has(id) {
			return true, nil
		}
		return outbox.HasPendingReservation(ctx, db, id)
	})
	recon, err := reconcile.NewReconciler(db, ledger, release, reconcile.WithGrace(embeddedGrace), reconcile.WithPending(pending),
		reconcile.WithResults(results), reconcile.WithClock(clk))
	e.must("reconciler", err)

	var st checkout.Stock = d
	if e.wrap != nil {
		st = e.wrap(d)
	}
	undoFence := fence.ReleaseFor
	if e.plainUndo {
		undoFence = nil
	}
	co, err := checkout.New(checkout.Config{Activity: act, Stock: st, Submitter: submitter, Results: results.Reservation, Fence: undoFence,
		Tokens: pool, Link: signer.Verify, Captcha: captchas.Verify, Node: "kit", Now: clk.Now, Steps: c.Steps})
	e.must("checkout", err)

	e.sale = &Sale{
		Checkout: co,
		Attempt: func(ctx context.Context, user string) (checkout.Attempt, error) {
			g, err := pool.Take(ctx, act, user)
			if err != nil {
				return checkout.Attempt{}, err
			}
			if g.Token == "" {
				return checkout.Attempt{}, fmt.Errorf("checkouttest: no access token for %q: %s", user, g.Status)
			}
			ch, err := captchas.Generate(ctx, captcha.GenerateParams{User: user})
			if err != nil {
				return checkout.Attempt{}, err
			}
			now := clk.Now()
			link, err := signer.Sign(token.SignParams{Activity: act, User: user, Start: now, Expiry: now.Add(time.Hour)})
			if err != nil {
				return checkout.Attempt{}, err
			}
			return checkout.Attempt{User: user, Token: g.Token, CaptchaID: ch.ID, Captcha: embeddedAnswer, Link: link}, nil
		},
		Drain: func(ctx context.Context) error {
			for range drainRounds {
				q.mu.Lock()
				kafkaUp := !q.kafkaDown
				q.mu.Unlock()
				if kafkaUp {
					for range 100 {
						b, err := relay.RunOnce(ctx)
						if err != nil {
							return fmt.Errorf("outbox relay: %w", err)
						}
						if b.Claimed == 0 {
							break
						}
					}
				}
				if recs := q.take(); len(recs) > 0 {
					done, err := consumer.Consume(ctx, recs)
					if err != nil || done != len(recs) {
						return fmt.Errorf("consume: %d of %d done: %v", done, len(recs), err)
					}
					continue
				}
				backlog, err := outbox.Stats(ctx, db)
				if err != nil {
					return err
				}
				if backlog.Pending > 0 && !kafkaUp {
					return errors.New("checkouttest: Drain with Kafka down and the outbox pending")
				}
				// Nothing queued: past the grace, the reconciler releases
				// what has no order and no message on its way.
				clk.Add(embeddedGrace + time.Second)
				if mr != nil {
					mr.SetTime(clk.Now())
				}
				for _, l := range ledgers {
					if _, err := recon.Reconcile(ctx, l); err != nil {
						return fmt.Errorf("reconcile %s: %w", l, err)
					}
				}
				if backlog.Pending == 0 && len(q.take()) == 0 {
					return nil
				}
			}
			return fmt.Errorf("checkouttest: the pipeline did not drain in %d rounds", drainRounds)
		},
		Counts: func(ctx context.Context) (Counts, error) {
			n, err := Count(ctx, d, db, act, c.Stock)
			if err != nil {
				return n, err
			}
			ps, err := pool.Stats(ctx, act)
			if err != nil {
				return n, err
			}
			n.TokensUsed = ps.Used
			return n, nil
		},
		Faults: Faults{
			KafkaDown:  func(down bool) { q.set(func() { q.kafkaDown = down }) },
			OutboxDown: func(down bool) { q.set(func() { q.outboxDown = down }) },
			Freeze: func(ctx context.Context, frozen bool) error {
				if frozen {
					return d.Freeze(ctx, act)
				}
				return d.Unfreeze(ctx, act)
			},
			Pause: func(ctx context.Context, paused bool) error {
				if paused {
					return d.Pause(ctx, act)
				}
				return d.Resume(ctx, act)
			},
		},
	}
}

// Count reads a sale's Counts from the stock ledger d and the order tables
// of db (their default names): what most compositions' Sale.Counts is.
// TokensUsed is -1 (no token pool read). A sale with variants (d lists
// them) is counted per variant: each variant's ledger and activity row,
// and the lines of the sale's orders.
func Count(ctx context.Context, d *stock.Deductor, db *gorm.DB, activity string, initial int64) (Counts, error) {
	n := Counts{Initial: initial, Held: map[string]Unit{}, Live: map[string]Unit{}, Rows: map[string]int{}, TokensUsed: -1}
	vs, err := d.Variants(ctx, activity)
	switch {
	case errors.Is(err, stock.ErrNotLoaded):
		vs = nil
	case err != nil:
		return n, err
	}
	if vs != nil {
		return countVariants(ctx, d, db, activity, vs, n)
	}
	st, err := d.Stats(ctx, activity)
	if err != nil {
		return n, err
	}
	n.RedisRemaining = st.Remaining
	if err := scanHeld(ctx, d, activity, "", n.Held); err != nil {
		return n, err
	}
	var a order.Activity
	if err := db.WithContext(ctx).Where("id = ?", activity).First(&a).Error; err != nil {
		return n, err
	}
	n.DBRemaining = a.Remaining
	var orders []order.Order
	if err := db.WithContext(ctx).Where("activity_id = ?", activity).Find(&orders).Error; err != nil {
		return n, err
	}
	for _, o := range orders {
		n.Rows[o.ReservationID]++
		// cancelled orders and refunds restocked to the sale hold nothing;
		// a refund without restock to the sale stays sold
		if o.Status != order.OrderCancelled && !(o.Status == order.OrderRefunded && o.Restock == "sale") {
			u := n.Live[o.ReservationID]
			u.User, u.Qty = o.UserID, u.Qty+o.Qty
			n.Live[o.ReservationID] = u
		}
	}
	return n, nil
}

// scanHeld adds the held reservations of ledger to held: under their ID,
// or, for a variant's ledger (variant set), under the order's reservation
// ID (an entry "<id>#<i>" is line i of the order of "<id>").
func scanHeld(ctx context.Context, d *stock.Deductor, ledger, variant string, held map[string]Unit) error {
	cursor := uint64(0)
	for i := 0; ; i++ {
		if i == 10000 {
			return errors.New("checkouttest: ledger scan did not end")
		}
		page, next, err := d.Reservations(ctx, ledger, cursor, 500)
		if err != nil {
			return err
		}
		for _, r := range page {
			if r.State != stock.Held {
				continue
			}
			id := r.ID
			if variant != "" {
				if j := strings.LastIndexByte(id, '#'); j >= 0 {
					id = id[:j]
				}
			}
			u := held[id]
			if u.Qty > 0 && u.Variant != variant {
				// one reservation held in two variants: count it twice
				// (the truth and conservation checks see a second unit)
				id += "+" + variant
				u = held[id]
			}
			u.User, u.Qty, u.Variant = r.User, u.Qty+r.Qty, variant
			held[id] = u
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// countVariants is Count of a sale with variants vs.
func countVariants(ctx context.Context, d *stock.Deductor, db *gorm.DB, activity string, vs []stock.Variant, n Counts) (Counts, error) {
	n.VariantRemaining, n.VariantDBRemaining = map[string]int64{}, map[string]int64{}
	byID := map[string]string{} // variant activity → variant
	for _, v := range vs {
		id := stock.VariantOf(activity, v.ID)
		byID[id] = v.ID
		st, err := d.Stats(ctx, id)
		if err != nil {
			return n, err
		}
		n.VariantRemaining[v.ID] = st.Remaining
		n.RedisRemaining += st.Remaining
		if err := scanHeld(ctx, d, id, v.ID, n.Held); err != nil {
			return n, err
		}
		var a order.Activity
		if err := db.WithContext(ctx).Where("id = ?", id).First(&a).Error; err != nil {
			return n, fmt.Errorf("checkouttest: the activity row of variant %s: %w", id, err)
		}
		n.VariantDBRemaining[v.ID] = a.Remaining
		n.DBRemaining += a.Remaining
	}
	var orders []order.Order
	if err := db.WithContext(ctx).Where("activity_id = ?", activity).Find(&orders).Error; err != nil {
		return n, err
	}
	resv := map[string]string{} // order number → the order's reservation
	nos := make([]string, 0, len(orders))
	for _, o := range orders {
		n.Rows[o.ReservationID]++
		resv[o.OrderNo] = o.ReservationID
		nos = append(nos, o.OrderNo)
		if o.Qty > 0 && o.Status != order.OrderCancelled && !(o.Status == order.OrderRefunded && o.Restock == "sale") {
			// a plain order of a sale with variants: counted, with no variant
			u := n.Live[o.ReservationID]
			u.User, u.Qty = o.UserID, u.Qty+o.Qty
			n.Live[o.ReservationID] = u
		}
	}
	if len(nos) == 0 {
		return n, nil
	}
	var lines []order.Line
	if err := db.WithContext(ctx).Table("seckill_order_line").Where("order_no IN ?", nos).Find(&lines).Error; err != nil {
		return n, err
	}
	for _, l := range lines {
		// a line follows its order (""), or was cancelled or refunded on
		// its own or with it; a refund without restock to the sale stays sold
		if l.Status != "" && !(l.Status == order.OrderRefunded && l.Restock != "sale") {
			continue
		}
		r := resv[l.OrderNo]
		u := n.Live[r]
		v, ok := byID[l.ActivityID]
		if !ok {
			v = l.ActivityID // not a variant of the sale: named as it is, so the variant check sees it
		}
		if u.Qty > 0 && u.Variant != v {
			v = u.Variant + "+" + v
		}
		u.User, u.Qty, u.Variant = l.UserID, u.Qty+l.Qty, v
		n.Live[r] = u
	}
	return n, nil
}
