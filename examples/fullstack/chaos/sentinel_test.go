package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// F12s runs the services on a Sentinel-managed Redis (the service's
// -redis-sentinel, go-redis's failover client): a private master and its
// replica (appendonly everysec) and 3 Sentinels (quorum 2,
// down-after-milliseconds 1000), all redis-server processes on loopback.
// The strike is kill -9 of the master; the Sentinels elect a leader and
// promote the replica; the services follow the Sentinels to the new
// master; the killed node is restarted and the Sentinels make it a
// replica of the new master. Writes the master acknowledged but had not
// replicated are lost with it: the stock's data-loss fence must notice
// (checkLedgerKept).

const sentinelMaster = "seckill"

type redisSentinel struct {
	t         *testing.T
	nodes     []*proc // nodes[0] the first master, nodes[1] its replica
	addrs     []string
	sentinels []*proc
	sAddrs    []string
	killed    int // index in nodes of the killed master
}

// spec is the service's -redis-sentinel.
func (rs *redisSentinel) spec() string {
	return sentinelMaster + "@" + strings.Join(rs.sAddrs, ",")
}

func startRedisSentinel(t *testing.T) *redisSentinel {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH: F12s runs a private Redis with Sentinels")
	}
	rs := &redisSentinel{t: t}
	t.Cleanup(func() {
		for _, p := range append(append([]*proc{}, rs.sentinels...), rs.nodes...) {
			if err := p.kill(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("%s log tail:\n%s", p.name, crash.Tail(p.logPath, 8))
			}
		}
	})
	start := func(p *proc, addr string) {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		if err := waitPort(p, addr, clusterBound); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		port, err := crash.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--daemonize", "no",
			"--save", "", "--appendonly", "yes", "--appendfsync", "everysec"}
		if i == 1 {
			args = append(args, "--replicaof", "127.0.0.1", strings.TrimPrefix(rs.addrs[0], "127.0.0.1:"))
		}
		p := &proc{name: "redis-" + []string{"master", "replica"}[i], bin: bin, args: args, logPath: filepath.Join(dir, "redis.log")}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		start(p, addr)
		rs.nodes, rs.addrs = append(rs.nodes, p), append(rs.addrs, addr)
	}
	if err := rs.waitFor("the replica in sync", func(ctx context.Context) (bool, error) {
		return rs.replicaUp(ctx, rs.addrs[1]), nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		port, err := crash.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		mp := strings.TrimPrefix(rs.addrs[0], "127.0.0.1:")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %s 2\n"+
			"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			port, dir, sentinelMaster, mp, sentinelMaster, sentinelMaster, sentinelMaster)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		p := &proc{name: "sentinel" + strconv.Itoa(i+1), bin: bin, args: []string{conf, "--sentinel"}, logPath: filepath.Join(dir, "sentinel.log")}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		start(p, addr)
		rs.sentinels, rs.sAddrs = append(rs.sentinels, p), append(rs.sAddrs, addr)
	}
	if err := rs.waitFor("every Sentinel knows the master, its replica and the other Sentinels", func(ctx context.Context) (bool, error) {
		for _, a := range rs.sAddrs {
			c := redis.NewSentinelClient(&redis.Options{Addr: a, DialTimeout: time.Second})
			m, err := c.Master(ctx, sentinelMaster).Result()
			_ = c.Close()
			if err != nil || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || strings.Contains(m["flags"], "down") {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return rs
}

func (rs *redisSentinel) client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// replicaUp: addr is a replica whose link to its master is up.
func (rs *redisSentinel) replicaUp(ctx context.Context, addr string) bool {
	c := rs.client(addr)
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
}

// master is the master's address as the first answering Sentinel names it.
func (rs *redisSentinel) master(ctx context.Context) (string, error) {
	var last error
	for _, a := range rs.sAddrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, DialTimeout: time.Second})
		hp, err := c.GetMasterAddrByName(ctx, sentinelMaster).Result()
		_ = c.Close()
		if err == nil && len(hp) == 2 {
			return hp[0] + ":" + hp[1], nil
		}
		last = err
	}
	return "", fmt.Errorf("chaos: no Sentinel names the master: %v", last)
}

func (rs *redisSentinel) waitFor(what string, cond func(ctx context.Context) (bool, error)) error {
	return (&redisCluster{}).waitFor(what, cond)
}

// sentinelKill is F12s's strike: kill -9 of the current master.
func sentinelKill(r *run) error {
	rs := r.sys.sentinel
	m, err := rs.master(r.ctx)
	if err != nil {
		return err
	}
	for i, a := range rs.addrs {
		if a == m {
			rs.killed = i
			r.note("kill -9 %s (pid %d), the Sentinel-managed master %s", rs.nodes[i].name, rs.nodes[i].pid(), a)
			return rs.nodes[i].kill()
		}
	}
	return fmt.Errorf("chaos: the Sentinels name %s, not a node of ours", m)
}

// sentinelHeal waits until the Sentinels promoted the replica, points the
// checker at it, restarts the killed node and waits until it is a
// replica of the new master, in sync.
func sentinelHeal(r *run) error {
	rs := r.sys.sentinel
	old := rs.addrs[rs.killed]
	var promoted string
	if err := rs.waitFor("the Sentinels promoted the replica", func(ctx context.Context) (bool, error) {
		m, err := rs.master(ctx)
		if err != nil || m == old {
			return false, nil
		}
		c := rs.client(m)
		defer c.Close()
		info, err := c.Info(ctx, "replication").Result()
		promoted = m
		return err == nil && strings.Contains(info, "role:master"), nil
	}); err != nil {
		return err
	}
	r.note("the Sentinels promoted %s to master", promoted)
	r.sys.setCheckerRedis(promoted)
	p := rs.nodes[rs.killed]
	if err := p.start(); err != nil {
		return err
	}
	if err := waitPort(p, old, clusterBound); err != nil {
		return err
	}
	if err := rs.waitFor("the restarted node a replica of the new master, in sync", func(ctx context.Context) (bool, error) {
		return rs.replicaUp(ctx, old), nil
	}); err != nil {
		return err
	}
	r.note("%s restarted (pid %d), reconfigured by the Sentinels as a replica of %s", p.name, p.pid(), promoted)
	return nil
}
