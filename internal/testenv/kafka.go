package testenv

import (
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
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
