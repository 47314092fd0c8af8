package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
)

// The PostgreSQL rows of the battery (F5p, F7bp, F7cp) run the chain on
// PostgreSQL (the service's -postgres) instead of MariaDB: the
// partitions on the server of SECKILL_POSTGRES_DSN (a fresh database of
// the run's own), the kill -9 on a private server (initdb into a temp
// directory; the CI one is shared and must not be killed).

func needPostgres() string {
	if os.Getenv("SECKILL_POSTGRES_DSN") == "" {
		return "SECKILL_POSTGRES_DSN not set: the PostgreSQL rows run the chain on PostgreSQL"
	}
	return ""
}

// pgBin finds a PostgreSQL server binary (Debian keeps them under
// /usr/lib/postgresql/N/bin, off PATH).
func pgBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if p := filepath.Join(dirs[i], name); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not installed (PATH, /usr/lib/postgresql/*/bin)", name)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func needPrivatePostgres() string {
	if s := needPostgres(); s != "" {
		return s
	}
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := pgBin(b); err != nil {
			return err.Error() + ": F5p kills a private PostgreSQL server"
		}
	}
	if _, err := exec.LookPath("setpriv"); err != nil && os.Geteuid() == 0 {
		return "setpriv not on PATH: as root, F5p runs initdb and postgres as the postgres user"
	}
	return ""
}

// pgAddr is the host:port of a keyword/value or URL DSN.
func pgAddr(dsn string) (string, error) {
	c, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("parse SECKILL_POSTGRES_DSN: %w", err)
	}
	if strings.HasPrefix(c.Host, "/") {
		return "", fmt.Errorf("SECKILL_POSTGRES_DSN names a socket %q: the fault proxy needs a TCP address", c.Host)
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), nil
}

// pgVia is dsn with its host and port replaced by addr's (the last of a
// keyword wins; keyword/value DSNs only).
func pgVia(dsn, addr string) string {
	h, p, _ := net.SplitHostPort(addr)
	return dsn + " host=" + h + " port=" + p
}

// openPostgresDB opens database name on dsn's server for the checker,
// and drops it (WITH (FORCE): the killed services' sessions may linger)
// at cleanup.
func openPostgresDB(t *testing.T, dsn, name string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(postgres.Open(dsn+" dbname="+name), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("open postgres %s: %v", name, err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
		admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		if err := admin.Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`).Error; err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
		if sqlDB, err := admin.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return db
}

// pgServer is F5p's private PostgreSQL server (fsync on,
// synchronous_commit on), run as the postgres user when the test runs as
// root (initdb and postgres refuse root). kill is kill -9 of the
// postmaster; start starts it again on its data directory (WAL crash
// recovery).
type pgServer struct {
	p    *proc
	addr string
	data string
}

func startPostgres(t *testing.T) (*pgServer, string) {
	t.Helper()
	initdb, err := pgBin("initdb")
	if err != nil {
		t.Skip(err.Error())
	}
	bin, err := pgBin("postgres")
	if err != nil {
		t.Skip(err.Error())
	}
	dir := t.TempDir()
	var as []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user: F5p cannot run initdb")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for d := dir; d != "/" && d != "."; d = filepath.Dir(d) { // postgres must reach its directory
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				_ = os.Chmod(d, fi.Mode().Perm()|0o011)
			}
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		as = []string{"--reuid=postgres", "--regid=postgres", "--init-groups", "--"}
	}
	run := func(b string, args ...string) (string, []string) {
		if as == nil {
			return b, args
		}
		p, _ := exec.LookPath("setpriv")
		return p, append(append(append([]string{}, as...), b), args...)
	}
	data := filepath.Join(dir, "data")
	b, a := run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	if out, err := exec.Command(b, a...).CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port, err := crash.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &pgServer{addr: "127.0.0.1:" + strconv.Itoa(port), data: data}
	b, a = run(bin, "-D", data, "-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+dir, "-c", "fsync=on", "-c", "synchronous_commit=on",
		"-c", "full_page_writes=on", "-c", "max_connections=300")
	s.p = &proc{name: "postgres", bin: b, args: a, logPath: filepath.Join(dir, "postgres.log")}
	t.Cleanup(func() {
		if err := s.kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("postgres log tail:\n%s", crash.Tail(s.p.logPath, 15))
		}
	})
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s, "host=127.0.0.1 port=" + strconv.Itoa(port) + " user=postgres dbname=postgres sslmode=disable"
}

// start starts the postmaster on its data directory and waits (bounded)
// until it accepts sessions. After a kill -9 the old backends may still
// hold the shared memory for a moment: postgres then exits at once, and
// is started again.
func (s *pgServer) start() error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := s.p.start(); err != nil {
			return err
		}
		err := waitPort(s.p, s.addr, 2*time.Minute)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return s.ready(ctx)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // the pause before a bounded restart attempt
	}
}

// ready waits until a session can be opened (recovery done).
func (s *pgServer) ready(ctx context.Context) error {
	for {
		c, err := pgconn.Connect(ctx, "host=127.0.0.1 port="+strings.TrimPrefix(s.addr, "127.0.0.1:")+" user=postgres dbname=postgres sslmode=disable")
		if err == nil {
			return c.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: postgres not accepting sessions: %w", err)
		case <-time.After(100 * time.Millisecond): // poll interval of the readiness check
		}
	}
}

// kill is kill -9 of the postmaster (its backends exit on their own once
// they notice).
func (s *pgServer) kill() error {
	if s.p.alive() {
		_ = s.p.signal(syscall.SIGCONT)
	}
	return s.p.kill()
}
