// Command broker runs a Kafka-compatible broker (github.com/twmb/franz-go's
// kfake, a real wire-protocol implementation) as its own process, so that
// several fullstack processes (-role api / worker) share one broker the way
// they share a real cluster. It is for local deployments, the fault tests
// and CI; it is not a production Kafka.
//
//	go run ./examples/fullstack/cmd/broker -ports 19092,19093,19094 -data /tmp/seckill-kafka
//
// With -data the log and the consumer-group offsets are kept on disk and,
// with -sync (the default), fsynced on every produce: a kill -9 of the broker
// loses no acknowledged message. Without -data everything is in memory and
// dies with the process. It listens on loopback only and stops on SIGINT or
// SIGTERM, persisting its state.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	ports := fs.String("ports", "19092,19093,19094", "comma-separated loopback ports, one broker each")
	data := fs.String("data", "", "directory for the log and group offsets (empty: in memory)")
	sync := fs.Bool("sync", true, "fsync every produce (with -data)")
	topics := fs.String("topics", "seckill.orders,seckill.orders.dlq", "topics created at start")
	partitions := fs.Int("partitions", 3, "partitions of each topic")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ps, err := parsePorts(*ports)
	if err != nil {
		return err
	}
	if *partitions < 1 {
		return errors.New("-partitions must be >= 1")
	}
	opts := []kfake.Opt{
		kfake.Ports(ps...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
	}
	if ts := splitList(*topics); len(ts) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), ts...))
	}
	if *data != "" {
		opts = append(opts, kfake.DataDir(*data))
		if *sync {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	mode := "in memory"
	if *data != "" {
		mode = "log in " + *data
	}
	fmt.Printf("broker listening on %s (%s)\n", strings.Join(c.ListenAddrs(), ","), mode)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
	return nil
}

func parsePorts(s string) ([]int, error) {
	var ps []int
	for _, f := range splitList(s) {
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("bad port %q in -ports", f)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, errors.New("-ports names no port")
	}
	return ps, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
