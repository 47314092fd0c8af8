package orderid_test

import (
	"fmt"
	"time"

	"github.com/seckillkit/seckill/order/orderid"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// A generator for machine 7 on a fixed clock: three IDs in one
// millisecond, decomposed into their fields.
func ExampleNew() {
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := epoch.Add(1500 * time.Millisecond)
	g, err := orderid.New(7, orderid.WithEpoch(epoch), orderid.WithClock(fixedClock{at}))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		id, _ := g.NextID()
		t, machine, seq := orderid.Decompose(id, epoch)
		fmt.Println(id, t.Sub(epoch), machine, seq)
	}
	// Output:
	// 6291484672 1.5s 7 0
	// 6291484673 1.5s 7 1
	// 6291484674 1.5s 7 2
}
