package order

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func TestDbgSpeed(t *testing.T) {
	db := newDB(t)
	addActivity(t, db, 1, 100000, 1)
	p := newProc(t, db)
	var msgs []Message
	for i := 0; i < 5000; i++ {
		msgs = append(msgs, msg(i, 1, int64(i+1)))
	}
	st := time.Now()
	for i := 0; i < 5000; i += 500 {
		if _, err := p.Process(context.Background(), msgs[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("process: %v", time.Since(st))
	var kms []*sarama.ConsumerMessage
	for i := 0; i < 5000; i++ {
		kms = append(kms, kmsg(t, int64(i), msg(i+10000, 1, int64(i+10001))))
	}
	c, _ := NewConsumer(p, newLedger(), WithLinger(time.Millisecond))
	st = time.Now()
	runClaim(t, c, &fakeSession{ctx: context.Background()}, kms)
	t.Logf("claim: %v", time.Since(st))
}
