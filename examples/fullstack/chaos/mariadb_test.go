package chaos

import (
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// mariaDB is F5's private MariaDB server: the CI MariaDB is shared by
// every test tier and must not be killed, so F5 bootstraps its own
// (mariadb-install-db into a temp datadir, about 2 s) and runs mariadbd on
// a free loopback port with its own socket and pid file,
// innodb_flush_log_at_trx_commit=1 and --skip-grant-tables (root, no
// password). kill is kill -9 by its PID; start starts it again on the same
// datadir (InnoDB crash recovery).
type mariaDB struct {
	p    *proc
	addr string
}

// sbinLook finds a MariaDB binary on PATH or in /usr/sbin (not on every
// user's PATH).
func sbinLook(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return exec.LookPath(filepath.Join("/usr/sbin", name))
}

// startMariaDB bootstraps and starts the private server (stopped at
// cleanup) and returns its DSN; it skips the test when mariadbd or
// mariadb-install-db is not installed.
func startMariaDB(t *testing.T) (*mariaDB, string) {
	t.Helper()
	bin, err := sbinLook("mariadbd")
	if err != nil {
		t.Skip("mariadbd not installed (PATH, /usr/sbin): F5 kills a private MariaDB server")
	}
	install, err := sbinLook("mariadb-install-db")
	if err != nil {
		t.Skip("mariadb-install-db not installed: F5 bootstraps a private MariaDB server")
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user="+u.Username,
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port, err := crash.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &mariaDB{addr: "127.0.0.1:" + strconv.Itoa(port)}
	m.p = &proc{name: "mariadbd", bin: bin, logPath: filepath.Join(dir, "mariadbd.log"), args: []string{
		"--no-defaults", "--datadir=" + data, "--user=" + u.Username,
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "mariadbd.sock"), "--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin",
		"--innodb-flush-log-at-trx-commit=1", "--innodb-buffer-pool-size=64M", "--max-connections=1000"}}
	t.Cleanup(func() {
		if err := m.p.kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("mariadbd log tail:\n%s", crash.Tail(m.p.logPath, 15))
		}
	})
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
	return m, "root@tcp(" + m.addr + ")/?parseTime=true&interpolateParams=true&loc=UTC"
}

// start starts mariadbd on its datadir and waits (bounded) until it
// accepts connections.
func (m *mariaDB) start() error {
	if err := m.p.start(); err != nil {
		return err
	}
	return waitPort(m.p, m.addr, 2*time.Minute)
}

// kill is kill -9 of mariadbd by its PID.
func (m *mariaDB) kill() error { return m.p.kill() }
