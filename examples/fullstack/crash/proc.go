package crash

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoPort is returned by [FreePort] when no usable port was found.
var ErrNoPort = errors.New("crash: no free loopback port")

// sharedPorts are the ports of the servers other test tiers share on this
// machine (.ci/services' defaults: Redis, the Redis Cluster and its bus,
// MariaDB, PostgreSQL): never used here.
var sharedPorts = map[int]bool{16379: true, 17001: true, 17002: true, 17003: true,
	27001: true, 27002: true, 27003: true, 13306: true, 15432: true}

// lowestPort is the bottom of the range FreePort draws from (its top is
// the kernel's ephemeral range).
const lowestPort = 10000

var ports struct {
	once   sync.Once
	top    int          // first port of the ephemeral range
	handed map[int]bool // every port this process was given
	mu     sync.Mutex
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

// FreePort returns a loopback TCP port that was free a moment ago, is not
// one of the shared servers' ports, and was not given before to this
// process. It is drawn at random below the kernel's ephemeral range: the
// source ports of outgoing connections (thousands, under load) come from
// that range, so a port found free there could be taken by one before the
// server given it binds it ("bind: address already in use": the fault
// battery met it in CI). Only when that range leaves fewer than 1,000
// ports below it does FreePort ask the kernel for one (port 0).
func FreePort() (int, error) {
	ports.once.Do(func() {
		ports.top = ephemeralLow()
		ports.handed = map[int]bool{}
	})
	ports.mu.Lock()
	defer ports.mu.Unlock()
	for i := 0; i < 200; i++ {
		port := 0
		if ports.top-lowestPort >= 1000 {
			port = lowestPort + rand.IntN(ports.top-lowestPort)
			if sharedPorts[port] || ports.handed[port] {
				continue
			}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			if port == 0 {
				return 0, fmt.Errorf("%w: %v", ErrNoPort, err)
			}
			continue // in use
		}
		port = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !sharedPorts[port] && !ports.handed[port] {
			ports.handed[port] = true
			return port, nil
		}
	}
	return 0, ErrNoPort
}

// bindConflict reports whether the log at path says, after its last
// "=== crash: start" line, that the service could not bind its address.
func bindConflict(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	if i := bytes.LastIndex(b, []byte("=== crash: start")); i >= 0 {
		b = b[i:]
	}
	return bytes.Contains(b, []byte("address already in use"))
}

// proc is one child process whose output goes to a log file.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, valid after exited
}

// startProc starts bin with args and env, appending its stdout and stderr
// to logPath.
func startProc(bin string, args, env []string, logPath string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("crash: start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	return p, nil
}

// pid is the process ID.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// alive reports whether the process has not exited yet.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process (kill -9 by PID) and reaps it.
func (p *proc) kill() error {
	if !p.alive() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("crash: kill -9 %d: %w", p.pid(), err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second): // SIGKILL cannot be ignored: this is a bound, not a wait
		return fmt.Errorf("crash: process %d did not exit after SIGKILL", p.pid())
	}
}

// ChildEnv is this process's environment without the service's own
// variables (SECKILL_*), so a child is configured by its flags alone.
func ChildEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			out = append(out, kv)
		}
	}
	return out
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
