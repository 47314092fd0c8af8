package handoff_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
)

// Kafka is down and so is the outbox: the reservation goes back and the
// buyer is asked to retry.
func ExampleSubmitter() {
	ctx := context.Background()
	down := errors.New("down")
	kafka := handoff.Publisher(func(context.Context, order.Message) error { return down })
	outbox := handoff.Fallback(func(context.Context, order.Message) error { return down })
	released := 0
	stock := order.ReleaserFunc(func(context.Context, string, string) error { released++; return nil })

	sub, err := handoff.NewSubmitter(kafka, outbox, stock)
	if err != nil {
		fmt.Println(err)
		return
	}
	route, err := sub.Submit(ctx, order.Message{ReservationID: "r-1", ActivityID: "sale-42", UserID: "7", Qty: 1})
	fmt.Println(route, errors.Is(err, handoff.ErrRetry), released)

	// Kafka is back.
	kafka = func(context.Context, order.Message) error { return nil }
	sub, _ = handoff.NewSubmitter(kafka, outbox, stock)
	route, err = sub.Submit(ctx, order.Message{ReservationID: "r-2", ActivityID: "sale-42", UserID: "8", Qty: 1})
	fmt.Println(route, err)
	// Output:
	// none true 1
	// kafka <nil>
}
