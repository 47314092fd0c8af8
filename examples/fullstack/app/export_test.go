package app

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/examples/fullstack/admin"
	"github.com/seckillkit/seckill/order"
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
	f, err := order.NewFence(a.in.DB, order.ReleaserFunc(func(ctx context.Context, activity, id string) error {
		_, err := a.p.stock.Release(ctx, activity, id)
		return err
	}))
	if err != nil {
		return err
	}
	return f.ReleaseFor(ctx, order.ReleaseRequest{Activity: a.sale.act.ID, User: user, ReservationID: resv})
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
