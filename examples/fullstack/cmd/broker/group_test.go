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
	defer c.Close() // (again below, before the members close: Close is idempotent)
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
	defer func() { c.Close(); _ = stay.Close() }() // the broker first: it ends every request still parked
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

// rawMember is a classic-group member driven request by request (sarama's
// Broker), so that a test can make it misbehave: keep heartbeating and
// never rejoin.
type rawMember struct {
	b     *sarama.Broker
	group string
	topic string
	id    string
	gen   int32
}

func newRawMember(t *testing.T, addr, name, group, topic string) *rawMember {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = name
	cfg.Net.ReadTimeout = 10 * time.Minute // a parked JoinGroup is answered by the broker, never by a client timeout
	b := sarama.NewBroker(addr)
	if err := b.Open(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &rawMember{b: b, group: group, topic: topic}
}

// joinAndSync sends a JoinGroup (v1: 60 s session, 10 s rebalance timeout) and
// waits for its answer, then a SyncGroup (with no assignment) for its own.
func (m *rawMember) joinAndSync() error {
	req := &sarama.JoinGroupRequest{Version: 1, GroupId: m.group, SessionTimeout: 60_000, RebalanceTimeout: 10_000, MemberId: m.id, ProtocolType: "consumer"}
	if err := req.AddGroupProtocolMetadata("range", &sarama.ConsumerGroupMemberMetadata{Topics: []string{m.topic}}); err != nil {
		return err
	}
	jr, err := m.b.JoinGroup(req)
	if err != nil {
		return err
	}
	if !errors.Is(jr.Err, sarama.ErrNoError) {
		return fmt.Errorf("join: %w", jr.Err)
	}
	m.id, m.gen = jr.MemberId, jr.GenerationId
	sr, err := m.b.SyncGroup(&sarama.SyncGroupRequest{GroupId: m.group, GenerationId: m.gen, MemberId: m.id})
	if err != nil {
		return err
	}
	if !errors.Is(sr.Err, sarama.ErrNoError) {
		return fmt.Errorf("sync: %w", sr.Err)
	}
	return nil
}

// heartbeat sends one heartbeat for the generation it joined; it answers
// REBALANCE_IN_PROGRESS during a rebalance, which this member ignores.
func (m *rawMember) heartbeat() {
	_, _ = m.b.Heartbeat(&sarama.HeartbeatRequest{GroupId: m.group, GenerationId: m.gen, MemberId: m.id})
}

// TestGroupAnswersAMemberParkedInJoin: a member that rejoined for a
// rebalance sends no heartbeats while its JoinGroup waits in the barrier;
// a slow member that keeps heartbeating but does not rejoin holds the
// barrier open until the rebalance timeout, longer than the waiting
// member's session timeout. The waiting member must be answered at the
// barrier's end and stay in the group as the member it was: the broker
// expired it at its session timeout and dropped its JoinGroup unanswered,
// so the client waited out its read timeout (sarama's default: 30 s;
// 10 min here) and the group went on without it (or, when the expiry came
// before the rejoin, took it back as a new member).
func TestGroupAnswersAMemberParkedInJoin(t *testing.T) {
	const (
		topic = "parked"
		group = "parked-group"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // (again below, before the members close: Close is idempotent)
	addr := c.ListenAddrs()[0]

	sc := orderkafka.SaramaConfig()
	sc.ClientID = "stay"
	sc.Consumer.Group.Session.Timeout = 3 * time.Second // shorter than the barrier (10 s), longer than a rejoin
	sc.Consumer.Group.Heartbeat.Interval = 250 * time.Millisecond
	sc.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	sc.Net.ReadTimeout = 10 * time.Minute
	stay, err := sarama.NewConsumerGroup([]string{addr}, group, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(); _ = stay.Close() }() // the broker first: it ends every request still parked
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := stay.Consume(ctx, []string{topic}, &countingHandler{seen: map[string]bool{}, all: make(chan struct{}), want: -1}); errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
		}
	}()
	if _, err := c.WaitGroupStable(ctx, group, 1); err != nil {
		t.Fatalf("the first member never settled: %v", err)
	}

	// The slow member joins properly once, then only heartbeats.
	slow := newRawMember(t, addr, "slow", group, topic)
	if err := slow.joinAndSync(); err != nil {
		t.Fatalf("slow member: %v", err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(250 * time.Millisecond) // its heartbeat interval
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				slow.heartbeat()
			}
		}
	}()
	before, err := c.WaitGroupStable(ctx, group, 2)
	if err != nil {
		t.Fatalf("stay and slow never settled: %v", err)
	}

	// A newcomer starts a rebalance: stay rejoins and waits; slow does not.
	newcomer := newRawMember(t, addr, "newcomer", group, topic)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := newcomer.joinAndSync(); err != nil && ctx.Err() == nil {
			t.Errorf("newcomer: %v", err)
		}
	}()
	var stayID string
	for _, m := range before.Members {
		if m.ClientID == "stay" {
			stayID = m.MemberID
		}
	}
	// stay must come out of the barrier as the member it was (its parked
	// JoinGroup answered), beside the newcomer.
	after, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
		if gi.State != "Stable" || gi.Epoch <= before.Epoch || len(gi.Members) != 2 {
			return false
		}
		var stayed, came bool
		for _, m := range gi.Members {
			stayed = stayed || m.MemberID == stayID
			came = came || m.ClientID == "newcomer"
		}
		return stayed && came
	})
	if err != nil {
		gi := c.GroupInfo(group)
		t.Fatalf("after the rebalance the group is not stay (member %s, parked in JoinGroup) and the newcomer: %v; it is %s at generation %d with %d members (%s)",
			stayID, err, gi.State, gi.Epoch, len(gi.Members), memberList(gi))
	}
	t.Logf("generation %d: %s (slow, which never rejoined, removed at the rebalance timeout)", after.Epoch, memberList(after))
}
