package stock_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/stock"
)

func Example() {
	mr, _ := miniredis.Run() // any Redis: Client, ClusterClient, Ring, failover
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	d, err := stock.New(rdb)
	if err != nil {
		panic(err)
	}
	// IDs are strings: numbers, UUIDs, ULIDs, slugs (see stock.ValidID).
	_, _ = d.Load(ctx, stock.Activity{ID: "summer-sale", Stock: 1}) // set-if-absent

	user := "3f2b8c1e-9d4a-4b7e-a1c2-5e6f7a8b9c0d"
	res, _ := d.Reserve(ctx, stock.Request{Activity: "summer-sale", User: user, Qty: 1, ReservationID: "req-1"})
	fmt.Println(res.Status, res.Remaining)

	res, _ = d.Reserve(ctx, stock.Request{Activity: "summer-sale", User: user, Qty: 1, ReservationID: "req-1"}) // client retry
	fmt.Println(res.Status, res.Replayed)

	res, _ = d.Reserve(ctx, stock.Request{Activity: "summer-sale", User: "8a1d0c2e-1111-4c3b-9e0f-0123456789ab", Qty: 1, ReservationID: "req-2"})
	fmt.Println(res.Status)

	rel, _ := d.Release(ctx, "summer-sale", "req-1") // order cancelled
	fmt.Println(rel.Status, rel.Remaining)
	// Output:
	// reserved 0
	// reserved true
	// sold out
	// released 1
}

func ExampleDeductor_Reserve() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	d, _ := stock.New(rdb, stock.WithKeyPrefix("shop:"))
	_, _ = d.Load(ctx, stock.Activity{ID: "1", Stock: 5, PerUserLimit: 2})

	for _, req := range []stock.Request{
		{Activity: "1", User: "1", Qty: 2, ReservationID: "a"},
		{Activity: "1", User: "1", Qty: 1, ReservationID: "b"},
		{Activity: "1", User: "2", Qty: 3, ReservationID: "c"},
		{Activity: "9", User: "2", Qty: 1, ReservationID: "d"},
	} {
		res, err := d.Reserve(ctx, req)
		switch {
		case err != nil: // Redis down or bad input: answer "busy" or 400
			fmt.Println("error:", err)
		case res.Status == stock.Reserved:
			fmt.Printf("%s: reserved, %d left\n", req.ReservationID, res.Remaining)
		default: // a denial is a result, not an error
			fmt.Printf("%s: %v\n", req.ReservationID, res.Status)
		}
	}
	// Output:
	// a: reserved, 3 left
	// b: limit reached
	// error: stock: invalid argument: qty 3 exceeds the per-user limit 2 of activity 1
	// d: not loaded
}

func ExampleDeductor_Release() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	d, _ := stock.New(rdb)
	_, _ = d.Load(ctx, stock.Activity{ID: "1", Stock: 3})
	_, _ = d.Reserve(ctx, stock.Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})

	for _, id := range []string{"a", "a", "late"} {
		rel, _ := d.Release(ctx, "1", id)
		fmt.Println(id, rel.Status, rel.Remaining)
	}
	// The cancellation overtook the reserve: it deducts nothing.
	res, _ := d.Reserve(ctx, stock.Request{Activity: "1", User: "2", Qty: 1, ReservationID: "late"})
	fmt.Println("late", res.Status)
	// Output:
	// a released 3
	// a duplicate 3
	// late unknown request 3
	// late released
}

func ExampleDeductor_Rebuild() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	d, _ := stock.New(rdb, stock.WithOnLoss(func(_ context.Context, activity, reason string) {
		fmt.Println("redis lost activity", activity) // page someone
	}))
	a := stock.Activity{ID: "1", Stock: 10}
	_, _ = d.Load(ctx, a)
	_, _ = d.Reserve(ctx, stock.Request{Activity: "1", User: "7", Qty: 1, ReservationID: "order-1"})

	mr.FlushAll() // Redis restarted without persistence
	res, _ := d.Reserve(ctx, stock.Request{Activity: "1", User: "8", Qty: 1, ReservationID: "order-2"})
	fmt.Println(res.Status) // busy, retry later: not "sold out", not "not loaded"

	// The database says order-1 still holds its unit: rebuild from it.
	st, err := d.Rebuild(ctx, a, []stock.Reservation{{ID: "order-1", User: "7", Qty: 1}})
	fmt.Println(st.Remaining, st.LedgerEntries, err)
	res, _ = d.Reserve(ctx, stock.Request{Activity: "1", User: "8", Qty: 1, ReservationID: "order-2"})
	fmt.Println(res.Status, res.Remaining)
	// Output:
	// redis lost activity 1
	// frozen
	// 9 1 <nil>
	// reserved 8
}

// One hot sale over three Cluster slots: a buyer's shard is chosen by the
// user ID; a buyer whose shard is empty borrows a unit from another shard,
// and the sale is sold out only once every shard is empty. A shop with
// numeric IDs passes them in decimal.
func ExampleActivity_shards() {
	mr, _ := miniredis.Run() // on a Cluster the three shards live on three masters
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	d, _ := stock.New(rdb)
	_, _ = d.Load(ctx, stock.Activity{ID: "7", Stock: 3, Shards: 3}) // one unit per shard

	for user := int64(1); user <= 4; user++ {
		res, _ := d.Reserve(ctx, stock.Request{Activity: "7", User: strconv.FormatInt(user, 10), Qty: 1, ReservationID: fmt.Sprint("r", user)})
		fmt.Println(user, res.Status, res.Remaining)
	}
	st, _ := d.Stats(ctx, "7")
	fmt.Println(len(st.Shards), "shards:", st.Remaining, "left,", st.TransfersIn, "moved,", st.InTransfer, "in transfer")
	fmt.Println(d.SoldOut("7"))
	// Output:
	// 1 reserved 0
	// 2 reserved 0
	// 3 reserved 0
	// 4 sold out 0
	// 3 shards: 0 left, 1 moved, 0 in transfer
	// true
}

// ExampleDeductor_Pause: an operator pauses a live sale, tops it up and
// resumes it; buyers meanwhile get "paused", not "sold out".
func ExampleDeductor_Pause() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	d, _ := stock.New(rdb)
	_, _ = d.Load(ctx, stock.Activity{ID: "1", Stock: 1})
	_, _ = d.Reserve(ctx, stock.Request{Activity: "1", User: "1", Qty: 1, ReservationID: "a"})

	_ = d.Pause(ctx, "1")
	res, _ := d.Reserve(ctx, stock.Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
	fmt.Println(res.Status, res.Err())

	a, _ := d.Adjust(ctx, stock.AdjustParams{Activity: "1", ID: "topup-1", Delta: 10})
	fmt.Println(a.Before, a.After)
	a, _ = d.Adjust(ctx, stock.AdjustParams{Activity: "1", ID: "topup-1", Delta: 10}) // retry
	fmt.Println(a.Replayed, a.After)

	_ = d.Resume(ctx, "1")
	res, _ = d.Reserve(ctx, stock.Request{Activity: "1", User: "2", Qty: 1, ReservationID: "b"})
	fmt.Println(res.Status, res.Remaining)
	// Output:
	// paused stock: activity paused, retry later
	// {0 1} {10 11}
	// true {10 11}
	// reserved 9
}

// A sneaker in sizes, a cart of several lines all or nothing, and a limit
// group: at most 2 pairs of this model per buyer over all its sales.
func ExampleDeductor_ReserveLines() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	d, _ := stock.New(rdb)

	// Each size has its own counter; a buyer holds at most 2 units over all sizes.
	_, _ = d.Load(ctx, stock.Activity{ID: "drop-1", PerUserLimit: 2, Variants: []stock.Variant{
		{ID: "42", Stock: 1}, {ID: "43", Stock: 5}, {ID: "44", Stock: 5}}})
	_, _ = d.Load(ctx, stock.Activity{ID: "socks", Stock: 100, PerUserLimit: 5})

	// One size is one Reserve of stock.VariantOf(activity, size).
	res, _ := d.Reserve(ctx, stock.Request{Activity: stock.VariantOf("drop-1", "42"), User: "7", Qty: 1, ReservationID: "r-1"})
	fmt.Println(res.Status)

	// A cart: size 42 is gone, so nothing is held, not even the socks.
	cart := stock.Lines{User: "8", ReservationID: "cart-1", Lines: []stock.Line{
		{Activity: "socks", Qty: 2},
		{Activity: stock.VariantOf("drop-1", "43"), Qty: 1, Group: "model-x", GroupLimit: 2},
		{Activity: stock.VariantOf("drop-1", "42"), Qty: 1, Group: "model-x", GroupLimit: 2},
	}}
	lr, _ := d.ReserveLines(ctx, cart)
	fmt.Println(lr.Status, "on line", lr.Line)

	cart.ReservationID = "cart-2"
	cart.Lines = cart.Lines[:2]
	lr, _ = d.ReserveLines(ctx, cart)
	fmt.Println(lr.Status, lr.Line)

	vs, _ := d.Variants(ctx, "drop-1")
	for _, v := range vs {
		fmt.Println("size", v.ID, "left", v.Stock)
	}
	_, _ = d.ReleaseLines(ctx, cart) // the order was cancelled
	// Output:
	// reserved
	// sold out on line 2
	// reserved -1
	// size 42 left 0
	// size 43 left 4
	// size 44 left 5
}
