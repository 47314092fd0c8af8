package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// proc is a child process (a worker or the broker) whose output goes to a
// log file; kill is kill -9 by its PID.
type proc struct {
	name    string
	bin     string
	args    []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	starts  int
}

func (p *proc) start() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "=== chaos: start #%d: %s %s\n", p.starts, p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = crash.ChildEnv()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	return nil
}

func (p *proc) alive() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int {
	if !p.alive() {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill is kill -9 by PID; it returns once the process is reaped.
func (p *proc) kill() error {
	if !p.alive() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("chaos: kill -9 %s (%d): %w", p.name, p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second): // SIGKILL cannot be ignored: a bound, not a wait
		return fmt.Errorf("chaos: %s (%d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// waitLog waits until the current run's log has a line containing substr
// (bounded), or the process exits. The processes are started one after the
// other: each migrates the schema at startup, and concurrent migrations
// of one database race (see RELIABILITY.md).
func (p *proc) waitLog(substr string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	marker := fmt.Sprintf("=== chaos: start #%d:", p.starts)
	for {
		b, _ := os.ReadFile(p.logPath)
		s := string(b)
		if i := strings.LastIndex(s, marker); i >= 0 && strings.Contains(s[i:], substr) {
			return nil
		}
		if !p.alive() {
			return fmt.Errorf("chaos: %s exited during startup:\n%s", p.name, crash.Tail(p.logPath, 10))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s did not log %q within %v", p.name, substr, bound)
		}
		select {
		case <-p.exited:
		case <-time.After(50 * time.Millisecond): // poll interval of the readiness check
		}
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to the process by its PID.
func (p *proc) signal(sig syscall.Signal) error {
	if !p.alive() {
		return fmt.Errorf("chaos: %s is not running", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// waitPort waits until addr accepts TCP connections (bounded) or p exits.
func waitPort(p *proc, addr string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if !p.alive() {
			return fmt.Errorf("chaos: %s exited before %s accepted connections", p.name, addr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s not accepting on %s within %v: %v", p.name, addr, bound, err)
		}
		select {
		case <-p.exited:
		case <-time.After(50 * time.Millisecond): // poll interval of the readiness check
		}
	}
}

// proxies is the in-process toxiproxy server and its proxies by name.
type proxies struct {
	srv *toxiproxy.ApiServer
	by  map[string]*toxiproxy.Proxy
}

func newProxies(t *testing.T) *proxies {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := &proxies{srv: srv, by: map[string]*toxiproxy.Proxy{}}
	t.Cleanup(func() {
		for _, p := range px.by {
			p.Stop()
		}
	})
	return px
}

// add starts a proxy named name on a free loopback port in front of
// upstream and returns its listen address.
func (px *proxies) add(name, upstream string) (string, error) {
	p := toxiproxy.NewProxy(px.srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("chaos: proxy %s: %w", name, err)
	}
	px.by[name] = p
	return p.Listen, nil
}

// setEnabled disables (closes every connection, refuses new ones) or
// enables again the named proxies. The listen address is kept.
func (px *proxies) setEnabled(on bool, names ...string) error {
	for _, n := range names {
		p := px.by[n]
		if p == nil {
			return fmt.Errorf("chaos: no proxy %q", n)
		}
		if err := p.Update(&toxiproxy.Proxy{Listen: p.Listen, Upstream: p.Upstream, Enabled: on}); err != nil {
			return fmt.Errorf("chaos: proxy %s enabled=%v: %w", n, on, err)
		}
	}
	return nil
}

// addToxic adds a toxic given as toxiproxy's JSON to the named proxies.
func (px *proxies) addToxic(js string, names ...string) error {
	for _, n := range names {
		if _, err := px.by[n].Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("chaos: toxic on %s: %w", n, err)
		}
	}
	return nil
}

// clearToxics removes every toxic of the named proxies.
func (px *proxies) clearToxics(names ...string) {
	for _, n := range names {
		px.by[n].Toxics.ResetToxics(context.Background())
	}
}

// system is one run's processes: redis-server (AOF everysec), the broker
// process (-data), N api processes and M worker processes, every one of
// them reaching every backend through its own toxiproxy proxy; MariaDB in
// a fresh database.
type system struct {
	t          *testing.T
	secretFile string             // -secret-file of every service process
	redis      *crash.RedisServer // nil with a cluster
	cluster    *redisCluster      // F12: a private Redis Cluster instead
	sentinel   *redisSentinel     // F12s: a private Sentinel-managed Redis instead
	mdb        *mariaDB           // F5: a private MariaDB instead of SECKILL_MYSQL_DSN's
	pg         *pgServer          // F5p: a private PostgreSQL server
	broker     *proc
	brokerA    []string // the broker's own addresses
	px         *proxies
	apis       []*crash.Service
	workers    []*proc
	store      *crash.Store
	db         string
	args       func(name string) []string // the common flags of process name
}

// proxy names: "<process>-redis", "<process>-db", "kafka-<i>" (shared:
// see the package doc on what the Kafka proxies cover) and
// "<process>-kafka-<i>" (a process's own, with -kafka-addr-map).
func kafkaProxy(proc string, i int) string {
	return proc + "-kafka-" + strconv.Itoa(i)
}

const prefix = "ck:"

type sysConfig struct {
	apis, workers int
	stock         int64
	users         int
	payTimeout    time.Duration
	grace         time.Duration
	extra         []string            // more flags for every api and worker
	procExtra     map[string][]string // more flags for one process (by name), after extra
	// privateDB runs a private mariadbd (F5) instead of using dsn's server.
	privateDB bool
	// postgres runs the chain on PostgreSQL (SECKILL_POSTGRES_DSN's
	// server, or a private one with privatePG: F5p) instead of MariaDB.
	postgres, privatePG bool
	// cluster runs a private 3-master + 3-replica Redis Cluster (F12)
	// instead of the standalone redis-server.
	cluster bool
	// sentinel runs a private master + replica + 3 Sentinels (F12s)
	// instead of the standalone redis-server.
	sentinel bool
	// ownKafka names the processes whose every Kafka connection goes
	// through proxies of their own (-kafka-addr-map maps each broker's
	// advertised address to the process's proxy in front of it).
	ownKafka []string
}

func startSystem(t *testing.T, dsn string, sc sysConfig) *system {
	t.Helper()
	s := &system{t: t, px: newProxies(t), secretFile: crash.WriteSecret(t)}
	switch {
	case sc.sentinel:
		s.sentinel = startRedisSentinel(t)
	case sc.cluster:
		s.cluster = startRedisCluster(t)
	default:
		s.redis = crash.StartRedis(t, crash.AOFEverySec)
	}
	if sc.privateDB {
		s.mdb, dsn = startMariaDB(t)
	}

	// The broker process, log on disk.
	ports := make([]string, 3)
	for i := range ports {
		p, err := crash.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = strconv.Itoa(p)
		s.brokerA = append(s.brokerA, "127.0.0.1:"+ports[i])
	}
	dir := t.TempDir()
	s.broker = &proc{name: "broker", bin: brokerBin, logPath: filepath.Join(dir, "broker.log"),
		args: []string{"-ports", strings.Join(ports, ","), "-data", filepath.Join(dir, "kafka")}}
	t.Cleanup(func() {
		if s.broker.alive() {
			_ = s.broker.signal(syscall.SIGCONT)
		}
		if err := s.broker.kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("broker log tail:\n%s", crash.Tail(s.broker.logPath, 10))
		}
	})
	if err := s.broker.start(); err != nil {
		t.Fatal(err)
	}
	for _, a := range s.brokerA {
		if err := waitPort(s.broker, a, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var kafka []string
	for i, a := range s.brokerA {
		l, err := s.px.add("kafka-"+strconv.Itoa(i), a)
		if err != nil {
			t.Fatal(err)
		}
		kafka = append(kafka, l)
	}

	// MariaDB (or PostgreSQL): a fresh database, reached through a proxy
	// per process.
	var b [4]byte
	_, _ = crand.Read(b[:])
	s.db = "chaos_" + hex.EncodeToString(b[:])
	dbUp, dbFlag, dbVia := "", "-mysql", func(addr string) string { return "" }
	openStore := func() *crash.Store {
		return &crash.Store{DB: crash.OpenMySQL(t, dsn, s.db), MySQL: true, Prefix: prefix, Activity: 1}
	}
	if sc.postgres {
		pgDSN := os.Getenv("SECKILL_POSTGRES_DSN")
		if sc.privatePG {
			s.pg, pgDSN = startPostgres(t)
		}
		a, err := pgAddr(pgDSN)
		if err != nil {
			t.Fatal(err)
		}
		dbUp, dbFlag, dbVia = a, "-postgres", func(addr string) string { return pgVia(pgDSN, addr) }
		openStore = func() *crash.Store {
			return &crash.Store{DB: openPostgresDB(t, pgDSN, s.db), MySQL: true, Prefix: prefix, Activity: 1}
		}
	} else {
		cfg, err := mysqldrv.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("parse SECKILL_MYSQL_DSN: %v", err)
		}
		if cfg.Net != "tcp" {
			t.Skipf("SECKILL_MYSQL_DSN uses %q: the fault proxy needs a TCP address", cfg.Net)
		}
		crash.DropMySQLAtCleanup(t, dsn, s.db)
		dbUp = cfg.Addr
		dbVia = func(addr string) string { c := cfg.Clone(); c.Addr = addr; return c.FormatDSN() }
	}

	names := []string{}
	for i := 1; i <= sc.apis; i++ {
		names = append(names, "api"+strconv.Itoa(i))
	}
	for i := 1; i <= sc.workers; i++ {
		names = append(names, "worker"+strconv.Itoa(i))
	}
	procRedis, procDSN, procKafka := map[string][]string{}, map[string]string{}, map[string][]string{}
	own := map[string]bool{}
	for _, n := range sc.ownKafka {
		own[n] = true
	}
	for _, n := range names {
		switch {
		case s.sentinel != nil:
			procRedis[n] = []string{"-redis-sentinel", s.sentinel.spec()}
		case s.cluster != nil:
			procRedis[n] = []string{"-redis-cluster", strings.Join(s.cluster.addrs, ",")}
		default:
			ra, err := s.px.add(redisProxy(n), s.redis.Addr())
			if err != nil {
				t.Fatal(err)
			}
			procRedis[n] = []string{"-redis", ra}
		}
		da, err := s.px.add(dbProxy(n), dbUp)
		if err != nil {
			t.Fatal(err)
		}
		procDSN[n] = dbVia(da)
		procKafka[n] = []string{"-kafka", strings.Join(kafka, ",")}
		if own[n] {
			var seeds, pairs []string
			for i, a := range s.brokerA {
				l, err := s.px.add(kafkaProxy(n, i), a)
				if err != nil {
					t.Fatal(err)
				}
				seeds, pairs = append(seeds, l), append(pairs, a+"="+l)
			}
			procKafka[n] = []string{"-kafka", strings.Join(seeds, ","), "-kafka-addr-map", strings.Join(pairs, ",")}
		}
	}
	common := func(n string) []string {
		a := append(append(append([]string{}, procRedis[n]...), procKafka[n]...),
			dbFlag, procDSN[n], "-mysql-db", s.db, "-prefix", prefix, "-secret-file", s.secretFile, "-pay-secret-file", s.secretFile,
			"-stock", strconv.FormatInt(sc.stock, 10), "-users", strconv.Itoa(sc.users),
			"-reconcile-every", reconcileEvery.String(), "-reconcile-grace", sc.grace.String(),
			"-pay-timeout", sc.payTimeout.String())
		return append(append(a, sc.extra...), sc.procExtra[n]...)
	}
	s.args = common

	// The first api creates the schema and the sale; then the workers,
	// then the other apis.
	s.apis = append(s.apis, s.startAPI("api1"))
	for i := 1; i <= sc.workers; i++ {
		n := "worker" + strconv.Itoa(i)
		w := &proc{name: n, bin: serviceBin, logPath: filepath.Join(dir, n+".log"),
			args: append([]string{"-role", "worker", "-demo", "-demo-with-real-servers", "-start-in", "0s", "-log-level", "info"}, common(n)...)}
		t.Cleanup(func() {
			if err := w.kill(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("%s log tail:\n%s", w.name, crash.Tail(w.logPath, 25))
			}
		})
		if err := w.start(); err != nil {
			t.Fatal(err)
		}
		if err := w.waitLog("worker running", time.Minute); err != nil {
			t.Fatal(err)
		}
		s.workers = append(s.workers, w)
	}
	for i := 2; i <= sc.apis; i++ {
		s.apis = append(s.apis, s.startAPI("api"+strconv.Itoa(i)))
	}
	s.store = openStore()
	if s.cluster != nil {
		// The checker reads the master of the sale's slot (every key of
		// the activity shares the hash tag {a:<id>}).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		slot, err := s.cluster.slotOf(ctx, prefix+"{a:1}:meta")
		if err != nil {
			t.Fatal(err)
		}
		m, ok, err := s.cluster.masterOf(ctx, s.cluster.addrs[0], slot)
		if err != nil || !ok {
			t.Fatalf("no master of slot %d: %v", slot, err)
		}
		s.setCheckerRedis(m.addr)
	} else if s.sentinel != nil {
		s.setCheckerRedis(s.sentinel.addrs[0])
	} else {
		s.store.Redis = s.redis.Client()
	}
	return s
}

// setCheckerRedis points the checker's Redis reads at addr (the cluster
// node that is the master of the sale's slot).
func (s *system) setCheckerRedis(addr string) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
	s.t.Cleanup(func() { _ = c.Close() })
	s.store.Redis = c
}

func (s *system) startAPI(name string) *crash.Service {
	return crash.StartService(s.t, serviceBin, crash.ServiceConfig{Extra: append([]string{"-role", "api"}, s.args(name)...)})
}

// procNames are the names of the api and worker processes.
func (s *system) procNames() []string {
	var out []string
	for i := range s.apis {
		out = append(out, "api"+strconv.Itoa(i+1))
	}
	for _, w := range s.workers {
		out = append(out, w.name)
	}
	return out
}

// kafkaProxies are the names of the broker's proxies.
func (s *system) kafkaProxies() []string {
	var out []string
	for i := range s.brokerA {
		out = append(out, "kafka-"+strconv.Itoa(i))
	}
	return out
}

// serviceLogCount counts the lines containing substr in every api's and
// worker's log.
func (s *system) serviceLogCount(substr string) int {
	n := 0
	for _, a := range s.apis {
		n += a.CountLog(substr)
	}
	for _, w := range s.workers {
		b, _ := os.ReadFile(w.logPath)
		n += strings.Count(string(b), substr)
	}
	return n
}
