package testenv

import (
	"net"
	"testing"

	"github.com/IBM/sarama"
)

// TestFailProduceKeepsThePorts: a cluster taken down with FailProduce
// refuses every publish at once and keeps its ports, so no parallel test's
// new cluster can take them and receive a "down" producer's messages (as
// after Close, which two tests of order/orderkafka tripped over in CI).
func TestFailProduceKeepsThePorts(t *testing.T) {
	c, err := StartKafka(1, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 2
	p, err := sarama.NewSyncProducer(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder("up")}); err != nil {
		t.Fatalf("publish while up: %v", err)
	}
	FailProduce(c)
	for i := 0; i < 3; i++ {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder("down")}); err == nil {
			t.Fatalf("publish %d while down succeeded", i)
		}
	}
	for _, addr := range c.ListenAddrs() {
		if ln, err := net.Listen("tcp", addr); err == nil {
			_ = ln.Close()
			t.Errorf("%s is free while the cluster is down: a parallel test's cluster could take it", addr)
		}
	}
}
