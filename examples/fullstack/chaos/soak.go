package chaos

import (
	"math/rand/v2"
	"slices"
	"time"
)

// The soak (TestSoak, `make soak`) runs the chain of the battery for a long
// time under load while a nemesis draws faults from the battery's
// catalogue on a random schedule with overlaps. This file is the
// nemesis's plan: which fault strikes when and for how long, a pure
// function of the seed, so a failing seed replays the same schedule
// (SECKILL_SOAK_SEED). The strikes and heals themselves are the battery's
// (soak_test.go).

// The proxy names of process proc's Redis and database connections (see
// system_test.go for every proxy name).
func redisProxy(proc string) string { return proc + "-redis" }
func dbProxy(proc string) string    { return proc + "-db" }

// nemesisFault is one kind of fault the nemesis draws.
type nemesisFault struct {
	name string
	// uses are the resources the fault holds while it is active: two
	// faults that share one never overlap (a process is not killed twice;
	// a proxy is not partitioned while its toxics are on).
	uses []string
	// needs are the resources the heal needs up (a restarted process
	// must reach its backends to start): the heal waits while a fault
	// holding one of them is active.
	needs []string
	// minHold, maxHold bound the seeded hold between strike and heal.
	minHold, maxHold time.Duration
	// weight is the fault's relative chance of being drawn.
	weight int
}

// nemesisStep is one fault of the plan: strike at at (since the round
// started), heal after hold.
type nemesisStep struct {
	at    time.Duration
	fault int // index in the catalogue
	hold  time.Duration
}

func (s nemesisStep) end() time.Duration { return s.at + s.hold }

// soakCatalogue is the nemesis's catalogue for a system of 2 apis and 2
// workers, a standalone redis-server, the broker and a database (a private
// mariadbd when privateDB, which db-kill needs). grace is the reconciler's
// grace: the lagging consumer holds both workers down 2–4 × grace.
func soakCatalogue(grace time.Duration, privateDB bool) []nemesisFault {
	procNeeds := func(p string) []string {
		return []string{"redis", "db", "broker", redisProxy(p), dbProxy(p)}
	}
	var redisProxies, dbProxies []string
	for _, p := range []string{"api1", "api2", "worker1", "worker2"} {
		redisProxies = append(redisProxies, redisProxy(p))
		dbProxies = append(dbProxies, dbProxy(p))
	}
	ms := time.Millisecond
	cat := []nemesisFault{
		{name: "kill -9 api1", uses: []string{"api1"}, needs: procNeeds("api1"), minHold: 300 * ms, maxHold: 3 * time.Second, weight: 3},
		{name: "kill -9 api2", uses: []string{"api2"}, needs: procNeeds("api2"), minHold: 300 * ms, maxHold: 3 * time.Second, weight: 3},
		{name: "kill -9 worker1", uses: []string{"worker1"}, needs: procNeeds("worker1"), minHold: 300 * ms, maxHold: 3 * time.Second, weight: 3},
		{name: "kill -9 worker2", uses: []string{"worker2"}, needs: procNeeds("worker2"), minHold: 300 * ms, maxHold: 3 * time.Second, weight: 3},
		{name: "lagging consumer (both workers down)", uses: []string{"worker1", "worker2"},
			needs: append(procNeeds("worker1"), redisProxy("worker2"), dbProxy("worker2")), minHold: 2 * grace, maxHold: 4 * grace, weight: 2},
		{name: "kill -9 redis-server, restarted with its AOF", uses: []string{"redis"}, minHold: 500 * ms, maxHold: 2 * time.Second, weight: 2},
		{name: "kill -9 redis-server, restarted EMPTY (failover with loss)", uses: []string{"redis"}, minHold: 500 * ms, maxHold: 2 * time.Second, weight: 1},
		{name: "broker stalled (SIGSTOP + proxies disabled)", uses: []string{"broker"}, minHold: 2 * time.Second, maxHold: 5 * time.Second, weight: 2},
		{name: "kill -9 broker, restarted with its log", uses: []string{"broker"}, minHold: 2 * time.Second, maxHold: 5 * time.Second, weight: 1},
		{name: "partition api1 <-> Redis", uses: []string{redisProxy("api1")}, minHold: 2 * time.Second, maxHold: 4 * time.Second, weight: 2},
		{name: "partition worker2 <-> Redis", uses: []string{redisProxy("worker2")}, minHold: 2 * time.Second, maxHold: 4 * time.Second, weight: 1},
		{name: "partition api2 <-> database", uses: []string{dbProxy("api2")}, minHold: 2 * time.Second, maxHold: 4 * time.Second, weight: 2},
		{name: "partition worker1 <-> database", uses: []string{dbProxy("worker1")}, minHold: 2 * time.Second, maxHold: 4 * time.Second, weight: 2},
		{name: "Redis slow (200 ms) with connection resets", uses: redisProxies, minHold: 2 * time.Second, maxHold: 4 * time.Second, weight: 2},
		{name: "database down for everyone (every database proxy disabled)", uses: append([]string{"db"}, dbProxies...), minHold: time.Second, maxHold: 3 * time.Second, weight: 1},
	}
	if privateDB {
		cat = append(cat, nemesisFault{name: "kill -9 mariadbd, restarted on its datadir", uses: []string{"db"}, minHold: time.Second, maxHold: 3 * time.Second, weight: 1})
	}
	return cat
}

// nemesisPlan draws the faults of one round of length d: strikes arrive
// with exponential gaps of mean gap (after a quiet first second), each
// drawn by weight among the faults whose resources are free at that
// moment, so faults overlap whenever their resources differ; every fault
// is healed before the round ends (the checkpoint runs quiet).
func nemesisPlan(seed uint64, round int, d, gap time.Duration, cat []nemesisFault) []nemesisStep {
	rng := rand.New(rand.NewPCG(seed, 0x50a4<<16+uint64(round)))
	var plan []nemesisStep
	t := time.Second
	for {
		t += time.Duration(rng.ExpFloat64() * float64(gap))
		if t >= d {
			return plan
		}
		busy := map[string]bool{}
		for _, s := range plan {
			if s.at <= t && t < s.end() {
				for _, u := range cat[s.fault].uses {
					busy[u] = true
				}
			}
		}
		var free []int
		total := 0
		for i, f := range cat {
			if !slices.ContainsFunc(f.uses, func(u string) bool { return busy[u] }) {
				free = append(free, i)
				total += f.weight
			}
		}
		if total == 0 {
			continue
		}
		pick := rng.IntN(total)
		i := free[0]
		for _, j := range free {
			if pick < cat[j].weight {
				i = j
				break
			}
			pick -= cat[j].weight
		}
		f := cat[i]
		hold := f.minHold + time.Duration(rng.Int64N(int64(f.maxHold-f.minHold)+1))
		if t+hold > d {
			continue // no fault outlives the round
		}
		plan = append(plan, nemesisStep{at: t, fault: i, hold: hold})
	}
}

// planOverlaps counts the pairs of steps of plan active at the same time
// and the most steps active at once.
func planOverlaps(plan []nemesisStep) (pairs, most int) {
	for i, a := range plan {
		n := 1
		for j, b := range plan {
			if j != i && b.at <= a.at && a.at < b.end() {
				n++
			}
			if j > i && a.at < b.end() && b.at < a.end() {
				pairs++
			}
		}
		most = max(most, n)
	}
	return pairs, most
}
