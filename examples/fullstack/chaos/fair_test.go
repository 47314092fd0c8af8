package chaos

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
	"github.com/seckillkit/seckill/order"
)

// The queue sale mode's scenarios (#26): every api and the worker run
// -sale-mode queue (a waiting room admits at -queue-rate, shared in Redis;
// the access token needs the admission pass), and the crowd joins the
// room, polls until admitted and sends its pass (crash.Crowd.Queue). The
// stock's invariants are the battery's own; the queue's (checkQueueRun):
//
//   - nobody admitted twice by one room: per user, the distinct
//     admissions (each named by its admission deadline; the crowds on both
//     apis together) seen before the room was lost, and those seen after
//     (FQ4: a user admitted by the lost room is admitted again by the
//     rebuilt one once it rejoins — the old admission is gone with the
//     data, its pass no longer verifies), are at most one each — counted
//     from the buyers' answers; and the room's admission log (the rebuilt
//     one's in FQ4) holds no user twice (from Redis);
//   - no place lost silently: every buyer that joined was admitted (or
//     told, and joined again, and then admitted);
//   - every buyer with a live order was admitted before it bought.
//
// FQ4's answer to the loss of the room (Redis back EMPTY): the room is
// rebuilt by the admitter (the same commitment, the app's own seed); every
// user is told at its next poll and joins again, first in, first out.
// roomLost holds, by run, when FQ4's Redis came back empty.
var roomLost sync.Map

func queueScenarios() []scenario {
	queue := func(sc *sysConfig) { sc.extra = append(sc.extra, "-sale-mode", "queue", "-queue-rate", "150") }
	crowdQueue := func(r *run) error {
		r.start = time.Now()
		for _, c := range r.crowds {
			c.Queue = true
		}
		r.note("queue mode: -queue-rate 150 (all instances); the crowd joins, polls and buys with its pass")
		return nil
	}
	return []scenario{
		{id: "FQ1", what: "queue mode: kill -9 of one api while the room admits, restarted", fault: fault{
			sys: queue, before: crowdQueue, check: checkQueueRun,
			strike: killAPI(0), window: seededWindow(300*time.Millisecond, 2*time.Second), heal: restartAPI(0)}},
		{id: "FQ4", what: "queue mode: kill -9 of redis-server mid-queue, restarted EMPTY (the room, its entries and passes lost)", fault: fault{
			sys: queue, before: crowdQueue, check: checkQueueRun,
			strike: func(r *run) error {
				r.note("kill -9 redis-server (pid %d)", r.sys.redis.PID())
				return r.sys.redis.Kill()
			},
			window: seededWindow(500*time.Millisecond, 2*time.Second),
			heal: func(r *run) error {
				r.sys.redis.Restart(false)
				roomLost.Store(r, time.Now()) // admissions seen after it are the rebuilt room's
				r.note("redis-server restarted EMPTY")
				return nil
			}}},
	}
}

// checkQueueRun counts the queue's invariants (see queueScenarios).
func checkQueueRun(r *run, st crash.State) {
	type tally struct {
		joins, admitted, told int
		admissions            map[string]bool // by admission deadline: one admission, however many buyers' views
		perRoom               [2]int          // admissions of the first room, of the rebuilt one (FQ4)
	}
	var lost time.Time
	if v, ok := roomLost.Load(r); ok {
		lost = v.(time.Time)
	}
	users := map[int64]*tally{}
	for _, c := range r.crowds {
		for _, b := range c.Buyers {
			t := users[b.User]
			if t == nil {
				t = &tally{admissions: map[string]bool{}}
				users[b.User] = t
			}
			t.joins += b.Joins
			t.told += b.Told
			for i, e := range b.Admissions {
				if t.admissions[e] {
					continue
				}
				t.admissions[e] = true
				if !lost.IsZero() && !b.AdmittedAt[i].Before(lost) {
					t.perRoom[1]++
				} else {
					t.perRoom[0]++
				}
			}
		}
	}
	for _, t := range users {
		t.admitted = len(t.admissions)
	}
	var joined, admitted, told, twice, readmitted int
	for u, t := range users {
		if t.joins == 0 {
			continue
		}
		joined++
		admitted += t.admitted
		told += t.told
		if t.admitted > 1 {
			twice++
		}
		if t.perRoom[0] > 1 || t.perRoom[1] > 1 {
			r.violation("queue: user %d admitted twice by one room (%d by the first, %d by the rebuilt one)", u, t.perRoom[0], t.perRoom[1])
		}
		if t.perRoom[1] > 0 && t.perRoom[0] > 0 {
			readmitted++
		}
		if t.admitted == 0 {
			r.violation("queue: user %d joined %d times and was never admitted: a place lost silently (told %d times)", u, t.joins, t.told)
		}
	}
	for _, o := range st.Orders {
		if o.Status != order.OrderCreated && o.Status != order.OrderPaid {
			continue
		}
		u, _ := strconv.ParseInt(o.UserID, 10, 64)
		if t := users[u]; t == nil || t.admitted == 0 {
			r.violation("queue: user %s holds order %s without having been admitted", o.UserID, o.OrderNo)
		}
	}
	logs, err := r.sys.store.Redis.LRange(r.ctx, prefix+"{wr:1}:alog", 0, -1).Result()
	if err != nil {
		r.violation("queue: read the admission log: %v", err)
		return
	}
	seen := map[string]bool{}
	for _, l := range logs {
		for _, u := range strings.Split(l, ",") {
			if seen[u] {
				r.violation("queue: user %s twice in the room's admission log", u)
			}
			seen[u] = true
		}
	}
	r.count("queue joined", joined)
	r.count("queue admissions", admitted)
	r.count("queue told", told)
	r.count("queue admitted more than once", twice)
	r.count("queue admitted by both rooms", readmitted)
	r.count("queue log", len(seen))
	r.note("queue: %d buyers joined, %d admissions, %d times told their place was gone, %d users admitted more than once (%d by the first room and again by the rebuilt one); the room's log holds %d users",
		joined, admitted, told, twice, readmitted, len(seen))
}
