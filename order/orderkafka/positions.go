package orderkafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/order"
)

// PositionsConfig names what [NewPositions] watches.
type PositionsConfig struct {
	Group string // the consumer group that turns the messages into orders; required
	Topic string // the order topic; required
	// KeyPrefix prefixes the Redis keys; default "seckill:" (the prefix of
	// the stock and the results, so an activity's keys share a Cluster node).
	KeyPrefix string
	// OnError, when set, hears of a batch of positions Redis did not take
	// ([Positions.Record] writes in the background); those positions stay
	// unknown, and the reconciler's grace alone decides their reservations.
	OnError func(ctx context.Context, err error)
}

// Positions remembers where the broker wrote each order message
// (partition, offset: [Positions.Record], given the acknowledgement by
// [WithOnAck]) and tells the reconciler which reservations still have a
// message the consumer group will deliver ([Positions.Pending]): a
// message at or after the group's committed offset on its partition, and
// not yet trimmed by retention, becomes an order or a FAILED outcome
// however long the consumer lags, so its reservation must not be released.
//
// The positions of an activity live in one Redis hash,
// <prefix>{a:<activity>}:kafka_pos, field = reservation ID, value =
// "<partition>:<offset>"; [Positions.Pending] deletes the fields of
// messages the group has passed, so the hash holds about the messages
// still in flight. Safe for concurrent use.
//
// Record never waits for Redis: the positions recorded while one batch is
// being written gather and leave together as the next batch (one pipelined
// HSET per activity), so the hand-off adds no round trip to a buy and the
// batches grow with the load. [Positions.Pending] first writes what was
// recorded before it in this process.
type Positions struct {
	rdb    redis.UniversalClient
	admin  sarama.ClusterAdmin
	client sarama.Client
	cfg    PositionsConfig

	wmu      sync.Mutex                // held while a batch is written
	mu       sync.Mutex                // guards queue and flushing
	queue    map[string]map[string]any // Redis key → reservation ID → "<partition>:<offset>"
	flushing bool                      // a background writer runs
}

// NewPositions returns positions stored in rdb, checked against the
// committed offsets of cfg.Group (read with admin) and the log start
// offsets of cfg.Topic (asked of the partitions' leaders through client).
// A nil collaborator or an empty group or topic fails with
// [ErrInvalidConfig].
func NewPositions(rdb redis.UniversalClient, admin sarama.ClusterAdmin, client sarama.Client, cfg PositionsConfig) (*Positions, error) {
	if rdb == nil || admin == nil || client == nil || cfg.Group == "" || cfg.Topic == "" {
		return nil, fmt.Errorf("%w: NewPositions needs a Redis client, an admin, a client, a group and a topic", ErrInvalidConfig)
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "seckill:"
	}
	return &Positions{rdb: rdb, admin: admin, client: client, cfg: cfg}, nil
}

// positionsKey: hash reservation ID → "<partition>:<offset>" per activity
// (an [order.ValidID]: no brace can move the hash tag).
func positionsKey(prefix, activity string) string {
	return prefix + "{a:" + activity + "}:kafka_pos"
}

// Record stores where the broker wrote m (its acknowledgement's partition
// and offset), under m's activity and reservation, in the background (see
// [Positions]). Call it from [WithOnAck]; a write that fails
// ([PositionsConfig.OnError]) or never happens (the process ends first)
// leaves the position unknown, and the reconciler then applies its grace
// alone, as without Positions. An activity that is
// not order.ValidID wraps order.ErrInvalidID; no reservation ID, a
// negative partition or offset, wraps order.ErrInvalidMessage.
func (p *Positions) Record(ctx context.Context, m order.Message, partition int32, offset int64) error {
	if !order.ValidID(m.ActivityID) {
		return fmt.Errorf("%w: position of activity %.64q", order.ErrInvalidID, m.ActivityID)
	}
	if m.ReservationID == "" || partition < 0 || offset < 0 {
		return fmt.Errorf("%w: position of reservation %.64q at %d:%d", order.ErrInvalidMessage, m.ReservationID, partition, offset)
	}
	v := strconv.FormatInt(int64(partition), 10) + ":" + strconv.FormatInt(offset, 10)
	key := positionsKey(p.cfg.KeyPrefix, m.ActivityID)
	p.mu.Lock()
	if p.queue == nil {
		p.queue = map[string]map[string]any{}
	}
	if p.queue[key] == nil {
		p.queue[key] = map[string]any{}
	}
	p.queue[key][m.ReservationID] = v
	start := !p.flushing
	p.flushing = true
	p.mu.Unlock()
	if start {
		go p.writeBehind(context.WithoutCancel(ctx))
	}
	return nil
}

// writeBehind writes the queued positions, a batch at a time, until none
// is left.
func (p *Positions) writeBehind(ctx context.Context) {
	for {
		p.wmu.Lock()
		p.mu.Lock()
		q := p.queue
		p.queue = nil
		if len(q) == 0 {
			p.flushing = false
			p.mu.Unlock()
			p.wmu.Unlock()
			return
		}
		p.mu.Unlock()
		err := p.write(ctx, q)
		p.wmu.Unlock()
		if err != nil && p.cfg.OnError != nil {
			p.cfg.OnError(ctx, err)
		}
	}
}

// flush writes what was recorded before the call: the batch being written
// (it waits for it) and the queue.
func (p *Positions) flush(ctx context.Context) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	q := p.queue
	p.queue = nil
	p.mu.Unlock()
	if len(q) == 0 {
		return nil
	}
	return p.write(ctx, q)
}

// write stores a batch: one HSET per activity, pipelined.
func (p *Positions) write(ctx context.Context, q map[string]map[string]any) error {
	pipe := p.rdb.Pipeline()
	n := 0
	for key, fields := range q {
		pipe.HSet(ctx, key, fields)
		n += len(fields)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("orderkafka: record %d positions: %w", n, err)
	}
	return nil
}

// position is where a message was written.
type position struct {
	partition int32
	offset    int64
}

// positionsPage is how many fields one HSCAN asks for.
const positionsPage = 1000

// Pending reads, once, what one reconcile pass of activity needs — the
// recorded positions (HSCAN), the group's committed offsets (one
// OffsetFetch) and the log start and end offsets (a ListOffsets of each
// per partition leader), only for the partitions that hold a recorded
// message — and returns the answer per reservation (a reconcile.Pending):
// true while its message is deliverable, that is at or after the
// committed offset of its partition (every retained message when the
// group has committed none), at or after the partition's log start offset
// and before its end. False when the message was passed (the consumer
// committed beyond it: it became an order, a FAILED outcome or a dead
// letter), trimmed by retention, or is past the log's end (the log was
// lost: a broker without persistence restarted; with acks=all an
// acknowledged offset is below the high-water mark), and when no position
// was recorded (published before Positions, or the Record failed): the
// reconciler's grace decides those alone.
//
// The fields of messages no longer deliverable are deleted. Any read that
// fails makes Pending fail (the reconciler then releases nothing that
// needs the answer); an activity that is not order.ValidID wraps
// order.ErrInvalidID.
func (p *Positions) Pending(ctx context.Context, activity string) (func(ctx context.Context, reservationID string) (bool, error), error) {
	if !order.ValidID(activity) {
		return nil, fmt.Errorf("%w: activity %.64q", order.ErrInvalidID, activity)
	}
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	key := positionsKey(p.cfg.KeyPrefix, activity)
	at, err := p.read(ctx, key)
	if err != nil {
		return nil, err
	}
	parts := map[int32]bool{}
	for _, x := range at {
		parts[x.partition] = true
	}
	var span map[int32]deliverable
	if len(parts) > 0 {
		if span, err = p.deliverable(ctx, parts); err != nil {
			return nil, err
		}
	}
	live := make(map[string]bool, len(at))
	var gone []string
	for id, x := range at {
		d, ok := span[x.partition]
		if ok && x.offset >= d.from && x.offset < d.end {
			live[id] = true
		} else {
			gone = append(gone, id)
		}
	}
	for len(gone) > 0 {
		n := min(len(gone), positionsPage)
		if err := p.rdb.HDel(ctx, key, gone[:n]...).Err(); err != nil {
			return nil, fmt.Errorf("orderkafka: positions of %s: prune: %w", activity, err)
		}
		gone = gone[n:]
	}
	return func(_ context.Context, id string) (bool, error) { return live[id], nil }, nil
}

// read returns every position recorded in key; a value of another shape
// counts as unknown (and is left alone).
func (p *Positions) read(ctx context.Context, key string) (map[string]position, error) {
	at := map[string]position{}
	var cursor uint64
	for {
		kv, next, err := p.rdb.HScan(ctx, key, cursor, "*", positionsPage).Result()
		if err != nil {
			return nil, fmt.Errorf("orderkafka: positions: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if x, ok := parsePosition(kv[i+1]); ok {
				at[kv[i]] = x
			}
		}
		if next == 0 {
			return at, nil
		}
		cursor = next
	}
}

func parsePosition(v string) (position, bool) {
	ps, offs, ok := strings.Cut(v, ":")
	if !ok {
		return position{}, false
	}
	part, err1 := strconv.ParseInt(ps, 10, 32)
	off, err2 := strconv.ParseInt(offs, 10, 64)
	if err1 != nil || err2 != nil || part < 0 || off < 0 {
		return position{}, false
	}
	return position{partition: int32(part), offset: off}, true
}

// deliverable is the span of a partition's offsets the group will still
// deliver: [from, end).
type deliverable struct {
	from int64 // max(committed, log start); the log start where the group committed nothing
	end  int64 // the log end offset (high-water mark): an offset at or after it is not in the log (lost with it)
}

// deliverable returns the deliverable span of each partition of parts.
func (p *Positions) deliverable(ctx context.Context, parts map[int32]bool) (map[int32]deliverable, error) {
	list := make([]int32, 0, len(parts))
	for part := range parts {
		list = append(list, part)
	}
	resp, err := p.admin.ListConsumerGroupOffsets(p.cfg.Group, map[string][]int32{p.cfg.Topic: list})
	switch {
	case errors.Is(err, sarama.ErrGroupIDNotFound):
		resp = nil // a group that never committed reads from the oldest retained offset
	case err != nil:
		return nil, fmt.Errorf("orderkafka: positions: offsets of group %s: %w", p.cfg.Group, err)
	case resp.Err == sarama.ErrGroupIDNotFound:
		resp = nil
	case resp.Err != sarama.ErrNoError:
		return nil, fmt.Errorf("orderkafka: positions: offsets of group %s: %w", p.cfg.Group, resp.Err)
	}
	start, err := p.logOffsets(ctx, list, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	end, err := p.logOffsets(ctx, list, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	span := make(map[int32]deliverable, len(list))
	for _, part := range list {
		from := start[part]
		if resp != nil {
			if b := resp.GetBlock(p.cfg.Topic, part); b != nil && b.Err != sarama.ErrGroupIDNotFound {
				if b.Err != sarama.ErrNoError {
					return nil, fmt.Errorf("orderkafka: positions: offset of %s/%d: %w", p.cfg.Topic, part, b.Err)
				}
				from = max(from, b.Offset) // -1: none committed
			}
		}
		span[part] = deliverable{from: from, end: end[part]}
	}
	return span, nil
}

// logOffsets asks each leader, in one ListOffsets request, for the log
// start (sarama.OffsetOldest) or end (sarama.OffsetNewest) offset of its
// partitions among list.
func (p *Positions) logOffsets(ctx context.Context, list []int32, which int64) (map[int32]int64, error) {
	byLeader := map[*sarama.Broker][]int32{}
	for _, part := range list {
		b, err := p.client.Leader(p.cfg.Topic, part)
		if err != nil {
			return nil, fmt.Errorf("orderkafka: positions: leader of %s/%d: %w", p.cfg.Topic, part, err)
		}
		byLeader[b] = append(byLeader[b], part)
	}
	start := make(map[int32]int64, len(list))
	for b, parts := range byLeader {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		req := sarama.NewOffsetRequest(p.client.Config().Version)
		for _, part := range parts {
			req.AddBlock(p.cfg.Topic, part, which, 1)
		}
		resp, err := b.GetAvailableOffsets(req)
		if err != nil {
			return nil, fmt.Errorf("orderkafka: positions: log offsets from broker %d: %w", b.ID(), err)
		}
		for _, part := range parts {
			blk := resp.GetBlock(p.cfg.Topic, part)
			switch {
			case blk == nil || len(blk.Offsets) != 1:
				return nil, fmt.Errorf("orderkafka: positions: log offset of %s/%d: %w", p.cfg.Topic, part, sarama.ErrIncompleteResponse)
			case blk.Err != sarama.ErrNoError:
				return nil, fmt.Errorf("orderkafka: positions: log offset of %s/%d: %w", p.cfg.Topic, part, blk.Err)
			}
			start[part] = blk.Offsets[0]
		}
	}
	return start, nil
}
