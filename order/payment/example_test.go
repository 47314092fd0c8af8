package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/payment"
	"github.com/seckillkit/seckill/order/status"
)

// A provider's signed callbacks pay an order and refund it, restocking the
// sale; a replay, a forgery and a second payment change nothing (the
// second payment goes to the conflict hook, to be refunded).
func ExampleHandler() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "payment-example")
	defer os.RemoveAll(dir)
	db, _ := testenv.OpenSQLite(filepath.Join(dir, "orders.db"))
	_ = order.AutoMigrate(ctx, db)
	start := time.Now()
	db.Create(&order.Activity{ID: "42", Stock: 2, Remaining: 2, PerUserLimit: 1, Start: start, End: start.Add(time.Hour)})
	ids, _ := orderid.New(1)
	proc, _ := order.NewProcessor(db, ids)
	out, _ := proc.Handle(ctx, order.Message{Version: order.MessageVersion, MsgID: "m-1", ReservationID: "resv-1",
		ActivityID: "42", UserID: "7", Qty: 1, CreatedAt: start})

	mr := miniredis.NewMiniRedis()
	_ = mr.Start()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	released := order.ReleaserFunc(func(_ context.Context, _, id string) error { fmt.Println("released", id); return nil })
	canceller, _ := status.NewCanceller(db, nil, released, status.WithOnPayConflict(
		func(_ context.Context, o order.Order, p status.Payment) { fmt.Println("refund", p.Reference) }))

	secret := []byte("whsec_shared")
	h, _ := payment.NewHandler("stripe", canceller, rdb, payment.HMACSHA256(secret))
	send := func(e payment.Event, key []byte) {
		b, _ := json.Marshal(e)
		r := httptest.NewRequest(http.MethodPost, "/payments/callback", bytes.NewReader(b))
		r.Header.Set("Seckill-Signature", payment.Sign(key, time.Now(), b))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	send(payment.Event{ID: "evt_1", Type: payment.EventPaid, OrderNo: out.OrderNo, Reference: "pi_1"}, secret)
	send(payment.Event{ID: "evt_1", Type: payment.EventPaid, OrderNo: out.OrderNo, Reference: "pi_1"}, secret)
	send(payment.Event{ID: "evt_2", Type: payment.EventPaid, OrderNo: out.OrderNo, Reference: "pi_2"}, []byte("guess"))
	send(payment.Event{ID: "evt_3", Type: payment.EventPaid, OrderNo: out.OrderNo, Reference: "pi_2"}, secret)
	send(payment.Event{ID: "evt_4", Type: payment.EventRefunded, OrderNo: out.OrderNo, Restock: status.RestockSale}, secret)
	// Output:
	// 200 {"outcome":"paid"}
	// 200 {"outcome":"duplicate"}
	// 401 {"outcome":"refused"}
	// refund pi_2
	// 200 {"outcome":"conflict"}
	// released resv-1
	// 200 {"outcome":"refunded"}
}
