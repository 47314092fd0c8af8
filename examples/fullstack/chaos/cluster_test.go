package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// clusterBound bounds every wait on the private Redis Cluster (formed,
// failed over, rejoined): limits for a loaded 2-core machine, not
// expectations; each wait ends as soon as its condition holds.
const clusterBound = 60 * time.Second

// redisCluster is a private Redis Cluster of 3 masters and 3 replicas
// (6 redis-server processes, appendonly everysec, cluster-node-timeout
// 1 s, replicas always eligible for a failover), formed with
// `redis-cli --cluster create … --cluster-replicas 1`. The services reach
// it directly: the cluster's redirections name the nodes' own addresses,
// so a TCP proxy in front of a node would carry the seed connections only.
type redisCluster struct {
	t     *testing.T
	nodes []*proc
	addrs []string
}

// startRedisCluster starts and forms the cluster; it skips the test when
// redis-server or redis-cli is missing.
func startRedisCluster(t *testing.T) *redisCluster {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH: F12 runs a private Redis Cluster")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not on PATH: F12 forms its private Redis Cluster with redis-cli --cluster create")
	}
	rc := &redisCluster{t: t}
	t.Cleanup(func() {
		for _, n := range rc.nodes {
			if n.alive() {
				_ = n.signal(syscall.SIGCONT) // a replica stopped by a failed F12l
			}
			if err := n.kill(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("%s log tail:\n%s", n.name, crash.Tail(n.logPath, 8))
			}
		}
	})
	for i := 0; i < 6; i++ {
		port, err := crash.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		bus, err := crash.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		n := &proc{name: "redis-node" + strconv.Itoa(i+1), bin: bin, logPath: filepath.Join(dir, "redis.log"),
			args: []string{"--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus), "--bind", "127.0.0.1",
				"--dir", dir, "--daemonize", "no", "--save", "", "--logfile", "",
				"--appendonly", "yes", "--appendfsync", "everysec",
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0"}}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if err := n.start(); err != nil {
			t.Fatal(err)
		}
		if err := waitPort(n, addr, clusterBound); err != nil {
			t.Fatal(err)
		}
		rc.nodes, rc.addrs = append(rc.nodes, n), append(rc.addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, rc.addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := rc.waitFor("the cluster formed (every node: state ok, 6 nodes, each replica in sync)", func(ctx context.Context) (bool, error) {
		for _, a := range rc.addrs {
			ok, err := rc.nodeSettled(ctx, a, 6)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return rc
}

func (rc *redisCluster) client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// nodeSettled: addr answers, sees cluster_state:ok and want known nodes
// none of them failing, and, if it is a replica, its link to its master
// is up.
func (rc *redisCluster) nodeSettled(ctx context.Context, addr string, want int) (bool, error) {
	c := rc.client(addr)
	defer c.Close()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return false, nil // not up yet
	}
	if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(want)) {
		return false, nil
	}
	nodes, err := rc.view(ctx, addr)
	if err != nil {
		return false, nil
	}
	for _, n := range nodes {
		if n.failing() {
			return false, nil
		}
	}
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return false, nil
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return false, nil
	}
	return true, nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, master string
	slots                   [][2]int
}

func (n clusterNode) isMaster() bool { return strings.Contains(n.flags, "master") }
func (n clusterNode) failing() bool  { return strings.Contains(n.flags, "fail") }

func (n clusterNode) owns(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// view is CLUSTER NODES as addr sees it.
func (rc *redisCluster) view(ctx context.Context, addr string) ([]clusterNode, error) {
	c := rc.client(addr)
	defer c.Close()
	s, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("chaos: CLUSTER NODES line %q", line)
		}
		a, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: a, flags: f[2], master: f[3]}
		for _, sl := range f[8:] {
			if strings.HasPrefix(sl, "[") { // a slot being migrated
				continue
			}
			lo, hi, isRange := strings.Cut(sl, "-")
			if !isRange {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("chaos: CLUSTER NODES slots %q", sl)
			}
			n.slots = append(n.slots, [2]int{l, h})
		}
		out = append(out, n)
	}
	return out, nil
}

// slotOf is the hash slot of key.
func (rc *redisCluster) slotOf(ctx context.Context, key string) (int, error) {
	c := rc.client(rc.addrs[0])
	defer c.Close()
	n, err := c.ClusterKeySlot(ctx, key).Result()
	return int(n), err
}

// masterOf returns the node that from's view has as the (not failing)
// master of slot.
func (rc *redisCluster) masterOf(ctx context.Context, from string, slot int) (clusterNode, bool, error) {
	nodes, err := rc.view(ctx, from)
	if err != nil {
		return clusterNode{}, false, err
	}
	for _, n := range nodes {
		if n.isMaster() && !n.failing() && n.owns(slot) {
			return n, true, nil
		}
	}
	return clusterNode{}, false, nil
}

// node returns the process listening on addr.
func (rc *redisCluster) node(addr string) *proc {
	for i, a := range rc.addrs {
		if a == addr {
			return rc.nodes[i]
		}
	}
	return nil
}

// waitFor polls cond every 100 ms until it holds, bounded by clusterBound.
func (rc *redisCluster) waitFor(what string, cond func(ctx context.Context) (bool, error)) error {
	deadline := time.Now().Add(clusterBound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := cond(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("chaos: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s: not within %v", what, clusterBound)
		}
		time.Sleep(100 * time.Millisecond) // poll interval of a bounded wait on the cluster's state
	}
}

// killMasterOf is F12's strike: kill -9 of the master holding key's slot.
// With lag (F12l) its replica is stopped (SIGSTOP) first and the master
// closes its replication link (CLIENT KILL TYPE replica; the stopped
// replica cannot connect again), then the master is killed after the
// seeded lag while buys go on: the writes of that lag never reach the
// replica (a stop alone would not do: the kernel keeps receiving into the
// stopped replica's socket), and the replica, continued (SIGCONT) right
// after the kill, is promoted without them.
func killMasterOf(key string, lag func(*rand.Rand) time.Duration) func(r *run) error {
	return func(r *run) error {
		rc := r.sys.cluster
		slot, err := rc.slotOf(r.ctx, key)
		if err != nil {
			return err
		}
		nodes, err := rc.view(r.ctx, rc.addrs[0])
		if err != nil {
			return err
		}
		var m, rep clusterNode
		for _, n := range nodes {
			if n.isMaster() && !n.failing() && n.owns(slot) {
				m = n
			}
		}
		for _, n := range nodes {
			if m.id != "" && n.master == m.id {
				rep = n
			}
		}
		p, rp := rc.node(m.addr), rc.node(rep.addr)
		if p == nil || rp == nil {
			return fmt.Errorf("chaos: no master of slot %d with a replica of ours (master %q, replica %q)", slot, m.addr, rep.addr)
		}
		r.killed, r.slot = m.addr, slot
		if lag != nil {
			d := lag(r.rng)
			r.note("SIGSTOP %s (pid %d), replica %s of the sale's master; %v of writes it will miss", rp.name, rp.pid(), rep.addr, d)
			if err := rp.signal(syscall.SIGSTOP); err != nil {
				return err
			}
			c := rc.client(m.addr)
			n, err := c.ClientKillByFilter(r.ctx, "TYPE", "replica").Result()
			_ = c.Close()
			if err != nil {
				return fmt.Errorf("chaos: CLIENT KILL TYPE replica on %s: %w", m.addr, err)
			}
			r.note("master %s closed %d replication link(s)", m.addr, n)
			t := time.NewTimer(d) // the lag's length: a schedule, not a synchronisation
			<-t.C
		}
		r.note("kill -9 %s (pid %d), master %s of slot %d (the sale's keys)", p.name, p.pid(), m.addr, slot)
		if err := p.kill(); err != nil {
			return err
		}
		if lag != nil {
			r.note("SIGCONT %s", rp.name)
			return rp.signal(syscall.SIGCONT)
		}
		return nil
	}
}

// promoteAndRejoin is F12's heal: wait until a surviving node sees a new,
// healthy master of the slot (the killed master's replica, promoted),
// point the checker at it, restart the killed node on its data and wait
// until it rejoined as a replica and the cluster is settled.
func promoteAndRejoin(r *run) error {
	rc := r.sys.cluster
	var survivor string
	for _, a := range rc.addrs {
		if a != r.killed {
			survivor = a
			break
		}
	}
	var promoted clusterNode
	if err := rc.waitFor("the killed master's replica promoted", func(ctx context.Context) (bool, error) {
		m, ok, err := rc.masterOf(ctx, survivor, r.slot)
		if err != nil || !ok || m.addr == r.killed {
			return false, nil
		}
		promoted = m
		c := rc.client(m.addr)
		defer c.Close()
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok"), nil
	}); err != nil {
		return err
	}
	r.note("replica %s promoted to master of slot %d; cluster_state ok", promoted.addr, r.slot)
	r.sys.setCheckerRedis(promoted.addr)
	p := rc.node(r.killed)
	if err := p.start(); err != nil {
		return err
	}
	if err := waitPort(p, r.killed, clusterBound); err != nil {
		return err
	}
	r.note("%s restarted (pid %d) on its data", p.name, p.pid())
	if err := rc.waitFor("the restarted node rejoined as a replica", func(ctx context.Context) (bool, error) {
		nodes, err := rc.view(ctx, r.killed)
		if err != nil {
			return false, nil
		}
		for _, n := range nodes {
			if n.addr == r.killed && (!strings.Contains(n.flags, "slave") || n.master != promoted.id) {
				return false, nil
			}
		}
		for _, a := range rc.addrs {
			if ok, err := rc.nodeSettled(ctx, a, 6); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	r.note("%s rejoined as a replica of %s; every node settled", p.name, promoted.addr)
	return nil
}

// checkLedgerKept (F12, F12l): every reservation a buyer was answered 202
// for must still be in the stock ledger, held or released (a tombstone, a
// release that found no reservation, does not count), unless the loss was
// noticed (an ALERT line: the sale frozen and rebuilt from the DB) — by
// the stock's data-loss fence, or by the reconciler finding a live order
// whose reservation is gone (the same alert). A reservation the failover lost without the fence
// noticing is a violation: Redis then counts its unit as free while the
// DB holds an order for it.
func checkLedgerKept(r *run, st crash.State) {
	lost, tomb := 0, 0
	var sample []string
	for id := range r.accepted() {
		e, ok := st.Ledger[id]
		switch {
		case !ok:
			lost++
		case e.State == "T":
			tomb++
		default:
			continue
		}
		if len(sample) < 5 {
			sample = append(sample, id)
		}
	}
	alerts := r.sys.serviceLogCount("ALERT: Redis lost or rolled back")
	r.count("accepted missing from the ledger", lost)
	r.count("accepted tombstoned in the ledger", tomb)
	r.count("data-loss alerts", alerts)
	r.note("stock ledger after the failover: %d accepted reservations missing, %d tombstoned; data-loss fence alerts: %d",
		lost, tomb, alerts)
	if lost+tomb > 0 && alerts == 0 {
		r.violation("the failover lost %d acknowledged reservations from the stock ledger (%d missing, %d tombstoned by a later release; e.g. %s) and neither the data-loss fence nor the reconciler noticed",
			lost+tomb, lost, tomb, strings.Join(sample, ", "))
	}
}
