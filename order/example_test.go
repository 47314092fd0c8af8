package order_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/status"
)

// openExampleDB opens an embedded SQLite database with the order tables and one
// activity of two units, capped at one per user.
func openExampleDB() (*gorm.DB, func()) {
	dir, err := os.MkdirTemp("", "order-example")
	if err != nil {
		panic(err)
	}
	db, err := testenv.OpenSQLite(filepath.Join(dir, "orders.db"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := order.AutoMigrate(ctx, db); err != nil {
		panic(err)
	}
	// The examples run on the real clock (the ID generator, the processor
	// and the canceller use time.Now), so the activity window starts now.
	start := time.Now()
	db.Create(&order.Activity{ID: "42", Name: "phone", ActivityPrice: 99900, Stock: 2, Remaining: 2,
		PerUserLimit: 1, Start: start, End: start.Add(time.Hour)})
	return db, func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
		_ = os.RemoveAll(dir)
	}
}

// message is the n-th message, of user, for activity "42". IDs are
// strings: a decimal number, a UUID, an e-mail-like handle (order.ValidID).
func message(n int, user string) order.Message {
	return order.Message{Version: order.MessageVersion, MsgID: fmt.Sprint("msg-", n), ReservationID: fmt.Sprint("resv-", n),
		ActivityID: "42", UserID: user, Qty: 1, CreatedAt: time.Now()}
}

// A batch of messages becomes orders in one transaction; what does not fit
// is settled message by message. Redelivery is answered from the dedup rows.
func ExampleProcessor_Process() {
	ctx := context.Background()
	db, done := openExampleDB()
	defer done()

	ids, _ := orderid.New(1) // machine ID unique per instance
	p, _ := order.NewProcessor(db, ids)

	msgs := []order.Message{message(1, "7"), message(2, "4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95"), message(3, "ann@shop")}
	outs, err := p.Process(ctx, msgs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range outs {
		fmt.Println(o.Message.UserID, o.Status, o.Reason, "release:", o.Status == order.StatusFailed)
	}
	again, _ := p.Handle(ctx, msgs[0]) // Kafka delivered it twice
	fmt.Println("redelivered:", again.Status, again.Duplicate)
	// Output:
	// 7 SUCCESS  release: false
	// 4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95 SUCCESS  release: false
	// ann@shop FAILED sold_out release: true
	// redelivered: SUCCESS true
}

// Pay and the unpaid cancellation are compare-and-set updates: whichever
// comes first wins, the other gets a sentinel error.
func ExampleCanceller_Pay() {
	ctx := context.Background()
	db, done := openExampleDB()
	defer done()
	ids, _ := orderid.New(1)
	p, _ := order.NewProcessor(db, ids)
	a, _ := p.Handle(ctx, message(1, "7"))
	b, _ := p.Handle(ctx, message(2, "8"))

	released := order.ReleaserFunc(func(_ context.Context, activity string, resv string) error {
		fmt.Println("release", activity, resv)
		return nil
	})
	c, _ := status.NewCanceller(db, nil, released, status.WithOnPayCancelled(func(_ context.Context, o order.Order) {
		fmt.Println("refund", o.ReservationID)
	}))

	fmt.Println(c.Pay(ctx, a.OrderNo))
	fmt.Println(errors.Is(c.Pay(ctx, a.OrderNo), status.ErrAlreadyPaid))
	fmt.Println(c.Cancel(ctx, b.OrderNo))
	fmt.Println(errors.Is(c.Pay(ctx, b.OrderNo), status.ErrOrderCancelled))
	// Output:
	// <nil>
	// true
	// release 42 resv-2
	// <nil>
	// refund resv-2
	// true
}

// Submit publishes; when Kafka fails the message goes to the fallback store
// (an outbox row); when both fail the reservation is released and the
// caller is told to retry.
func ExampleSubmitter_Submit() {
	ctx := context.Background()
	kafkaDown := handoff.Publisher(func(context.Context, order.Message) error { return errors.New("kafka down") })
	outbox := handoff.Fallback(func(_ context.Context, m order.Message) error {
		fmt.Println("outbox row for", m.ReservationID)
		return nil
	})
	release := order.ReleaserFunc(func(_ context.Context, _ string, resv string) error {
		fmt.Println("released", resv)
		return nil
	})
	s, _ := handoff.NewSubmitter(kafkaDown, outbox, release)
	route, err := s.Submit(ctx, order.Message{ReservationID: "resv-1", ActivityID: "42", UserID: "0b8e4c52-77a1-4f1e-b7d2-9c3a5e6f1d20", Qty: 1})
	fmt.Println(route, err)

	dbDown := handoff.Fallback(func(context.Context, order.Message) error { return errors.New("db down") })
	s, _ = handoff.NewSubmitter(kafkaDown, dbDown, release)
	_, err = s.Submit(ctx, order.Message{ReservationID: "resv-2", ActivityID: "42", UserID: "8", Qty: 1})
	fmt.Println(errors.Is(err, handoff.ErrRetry))
	// Output:
	// outbox row for resv-1
	// fallback <nil>
	// released resv-2
	// true
}

// The shop's own rows are written by a TxHook in the transaction of the
// orders, here under table names of the shop's choosing; the message's
// extension payload and the product snapshot land on the order row.
func ExampleWithTxHook() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "order-example")
	defer os.RemoveAll(dir)
	db, _ := testenv.OpenSQLite(filepath.Join(dir, "shop.db"))
	defer func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}()
	tabs := order.WithTables(order.Tables{Activity: "shop_activity", Order: "shop_order", Dedup: "shop_order_dedup"})
	_ = order.AutoMigrate(ctx, db, tabs)
	type ShopItem struct {
		OrderNo string `gorm:"primaryKey"`
		Product string
		Ext     string
	}
	_ = db.AutoMigrate(&ShopItem{})
	start := time.Now()
	db.Table("shop_activity").Create(&order.Activity{ID: "42", ProductID: 7001, ProductName: "phone", ActivityPrice: 99900,
		Stock: 5, Remaining: 5, PerUserLimit: 1, Start: start, End: start.Add(time.Hour)})

	ids, _ := orderid.New(1)
	p, _ := order.NewProcessor(db, ids, tabs, order.WithTxHook(func(ctx context.Context, tx *gorm.DB, orders []order.Order) error {
		for _, o := range orders {
			if err := tx.Create(&ShopItem{OrderNo: o.OrderNo, Product: o.ProductName, Ext: string(o.Ext)}).Error; err != nil {
				return err
			}
		}
		return nil
	}))
	m := message(1, "4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95")
	m.Ext = []byte(`{"coupon":"SPRING"}`)
	outs, _ := p.Process(ctx, []order.Message{m, message(2, "8")})
	_, _ = p.Process(ctx, []order.Message{m}) // redelivered: no second shop row

	var items []ShopItem
	db.Order("ext").Find(&items)
	for _, it := range items {
		fmt.Printf("%v %s %q\n", it.OrderNo == outs[0].OrderNo || it.OrderNo == outs[1].OrderNo, it.Product, it.Ext)
	}
	var o order.Order
	db.Table("shop_order").Where("order_no = ?", outs[0].OrderNo).First(&o)
	fmt.Println(o.ProductID, o.ProductName, o.Price, string(o.Ext))
	// Output:
	// true phone ""
	// true phone "{\"coupon\":\"SPRING\"}"
	// 7001 phone 999.00 {"coupon":"SPRING"}
}
