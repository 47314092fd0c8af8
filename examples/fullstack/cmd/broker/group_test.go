package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/seckillkit/seckill/order/orderkafka"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// killableDialer is a member's network: kill closes every connection it
// opened and refuses new ones, which is what the broker sees of a kill -9
// (the member sends no LeaveGroup, its sockets just close).
type killableDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

func (d *killableDialer) Dial(network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.killed {
		return nil, errors.New("killed")
	}
	c, err := (&net.Dialer{Timeout: 3 * time.Second}).Dial(network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killed = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// countingHandler records every message the group delivers and marks it.
type countingHandler struct {
	mu   sync.Mutex
	seen map[string]bool
	all  chan struct{} // closed when want distinct messages were seen
	want int
}

func (h *countingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *countingHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.seen[string(m.Value)] = true
		if len(h.seen) == h.want {
			close(h.all)
		}
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// TestGroupResumesAfterMembersKilledInJoin is the rebalance storm of the
// chaos battery's F10 (and of the soak's worker kills), reduced to the
// broker and the app's consumer-group configuration: one member stays, a
// second member is killed (its sockets closed, no LeaveGroup) three times
// in a row, each time right after its JoinGroup reached the broker, so the
// join answer finds the connection dead. The group must then deliver every
// message produced after the storm, on every partition: a member killed
// while the broker answers it must expire after its session timeout like
// any dead member, not stay assigned forever (the wedge that kept F10's
// reservations unsettled).
func TestGroupResumesAfterMembersKilledInJoin(t *testing.T) {
	const (
		topic = "storm"
		group = "storm-group"
		parts = 3
		msgs  = 60
	)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()

	cfg := func(name string, d *killableDialer) *sarama.Config {
		sc := orderkafka.SaramaConfig()
		sc.ClientID = name
		sc.Consumer.Group.Session.Timeout = 2 * time.Second
		sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
		sc.Consumer.Group.Rebalance.Timeout = 60 * time.Second // sarama's default: the barrier's own deadline is not what ends the storm
		sc.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
		sc.Consumer.Group.Member.UserData = []byte(name)
		sc.Metadata.Retry.Backoff = 100 * time.Millisecond
		if d != nil {
			sc.Net.Proxy.Enable = true
			sc.Net.Proxy.Dialer = d
		}
		return sc
	}
	consume := func(ctx context.Context, g sarama.ConsumerGroup, h sarama.ConsumerGroupHandler) {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, h); errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// The member that stays.
	h := &countingHandler{seen: map[string]bool{}, all: make(chan struct{}), want: msgs}
	stay, err := sarama.NewConsumerGroup(addrs, group, cfg("stay", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer stay.Close()
	wg.Add(1)
	go func() { defer wg.Done(); consume(ctx, stay, h) }()
	before, err := c.WaitGroupStable(ctx, group, 1)
	if err != nil {
		t.Fatalf("the first member never settled: %v", err)
	}

	// The storm: each victim is killed as its JoinGroup arrives (on the
	// broker's loop, before the join is parked in the barrier).
	var (
		mu      sync.Mutex
		victims = map[string]*killableDialer{}
		joined  = make(chan string, 16)
	)
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, p := range req.(*kmsg.JoinGroupRequest).Protocols {
			var md kmsg.ConsumerMemberMetadata
			if md.ReadFrom(p.Metadata) != nil {
				continue
			}
			mu.Lock()
			d := victims[string(md.UserData)]
			delete(victims, string(md.UserData))
			mu.Unlock()
			if d != nil {
				d.kill()
				joined <- string(md.UserData)
			}
			break
		}
		return nil, nil, false
	})
	var dead []sarama.ConsumerGroup
	defer func() {
		for _, g := range dead {
			_ = g.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("victim-%d", i)
		d := &killableDialer{}
		mu.Lock()
		victims[name] = d
		mu.Unlock()
		g, err := sarama.NewConsumerGroup(addrs, group, cfg(name, d))
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			consume(ctx, g, &countingHandler{seen: map[string]bool{}, all: make(chan struct{}), want: -1})
		}()
		select {
		case <-joined:
		case <-ctx.Done():
			t.Fatalf("%s never joined", name)
		}
	}

	// The storm's members are dead: the group must settle on the member
	// that stayed, holding every partition, in a generation after the
	// storm (every generation after the first saw a victim join).
	settled, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
		return gi.State == "Stable" && gi.Epoch > before.Epoch && len(gi.Members) == 1 && gi.NumAssigned() == parts
	})
	if err != nil {
		gi := c.GroupInfo(group)
		t.Fatalf("the group never settled on the member that stayed after the storm: %v; it is %s at generation %d with %d members (%s)",
			err, gi.State, gi.Epoch, len(gi.Members), memberList(gi))
	}
	t.Logf("settled at generation %d (%d before the storm)", settled.Epoch, before.Epoch)

	// After the storm: every message, on every partition, reaches the
	// member that stayed.
	pc := orderkafka.SaramaConfig()
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(addrs, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < msgs; i++ {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: int32(i % parts), Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-h.all:
	case <-ctx.Done():
		gi := c.GroupInfo(group)
		t.Fatalf("the group delivered %d of %d messages after the storm; it is %s with %d members (%s)",
			h.count(), msgs, gi.State, len(gi.Members), memberList(gi))
	}
}

// memberList names each member by client ID with its partition count.
func memberList(gi *kfake.GroupInfo) string {
	var ms []string
	for _, m := range gi.Members {
		ms = append(ms, fmt.Sprintf("%s:%d", m.ClientID, m.NumAssigned()))
	}
	return strings.Join(ms, " ")
}
