package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/seckillkit/seckill/outbox"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// openDB opens an in-memory SQLite database with the outbox table.
func openDB(name string) *gorm.DB {
	db, err := gorm.Open(sqlite.Open("file:"+name+"?mode=memory&cache=shared"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(1)
	if err := outbox.AutoMigrate(context.Background(), db); err != nil {
		panic(err)
	}
	return db
}

type order struct {
	ID     int64 `gorm:"primaryKey"`
	UserID int64
}

// The outbox row commits with the business row, in the caller's
// transaction; a relay publishes it afterwards.
func ExampleWriter_Write() {
	ctx := context.Background()
	db := openDB("example_write")
	_ = db.AutoMigrate(&order{})
	w, _ := outbox.NewWriter()

	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&order{ID: 1, UserID: 42}).Error; err != nil {
			return err
		}
		return w.Write(ctx, tx, outbox.Message{
			MsgID: "order-1-created", Topic: "orders", Key: "42", Payload: []byte(`{"order":1}`),
		})
	})
	fmt.Println("committed:", err == nil)

	pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		fmt.Printf("publish %s key=%s %s (msg %s, attempt %d)\n", m.Topic, m.Key, m.Payload, m.MsgID, m.Attempts)
		return nil
	})
	relay, _ := outbox.NewRelay(db, pub)
	b, _ := relay.RunOnce(ctx)
	fmt.Printf("claimed %d, sent %d\n", b.Claimed, b.Sent)
	// Output:
	// committed: true
	// publish orders key=42 {"order":1} (msg order-1-created, attempt 1)
	// claimed 1, sent 1
}

// Send first; when the broker is down, store the message for the relay.
func ExampleWriter_SendOrStore() {
	ctx := context.Background()
	db := openDB("example_send")
	w, _ := outbox.NewWriter()
	kafkaDown := outbox.PublisherFunc(func(context.Context, outbox.Message) error {
		return errors.New("kafka: client has run out of available brokers")
	})

	res, err := w.SendOrStore(ctx, db, kafkaDown, outbox.Message{
		MsgID: "resv-7", Topic: "orders", Key: "42", ReservationID: "resv-7", Payload: []byte(`{"resv":"resv-7"}`),
	})
	if errors.Is(err, outbox.ErrUndelivered) {
		fmt.Println("release the reservation and ask the user to retry")
		return
	}
	fmt.Println(res.Delivery)
	pending, _ := outbox.HasPendingReservation(ctx, db, "resv-7")
	fmt.Println("pending for resv-7:", pending)
	// Output:
	// stored
	// pending for resv-7: true
}

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// A failing publish is retried with exponential backoff, and the row is
// FAILED (with an alert) once the attempt budget is spent.
func ExampleRelay_RunOnce() {
	ctx := context.Background()
	db := openDB("example_relay")
	// A fixed date is safe here: the writer and the relay both read only this fake clock.
	clock := &fixedClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	w, _ := outbox.NewWriter(outbox.WithClock(clock))
	_ = w.Write(ctx, db, outbox.Message{MsgID: "m1", Topic: "orders"})

	broken := outbox.PublisherFunc(func(context.Context, outbox.Message) error { return errors.New("timeout") })
	relay, _ := outbox.NewRelay(db, broken,
		outbox.WithClock(clock), outbox.WithMaxAttempts(3),
		outbox.WithBackoff(time.Second, time.Minute), outbox.WithJitter(0),
		outbox.WithOnRetry(func(_ context.Context, m outbox.Message, err error, next time.Time) {
			fmt.Printf("attempt %d failed (%v), retry in %v\n", m.Attempts, err, next.Sub(clock.t))
		}),
		outbox.WithOnFailed(func(_ context.Context, m outbox.Message, err error) {
			fmt.Printf("ALERT: %s failed after %d attempts\n", m.MsgID, m.Attempts)
		}))
	for range 3 {
		_, _ = relay.RunOnce(ctx)
		clock.t = clock.t.Add(time.Hour)
	}
	bl, _ := outbox.Stats(ctx, db)
	fmt.Printf("pending %d, failed %d\n", bl.Pending, bl.Failed)
	// Output:
	// attempt 1 failed (timeout), retry in 1s
	// attempt 2 failed (timeout), retry in 2s
	// ALERT: m1 failed after 3 attempts
	// pending 0, failed 1
}

// Run the relay in the background; Close stops it.
func ExampleRelay_Run() {
	db := openDB("example_run")
	w, _ := outbox.NewWriter()
	_ = w.Write(context.Background(), db, outbox.Message{Topic: "orders", Payload: []byte("hello")})

	delivered := make(chan string, 1)
	relay, _ := outbox.NewRelay(db, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		delivered <- string(m.Payload)
		return nil
	}))
	done := make(chan error, 1)
	go func() { done <- relay.Run(context.Background()) }()

	fmt.Println(<-delivered)
	_ = relay.Close()
	fmt.Println("run returned:", <-done)
	// Output:
	// hello
	// run returned: <nil>
}
