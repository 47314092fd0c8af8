package crash

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

// ErrNoPort is returned by [FreePort] when no usable port was found.
var ErrNoPort = errors.New("crash: no free loopback port")

// FreePort returns a loopback TCP port that was free a moment ago, below
// the kernel's ephemeral range, never one of the shared servers' and never
// given before to this process ([testenv.FreePort]).
func FreePort() (int, error) {
	p, err := testenv.FreePort()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoPort, err)
	}
	return p, nil
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
