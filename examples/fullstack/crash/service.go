package crash

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ServicePackage is the import path of the service's command.
const ServicePackage = "github.com/seckillkit/seckill/examples/fullstack"

// Build compiles the service into dir and returns the binary's path. It
// runs `go build`, so it must be called from inside the module.
func Build(dir string) (string, error) {
	out := filepath.Join(dir, "fullstack")
	cmd := exec.Command("go", "build", "-o", out, ServicePackage)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("crash: go build %s: %w\n%s", ServicePackage, err, b)
	}
	return out, nil
}

// ServiceConfig is the service's command line (see examples/fullstack
// README, "Flags"). Zero values leave a flag out.
type ServiceConfig struct {
	Redis          string // -redis host:port; empty = embedded miniredis
	MySQLDSN       string // -mysql DSN; empty = SQLite
	MySQLDB        string // -mysql-db
	SQLite         string // -sqlite FILE
	KafkaData      string // -kafka-data DIR; empty = not passed (in memory, or next to -sqlite FILE)
	Prefix         string // -prefix
	SecretFile     string // -secret-file (WriteSecret): signed paths stay valid across restarts
	Stock          int64  // -stock
	Users          int    // -users
	ReconcileEvery time.Duration
	ReconcileGrace time.Duration
	Extra          []string // more flags, appended last
}

// Args renders c as flags for a service listening on addr. -demo (with
// -demo-with-real-servers: the buyers read the captcha answers through
// the demo hook) and -start-in 0 are always set: the sale is open from the
// first start.
func (c ServiceConfig) Args(addr string) []string {
	a := []string{"-addr", addr, "-demo", "-demo-with-real-servers", "-start-in", "0s", "-log-level", "info"}
	add := func(flag, v string) {
		if v != "" {
			a = append(a, flag, v)
		}
	}
	add("-redis", c.Redis)
	add("-mysql", c.MySQLDSN)
	add("-mysql-db", c.MySQLDB)
	add("-sqlite", c.SQLite)
	add("-kafka-data", c.KafkaData)
	add("-prefix", c.Prefix)
	add("-secret-file", c.SecretFile)
	if c.Stock > 0 {
		add("-stock", strconv.FormatInt(c.Stock, 10))
	}
	if c.Users > 0 {
		add("-users", strconv.Itoa(c.Users))
	}
	if c.ReconcileEvery > 0 {
		add("-reconcile-every", c.ReconcileEvery.String())
	}
	if c.ReconcileGrace > 0 {
		add("-reconcile-grace", c.ReconcileGrace.String())
	}
	return append(a, c.Extra...)
}

// WriteSecret writes a random signing secret (64 hex characters) to a
// file of t's temporary directory and returns its path, for -secret-file:
// the service takes a secret from a file or the environment, never argv.
func WriteSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(b)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// freePort is FreePort; a test replaces it.
var freePort = FreePort

// healthBound bounds the wait for a started service to answer /healthz.
const healthBound = 2 * time.Minute

// Service is the service running as a child process.
type Service struct {
	t       testing.TB
	bin     string
	args    []string
	Addr    string // host:port
	URL     string // http://host:port
	LogPath string // stdout and stderr of every run, appended
	Starts  int    // how many times it was started
	p       *proc
}

// StartService starts the binary bin with cfg on a free loopback port,
// waits until /healthz answers 200, and kills it at cleanup (printing the
// tail of its log when the test failed). The child's environment has no
// SECKILL_* variable: the flags alone configure it.
func StartService(t testing.TB, bin string, cfg ServiceConfig) *Service {
	t.Helper()
	s := &Service{t: t, bin: bin, LogPath: filepath.Join(t.TempDir(), "service.log")}
	t.Cleanup(func() {
		if s.p != nil {
			if err := s.p.kill(); err != nil {
				t.Errorf("service: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("service log tail (%s):\n%s", s.LogPath, Tail(s.LogPath, 40))
		}
	})
	// A port found free can still be taken before the service binds it;
	// its first start then moves to another (later starts keep the
	// address others were given).
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.Addr = "127.0.0.1:" + strconv.Itoa(port)
		s.URL, s.args = "http://"+s.Addr, cfg.Args(s.Addr)
		err = s.start()
		if err == nil {
			return s
		}
		if try == 3 || !bindConflict(s.LogPath) {
			t.Fatalf("%v\n%s", err, Tail(s.LogPath, 30))
		}
		t.Logf("service: %s was taken before the service bound it; another port", s.Addr)
	}
}

// Start starts the service (again) with the same flags and waits for
// /healthz.
func (s *Service) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("%v\n%s", err, Tail(s.LogPath, 30))
	}
}

func (s *Service) start() error {
	if s.p != nil && s.p.alive() {
		return fmt.Errorf("service %d still running: Kill it first", s.p.pid())
	}
	s.Starts++
	f, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		fmt.Fprintf(f, "=== crash: start #%d: %s %s\n", s.Starts, s.bin, strings.Join(s.args, " "))
		_ = f.Close()
	}
	p, err := startProc(s.bin, s.args, ChildEnv(), s.LogPath)
	if err != nil {
		return err
	}
	s.p = p
	return s.waitHealthy()
}

func (s *Service) waitHealthy() error {
	hc := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(healthBound)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/healthz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return nil
			}
			err = errors.New(resp.Status)
		}
		cancel()
		last = err
		if !s.p.alive() {
			return fmt.Errorf("crash: service exited during startup: %v", s.p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("crash: service not healthy within %v: %v", healthBound, last)
		}
		select {
		case <-s.p.exited:
		case <-time.After(50 * time.Millisecond): // poll interval of the readiness check
		}
	}
}

// PID is the process ID of the running service (0 when it is down).
func (s *Service) PID() int {
	if s.p == nil || !s.p.alive() {
		return 0
	}
	return s.p.pid()
}

// Kill is kill -9 of the service by its PID; it returns once the process
// is gone. Safe to call from any goroutine.
func (s *Service) Kill() error { return s.p.kill() }

// Log returns everything the service wrote so far, every run.
func (s *Service) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}

// CountLog counts the log lines containing substr.
func (s *Service) CountLog(substr string) int {
	n := 0
	for _, l := range strings.Split(s.Log(), "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}
