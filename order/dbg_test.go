package order

import (
	"context"
	"testing"
	"time"
)

func TestDbgParts(t *testing.T) {
	db := newDB(t)
	addActivity(t, db, 1, 1000000, 1)
	p := newProc(t, db)
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		var msgs []Message
		for i := 0; i < 500; i++ {
			msgs = append(msgs, msg(round*1000+i, 1, int64(round*1000+i+1)))
		}
		now := time.Now()
		var orders []Order
		var dedups []Dedup
		for i, m := range msgs {
			id, _ := p.ids.NextID()
			o := p.newOrder(m, activityInfo{ID: 1, UserLimit: 1}, id, now)
			orders = append(orders, o)
			dedups = append(dedups, dedupOf(msgs[i], StatusSuccess, o.OrderNo, "", now))
		}
		ids := make([]string, len(msgs))
		for i := range msgs {
			ids[i] = msgs[i].MsgID
		}
		tx := db.WithContext(ctx).Begin()
		t0 := time.Now()
		var seen []Dedup
		tx.Where("msg_id IN ?", ids).Find(&seen)
		t1 := time.Now()
		loadActivities(tx, []int64{1})
		t2 := time.Now()
		tx.Exec(updateStockSQL, 500, 1, 500)
		t3 := time.Now()
		if err := insertDedups(ctx, tx, dedups); err != nil {
			t.Fatal(err)
		}
		t4 := time.Now()
		if err := insertOrders(ctx, tx, orders); err != nil {
			t.Fatal(err)
		}
		t5 := time.Now()
		tx.Commit()
		t6 := time.Now()
		t.Logf("select dedup %v, act %v, update %v, ins dedup %v, ins orders %v, commit %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5))
	}
}
