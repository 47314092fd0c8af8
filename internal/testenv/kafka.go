package testenv

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka returns broker addresses for the test: the brokers named by
// SECKILL_KAFKA_BROKERS, or a fresh in-process kfake cluster of three brokers
// on loopback (a real Kafka wire-protocol server that sarama reaches over
// TCP), closed at cleanup. Topics are auto-created with the given number of
// partitions (default 3) on first use; seed them up front with topics.
func Kafka(t testing.TB, partitions int32, topics ...string) []string {
	t.Helper()
	if b := os.Getenv(EnvKafkaBrokers); b != "" {
		return strings.Split(b, ",")
	}
	c, err := StartKafka(partitions, topics...)
	if err != nil {
		t.Fatalf("testenv: start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// StartKafka starts a three-broker kfake cluster on loopback; the caller
// closes it. Embedded deployments (examples/fullstack) use it too.
func StartKafka(partitions int32, topics ...string) (*kfake.Cluster, error) {
	if partitions <= 0 {
		partitions = 3
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(3),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(partitions)),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	return kfake.NewCluster(opts...)
}

// FailProduce takes c "down" for producers and returns the switch (down
// at once; down(false) brings it back): while down, c answers every
// produce request with TOPIC_AUTHORIZATION_FAILED, which producers do not
// retry, so a publish fails at once. Use it instead of c.Close() in a test
// that runs beside others: a closed cluster gives its ports up, a parallel
// test's new cluster may take them, and a producer still pointed at c then
// publishes into that test's cluster (a test saw 3 of 5 "down" publishes
// succeed, and its neighbour 3 messages too many). Close c at cleanup.
func FailProduce(c *kfake.Cluster) (down func(bool)) {
	var isDown atomic.Bool
	isDown.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !isDown.Load() {
			return nil, nil, false // the cluster handles it
		}
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = topicAuthorizationFailed
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	return isDown.Store
}

// topicAuthorizationFailed is Kafka's error code TOPIC_AUTHORIZATION_FAILED.
const topicAuthorizationFailed = 29
