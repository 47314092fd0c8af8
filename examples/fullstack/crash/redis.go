package crash

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Persistence is how a [RedisServer] keeps its data.
type Persistence int

const (
	// NoPersistence: no RDB snapshots, no AOF; a restart starts empty.
	NoPersistence Persistence = iota
	// AOFAlways: appendonly yes, appendfsync always (every write is on
	// disk before its reply).
	AOFAlways
	// AOFEverySec: appendonly yes, appendfsync everysec (a machine crash
	// may lose the last second; a killed process loses nothing the kernel
	// already has).
	AOFEverySec
)

func (p Persistence) String() string {
	switch p {
	case NoPersistence:
		return "no persistence"
	case AOFAlways:
		return "appendfsync always"
	case AOFEverySec:
		return "appendfsync everysec"
	}
	return "Persistence(" + strconv.Itoa(int(p)) + ")"
}

// redisReadyBound bounds the wait for a started redis-server to answer PING.
const redisReadyBound = 30 * time.Second

// RedisServer is a private standalone redis-server on a loopback port,
// started and ended by the test.
type RedisServer struct {
	t    testing.TB
	bin  string
	Port int
	Dir  string // its working directory (AOF, log)
	Mode Persistence
	p    *proc
}

// StartRedis starts a redis-server in a temp dir on a free port and kills
// it at cleanup. The test is skipped when no redis-server is on PATH.
func StartRedis(t testing.TB, mode Persistence) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH: the crash tests run their own Redis processes")
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := &RedisServer{t: t, bin: bin, Port: port, Dir: t.TempDir(), Mode: mode}
	t.Cleanup(func() {
		if r.p != nil {
			if err := r.p.kill(); err != nil {
				t.Errorf("redis-server: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("redis-server log tail (%s):\n%s", r.logPath(), Tail(r.logPath(), 15))
		}
	})
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// Addr is host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.Port) }

// PID is the process ID of the running server (0 when it is down).
func (r *RedisServer) PID() int {
	if r.p == nil || !r.p.alive() {
		return 0
	}
	return r.p.pid()
}

func (r *RedisServer) logPath() string { return filepath.Join(r.Dir, "redis.log") }

func (r *RedisServer) args() []string {
	a := []string{"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
		"--daemonize", "no", "--save", "", "--logfile", ""}
	switch r.Mode {
	case NoPersistence:
		a = append(a, "--appendonly", "no")
	case AOFAlways:
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	case AOFEverySec:
		a = append(a, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	return a
}

func (r *RedisServer) start() error {
	p, err := startProc(r.bin, r.args(), ChildEnv(), r.logPath())
	if err != nil {
		return err
	}
	r.p = p
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(redisReadyBound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if !p.alive() {
			return fmt.Errorf("crash: redis-server on %s exited: %v\n%s", r.Addr(), p.err, Tail(r.logPath(), 10))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("crash: redis-server on %s not ready within %v: %v", r.Addr(), redisReadyBound, err)
		}
		select {
		case <-p.exited:
		case <-time.After(20 * time.Millisecond): // poll interval of the readiness check
		}
	}
}

// Kill is kill -9 of the server by its PID; it returns once the process
// is gone. Safe to call from any goroutine.
func (r *RedisServer) Kill() error { return r.p.kill() }

// Restart starts the server again on the same port and dir. Without
// keepData the dir's data files (AOF directory, RDB) are removed first, so
// it starts empty whatever its persistence.
func (r *RedisServer) Restart(keepData bool) {
	r.t.Helper()
	if r.p != nil && r.p.alive() {
		r.t.Fatalf("redis-server %d still running: Kill it first", r.p.pid())
	}
	if !keepData {
		for _, name := range []string{"appendonlydir", "dump.rdb"} {
			if err := os.RemoveAll(filepath.Join(r.Dir, name)); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

// Client returns a new client of the server, closed at cleanup.
func (r *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}
