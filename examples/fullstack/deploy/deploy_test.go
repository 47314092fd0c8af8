// Tests of examples/fullstack/deploy: TestEdge runs nginx (edge.sh) alone
// in front of a recording upstream; TestDeploy brings the whole tier up with
// up.sh (broker, 2 workers, 2 api instances, nginx) on the real Redis and
// MariaDB of the environment, drives the load generator through nginx,
// counts the invariants in SQL and Redis directly, and tears it down with
// down.sh.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/coder/websocket"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/load"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderkafka"
)

// nginxRequestID is the shape of nginx's own $request_id (the service's
// generated IDs look like "1a2b3c-k9").
var nginxRequestID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// needTools skips unless bash and nginx are here and 127.0.0.2 is a local
// address; it returns the nginx binary.
func needTools(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found: the deploy scripts are bash")
	}
	nginx := os.Getenv("EDGE_NGINX")
	if nginx == "" {
		if p, err := exec.LookPath("nginx"); err == nil {
			nginx = p
		}
	}
	for _, p := range []string{"/usr/sbin/nginx", "/sbin/nginx"} {
		if nginx != "" {
			break
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			nginx = p
		}
	}
	if nginx == "" {
		t.Skip("nginx not found (Debian package nginx; EDGE_NGINX=/path overrides the lookup): the edge tier cannot run")
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 is not a local address here (%v): the per-address limits are checked from clients on 127.0.0.2 and 127.0.0.3 (Linux routes 127.0.0.0/8 to lo)", err)
	}
	_ = ln.Close()
	return nginx
}

// script runs one of the deploy scripts with extra environment and returns
// its stdout; its stderr goes to the test log.
func script(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	path, err := filepath.Abs(name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s:\n%s", strings.Join(append([]string{name}, args...), " "), strings.TrimRight(stderr.String(), "\n"))
	}
	return stdout.String(), err
}

// exports reads the "export NAME=VALUE" lines the scripts print.
func exports(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok {
			m[k] = strings.Trim(v, "'") // plain values, single-quoted by up.sh
		}
	}
	return m
}

// proc is a process a script started: its PID file "PID STARTTIME".
type proc struct {
	name  string
	pid   int
	start string
}

func procs(t *testing.T, state string) []proc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(state, "pids", "*.pid"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no PID files in %s (%v)", state, err)
	}
	var out []proc
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fs := strings.Fields(string(b))
		if len(fs) != 2 {
			t.Fatalf("%s: %q, want \"PID STARTTIME\"", f, b)
		}
		pid, err := strconv.Atoi(fs[0])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, proc{name: strings.TrimSuffix(filepath.Base(f), ".pid"), pid: pid, start: fs[1]})
	}
	return out
}

// running reports whether p still runs: its PID exists, is not a zombie and
// has the recorded start time (a reused PID is another process).
func (p proc) running() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		if _, e := os.Stat("/proc/self"); e == nil {
			return false
		}
		pr, err := os.FindProcess(p.pid)
		return err == nil && pr.Signal(syscall.Signal(0)) == nil
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" {
		return false
	}
	return p.start == "-" || f[19] == p.start
}

// listening reports whether something accepts connections on addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip, so the edge sees distinct clients.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 8}}
}

type answer struct {
	code   int
	header http.Header
	body   []byte
}

// status decodes the service's (and the edge's) refusal shape.
func (a answer) status() (string, string) {
	var v struct{ Status, Message string }
	_ = json.Unmarshal(a.body, &v)
	return v.Status, v.Message
}

func do(t *testing.T, c *http.Client, method, url string, hdr map[string]string, body []byte) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: b}
}

// checkEdgeRefusal asserts an answer nginx made itself: the status code,
// JSON in the service's {"status","message"} shape and a request ID.
func checkEdgeRefusal(t *testing.T, a answer, code int, status string) {
	t.Helper()
	if a.code != code {
		t.Fatalf("code %d, want %d (%s)", a.code, code, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if st, msg := a.status(); st != status || msg == "" {
		t.Errorf("body %s: want {\"status\":%q,\"message\":…}", a.body, status)
	}
	if a.header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-ID on the edge's own answer")
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// recorder is the upstream of TestEdge: it records what nginx forwards and
// echoes X-Request-ID as the service does. /api/events/ streams one event,
// then holds the stream open until release is closed.
type recorder struct {
	mu      sync.Mutex
	seen    []http.Header // headers of every request, with X-Test-Path added
	opened  chan struct{} // one value per event stream that reached it
	release chan struct{}
}

func newRecorder() *recorder {
	return &recorder{opened: make(chan struct{}, 16), release: make(chan struct{})}
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := r.Header.Clone()
	h.Set("X-Test-Path", r.URL.Path)
	rc.mu.Lock()
	rc.seen = append(rc.seen, h)
	rc.mu.Unlock()
	w.Header().Set("X-Request-Id", r.Header.Get("X-Request-ID"))
	if strings.HasPrefix(r.URL.Path, "/api/events/") {
		w.Header().Set("Content-Type", "text/event-stream") // no X-Accel-Buffering: the config alone decides
		fmt.Fprint(w, "event: result\ndata: first\n\n")
		w.(http.Flusher).Flush()
		rc.opened <- struct{}{}
		select {
		case <-rc.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "event: result\ndata: last\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"status":"ok"}`)
}

// last returns the headers of the last request for path, and how many
// requests for path matched keep.
func (rc *recorder) find(path string, keep func(http.Header) bool) (http.Header, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var last http.Header
	n := 0
	for _, h := range rc.seen {
		if h.Get("X-Test-Path") == path && (keep == nil || keep(h)) {
			last, n = h, n+1
		}
	}
	return last, n
}

func from(ip string) func(http.Header) bool {
	return func(h http.Header) bool { return h.Get("X-Forwarded-For") == ip }
}

// TestEdge checks the nginx configuration on its own: request IDs, the
// forwarded client address, the JSON 429 of the per-address and global
// limits and of the connection limit, unbuffered event streams, the closed
// demo and metrics paths, and the JSON answers nginx gives for a too large
// body and a dead upstream.
func TestEdge(t *testing.T) {
	nginx := needTools(t)
	rec := newRecorder()
	up := httptest.NewServer(rec)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(rec.release) }) }
	t.Cleanup(func() { release(); up.Close() })

	state := filepath.Join(t.TempDir(), "edge")
	env := []string{"EDGE_NGINX=" + nginx, "EDGE_WORKERS=1",
		// Per minute: a burst is refused whatever the machine's speed.
		"EDGE_PER_IP_RATE=1r/m", "EDGE_PER_IP_BURST=5", "EDGE_PER_IP_CONN=2",
		"EDGE_GLOBAL_RATE=1r/m", "EDGE_GLOBAL_BURST=3",
		"EDGE_UNLIMITED=127.0.0.1", "EDGE_DEMO=0"}
	out, err := script(t, 2*time.Minute, env, "edge.sh", "start", state, strings.TrimPrefix(up.URL, "http://"))
	if err != nil {
		t.Fatalf("edge.sh start: %v", err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(state); err == nil {
			_, _ = script(t, time.Minute, nil, "edge.sh", "stop", state)
		}
	})
	base := exports(out)["SECKILL_EDGE_URL"]
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("edge.sh printed %q, want export SECKILL_EDGE_URL=http://127.0.0.1:PORT", out)
	}
	local := clientFrom("127.0.0.1") // in EDGE_UNLIMITED

	t.Run("request ID", func(t *testing.T) {
		id := "edge-" + randHex(4) + ".a:b"
		a := do(t, local, "GET", base+"/api/activity", map[string]string{"X-Request-ID": id}, nil)
		seen, _ := rec.find("/api/activity", nil)
		if a.code != 200 || seen.Get("X-Request-ID") != id || a.header.Get("X-Request-Id") != id {
			t.Errorf("sent %q: upstream got %q, client got %q (code %d)", id, seen.Get("X-Request-ID"), a.header.Get("X-Request-Id"), a.code)
		}
		for _, bad := range []string{"", "two words", strings.Repeat("x", 65)} {
			a = do(t, local, "GET", base+"/api/activity", map[string]string{"X-Request-ID": bad}, nil)
			seen, _ = rec.find("/api/activity", nil)
			got := seen.Get("X-Request-ID")
			if !nginxRequestID.MatchString(got) || a.header.Get("X-Request-Id") != got {
				t.Errorf("sent %q: upstream got %q, client got %q; want nginx's own 32-hex ID on both", bad, got, a.header.Get("X-Request-Id"))
			}
		}
	})

	t.Run("forwarded for", func(t *testing.T) {
		do(t, local, "GET", base+"/api/activity?spoof", map[string]string{"X-Forwarded-For": "6.6.6.6", "X-Real-IP": "6.6.6.6"}, nil)
		seen, _ := rec.find("/api/activity", nil)
		if xff := seen.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != "127.0.0.1" || seen.Get("X-Real-IP") != "127.0.0.1" {
			t.Errorf("client 127.0.0.1 claiming 6.6.6.6: upstream got X-Forwarded-For %q, X-Real-IP %q; want the peer alone", xff, seen.Get("X-Real-IP"))
		}
		do(t, clientFrom("127.0.0.5"), "GET", base+"/api/activity", nil, nil)
		if _, n := rec.find("/api/activity", from("127.0.0.5")); n != 1 {
			t.Errorf("a request from 127.0.0.5 reached the upstream %d times with X-Forwarded-For 127.0.0.5, want 1", n)
		}
	})

	t.Run("per-address limit", func(t *testing.T) {
		c := clientFrom("127.0.0.2")
		passed, limited := 0, 0
		t0 := time.Now()
		for i := range 20 {
			id := "burst-" + strconv.Itoa(i)
			a := do(t, c, "GET", base+"/api/activity", map[string]string{"X-Request-ID": id}, nil)
			switch a.code {
			case 200:
				passed++
			case 429:
				if limited == 0 {
					checkEdgeRefusal(t, a, 429, "limited")
					if got := a.header.Get("X-Request-Id"); got != id {
						t.Errorf("429 carries X-Request-ID %q, want the client's %q", got, id)
					}
				}
				limited++
			default:
				t.Fatalf("code %d: %s", a.code, a.body)
			}
		}
		_, reached := rec.find("/api/activity", from("127.0.0.2"))
		// 1 + burst 5 pass at once, one more per minute.
		if limited == 0 || passed > 6+int(time.Since(t0)/time.Minute) || reached != passed {
			t.Errorf("20 requests from one address: %d passed (upstream saw %d), %d limited; want at most 1+burst passed and the rest refused by nginx", passed, reached, limited)
		}
		if a := do(t, local, "GET", base+"/api/activity", nil, nil); a.code != 200 {
			t.Errorf("another address is refused too: %d %s", a.code, a.body)
		}
	})

	t.Run("global limit on buys", func(t *testing.T) {
		passed, limited := 0, 0
		for range 10 {
			a := do(t, local, "POST", base+"/api/buy/1/sig", nil, []byte(`{}`))
			switch a.code {
			case 200:
				passed++
			case 429:
				checkEdgeRefusal(t, a, 429, "limited")
				limited++
			default:
				t.Fatalf("code %d: %s", a.code, a.body)
			}
		}
		_, reached := rec.find("/api/buy/1/sig", nil)
		if limited == 0 || reached != passed {
			t.Errorf("10 buys from an unlimited address: %d passed (upstream saw %d), %d limited; the global zone must refuse past its burst", passed, reached, limited)
		}
		if a := do(t, local, "GET", base+"/api/activity", nil, nil); a.code != 200 {
			t.Errorf("the global buy zone limits other paths: %d %s", a.code, a.body)
		}
	})

	t.Run("connection limit and unbuffered streams", func(t *testing.T) {
		c := clientFrom("127.0.0.3")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		type stream struct {
			resp *http.Response
			rd   *bufio.Reader
		}
		var streams []stream
		for i := range 2 { // EDGE_PER_IP_CONN
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/events/r"+strconv.Itoa(i), nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			s := stream{resp, bufio.NewReader(resp.Body)}
			// The first event arrives while the upstream holds the
			// response open: nginx passes events as they come.
			if ev := readEvent(t, s.rd); ev != "first" {
				t.Fatalf("stream %d: first event %q", i, ev)
			}
			streams = append(streams, s)
		}
		for range streams {
			select {
			case <-rec.opened:
			case <-ctx.Done():
				t.Fatal("the upstream never saw the streams")
			}
		}
		a := do(t, c, "GET", base+"/api/activity", nil, nil)
		checkEdgeRefusal(t, a, 429, "limited")
		release()
		for i, s := range streams {
			if ev := readEvent(t, s.rd); ev != "last" {
				t.Errorf("stream %d: last event %q", i, ev)
			}
		}
	})

	t.Run("closed paths", func(t *testing.T) {
		a := do(t, local, "GET", base+"/api/demo/invariants", nil, nil)
		checkEdgeRefusal(t, a, 404, "not_found")
		a = do(t, local, "GET", base+"/metrics", nil, nil)
		checkEdgeRefusal(t, a, 404, "not_found")
		if _, n := rec.find("/api/demo/invariants", nil); n != 0 {
			t.Errorf("/api/demo/ reached the upstream %d times without EDGE_DEMO", n)
		}
		if _, n := rec.find("/metrics", nil); n != 0 {
			t.Errorf("/metrics reached the upstream %d times", n)
		}
		a = do(t, local, "POST", base+"/api/pay", nil, bytes.Repeat([]byte("x"), 20000))
		checkEdgeRefusal(t, a, 413, "bad_request")
	})

	t.Run("dead upstream", func(t *testing.T) {
		release()
		up.Close()
		a := do(t, local, "GET", base+"/api/activity", nil, nil)
		checkEdgeRefusal(t, a, 503, "busy")
	})

	ps := procs(t, state)
	addr := strings.TrimPrefix(base, "http://")
	if _, err := script(t, time.Minute, nil, "edge.sh", "stop", state); err != nil {
		t.Fatalf("edge.sh stop: %v", err)
	}
	for _, p := range ps {
		if p.running() {
			t.Errorf("%s (pid %d) still runs after edge.sh stop", p.name, p.pid)
		}
	}
	if listening(addr) {
		t.Errorf("%s still accepts connections after edge.sh stop", addr)
	}
}

// readEvent returns the data of the next Server-Sent Event.
func readEvent(t *testing.T, rd *bufio.Reader) string {
	t.Helper()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			return v
		}
	}
}

// deployment is what TestDeploy brought up.
type deployment struct {
	edge    string   // http://127.0.0.1:PORT
	apis    []string // host:port of each api instance
	brokers []string
	state   string
	db      string
	prefix  string
	metrics string // the instances' metrics token (SECKILL_METRICS_TOKEN)
}

// TestDeploy brings up broker, 2 workers, 2 api instances and nginx with
// up.sh, then checks through the edge and in the stores: request IDs pass
// through, nginx answers a burst from one address with its JSON 429, the
// two workers share one consumer group and both get partitions, a load of
// 3,000 users against 50 units through nginx leaves sold = stock with no
// oversell, no user twice and every unit accounted for (counted in SQL and
// Redis, not asked of the service), both api instances refused buyers
// in-process after the sell-out, and a valid buy sent straight to either
// afterwards is refused as sold out. down.sh --purge must leave nothing
// running and no data.
func TestDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestDeploy builds and starts six processes")
	}
	nginx := needTools(t)
	dsn := os.Getenv("SECKILL_MYSQL_DSN")
	cluster := os.Getenv("SECKILL_REDIS_CLUSTER_ADDRS")
	standalone := os.Getenv("SECKILL_REDIS_ADDR")
	if dsn == "" || (cluster == "" && standalone == "") {
		t.Skip("SECKILL_MYSQL_DSN and SECKILL_REDIS_CLUSTER_ADDRS (or SECKILL_REDIS_ADDR) must be set: the tier shares a real database and Redis (bash .ci/services start prints them)")
	}
	if _, err := exec.LookPath("go"); err != nil && os.Getenv("DEPLOY_BIN") == "" {
		t.Skip("go not on PATH and no DEPLOY_BIN: up.sh builds the service")
	}
	// down.sh --purge drops the data with the mariadb/mysql client and
	// redis-cli; without them the test drops it itself.
	purge := true
	for _, tools := range [][]string{{"mariadb", "mysql"}, {"redis-cli"}} {
		found := false
		for _, tool := range tools {
			if _, err := exec.LookPath(tool); err == nil {
				found = true
			}
		}
		if !found {
			t.Logf("%s not found: down.sh runs without --purge; the test drops the data itself", strings.Join(tools, " or "))
			purge = false
		}
	}
	downArgs := []string{"--purge"}
	if !purge {
		downArgs = nil
	}
	const (
		stock   = 50
		users   = 3000
		workers = 2
	)
	d := deployment{db: "seckill_deploy_t" + randHex(4), prefix: "dept" + randHex(4) + ":", state: filepath.Join(t.TempDir(), "state")}
	rdb := redisClient(t, cluster, standalone)
	admin := openMySQL(t, dsn, "")
	t.Cleanup(func() {
		// Whatever happened above: stop what runs, drop the data.
		if _, err := os.Stat(d.state); err == nil {
			_, _ = script(t, 3*time.Minute, nil, "down.sh", append(downArgs, d.state)...)
		}
		_, _ = admin.Exec("DROP DATABASE IF EXISTS `" + d.db + "`")
		deleteKeys(rdb, d.prefix)
	})

	env := []string{"EDGE_NGINX=" + nginx, "DEPLOY_STATE=" + d.state, "DEPLOY_DB=" + d.db, "DEPLOY_PREFIX=" + d.prefix,
		"DEPLOY_APIS=2", "DEPLOY_WORKERS=" + strconv.Itoa(workers), "DEPLOY_DEMO=1",
		"DEPLOY_STOCK=" + strconv.Itoa(stock), "DEPLOY_USERS=" + strconv.Itoa(users+2), // + the probes
		"DEPLOY_START_IN=20s", "DEPLOY_PATH_LEAD=10m",
		// The load generator is one address: exempt it; everyone else
		// gets a small per-minute budget, so a burst is refused whatever
		// the machine's speed.
		"EDGE_UNLIMITED=127.0.0.1", "EDGE_PER_IP_RATE=1r/m", "EDGE_PER_IP_BURST=5"}
	out, err := script(t, 10*time.Minute, env, "up.sh")
	if err != nil {
		t.Fatalf("up.sh: %v", err)
	}
	ex := exports(out)
	d.edge = ex["SECKILL_EDGE_URL"]
	d.apis = strings.Split(ex["SECKILL_DEPLOY_APIS"], ",")
	d.brokers = strings.Split(ex["SECKILL_DEPLOY_BROKERS"], ",")
	d.metrics = ex["SECKILL_METRICS_TOKEN"]
	if len(d.metrics) < 16 {
		t.Fatalf("up.sh exported no metrics token:\n%s", out)
	}
	if d.edge == "" || len(d.apis) != 2 || len(d.brokers) != 3 || ex["SECKILL_DEPLOY_DB"] != d.db || ex["SECKILL_DEPLOY_PREFIX"] != d.prefix {
		t.Fatalf("up.sh printed:\n%s\nwant the edge URL, 2 api addresses, 3 brokers, the database and the prefix", out)
	}
	ps := procs(t, d.state)
	if len(ps) != 1+workers+2+1 {
		t.Fatalf("up.sh recorded %d processes (%v), want broker + %d workers + 2 api + nginx", len(ps), ps, workers)
	}
	for _, p := range ps {
		if !p.running() {
			t.Fatalf("%s (pid %d) is not running after up.sh", p.name, p.pid)
		}
	}
	local := clientFrom("127.0.0.1")
	// One buyer per instance, outside the load's users, holding an access
	// token and the signed path from before the sale (the pool is empty
	// after it), for a valid attempt after the sell-out.
	probes := make([]*probe, len(d.apis))
	for i := range probes {
		probes[i] = newProbe(t, local, d.edge, "user"+strconv.Itoa(users+1+i))
	}

	t.Run("request ID through nginx and the service", func(t *testing.T) {
		id := "deploy-" + randHex(6)
		a := do(t, local, "GET", d.edge+"/api/activity", map[string]string{"X-Request-ID": id}, nil)
		if a.code != 200 || a.header.Get("X-Request-Id") != id {
			t.Errorf("sent X-Request-ID %q, got %q (code %d)", id, a.header.Get("X-Request-Id"), a.code)
		}
		if vs := a.header.Values("X-Request-Id"); len(vs) != 1 {
			t.Errorf("X-Request-ID appears %d times: %q", len(vs), vs)
		}
		// An ID the edge will not forward is replaced by nginx's own, which
		// the service then uses (its own IDs have another shape).
		a = do(t, local, "GET", d.edge+"/api/activity", map[string]string{"X-Request-ID": "not sane"}, nil)
		if got := a.header.Get("X-Request-Id"); !nginxRequestID.MatchString(got) {
			t.Errorf("for an unusable client ID the service answered X-Request-ID %q, want nginx's 32-hex ID", got)
		}
	})

	t.Run("nginx's JSON 429 for a burst from one address", func(t *testing.T) {
		// GET /api/activity: the service never rate-limits it, so every 429
		// here is the edge's.
		c := clientFrom("127.0.0.2")
		limited := 0
		for range 15 {
			a := do(t, c, "GET", d.edge+"/api/activity", nil, nil)
			if a.code == 429 {
				if limited == 0 {
					checkEdgeRefusal(t, a, 429, "limited")
				}
				limited++
			} else if a.code != 200 {
				t.Fatalf("code %d: %s", a.code, a.body)
			}
		}
		if limited == 0 {
			t.Error("15 requests from one address within a 1/minute budget with burst 5: none refused")
		}
	})

	t.Run("one consumer group, partitions on both workers", func(t *testing.T) {
		checkConsumerGroup(t, d.brokers, workers)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := load.Run(ctx, load.Config{Target: d.edge, Users: users, Concurrency: 64, Drain: 3 * time.Minute})
	if err != nil {
		t.Fatalf("load through nginx: %v", err)
	}
	t.Logf("load through nginx:\n%s", rep)
	for _, v := range rep.Violations {
		t.Errorf("load generator: %s", v)
	}

	t.Run("invariants counted in SQL and Redis", func(t *testing.T) {
		checkStores(t, openMySQL(t, dsn, d.db), rdb, d.prefix, stock)
	})

	t.Run("both instances refuse in-process after the sell-out", func(t *testing.T) {
		for i, api := range d.apis {
			// During the sale: buyers refused by this instance's own flag,
			// without a Redis call.
			local := metric(t, d.metrics, api, `seckill_reserve_total{status="sold_out_local"}`)
			remote := metric(t, d.metrics, api, `seckill_reserve_total{status="sold out"}`)
			t.Logf("%s: %v buyers refused in-process, %v sold-out answers from Redis", api, local, remote)
			if local == 0 {
				t.Errorf("%s refused no buyer in-process after the sell-out", api)
			}
			// After it: a complete, valid attempt sent straight to this
			// instance reaches the stock check (its in-process flag, or
			// Redis once the flag's re-check interval has passed) and is
			// refused as sold out.
			a := probes[i].buy(t, d.edge, api)
			if st, _ := a.status(); a.code != http.StatusConflict || st != "sold_out" {
				t.Errorf("%s: a valid buy after the sell-out answered %d %s, want 409 sold_out", api, a.code, a.body)
			}
			local2 := metric(t, d.metrics, api, `seckill_reserve_total{status="sold_out_local"}`)
			remote2 := metric(t, d.metrics, api, `seckill_reserve_total{status="sold out"}`)
			if (local2-local)+(remote2-remote) != 1 {
				t.Errorf("%s: sold-out refusals in-process %v → %v, from Redis %v → %v; want one more in all", api, local, local2, remote, remote2)
			}
		}
	})

	t.Run("result push over WebSocket through the edge", func(t *testing.T) {
		a := do(t, probes[0].c, "POST", d.edge+"/api/events/r-edge/ticket", map[string]string{"Authorization": probes[0].bearer}, nil)
		var tk struct{ Ticket string }
		if err := json.Unmarshal(a.body, &tk); err != nil || a.code != 200 || tk.Ticket == "" {
			t.Fatalf("ticket through the edge: %d %s", a.code, a.body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.edge, "http")+"/api/ws/r-edge?ticket="+url.QueryEscape(tk.Ticket), nil)
		if err != nil {
			t.Fatalf("WebSocket through nginx: %v", err)
		}
		defer c.CloseNow()
		_, msg, err := c.Read(ctx)
		var v map[string]any
		if err != nil || json.Unmarshal(msg, &v) != nil || v["reservation"] != "r-edge" {
			t.Errorf("first message through nginx: %q %v", msg, err)
		}
	})

	// down.sh: nothing left running, no listener, no state, no data.
	if _, err := script(t, 3*time.Minute, nil, "down.sh", append(downArgs, d.state)...); err != nil {
		t.Fatalf("down.sh %v: %v", downArgs, err)
	}
	for _, p := range ps {
		if p.running() {
			t.Errorf("%s (pid %d) still runs after down.sh", p.name, p.pid)
		}
	}
	for _, addr := range append(append([]string{strings.TrimPrefix(d.edge, "http://")}, d.apis...), d.brokers...) {
		if listening(addr) {
			t.Errorf("%s still accepts connections after down.sh", addr)
		}
	}
	if _, err := os.Stat(d.state); !os.IsNotExist(err) {
		t.Errorf("state directory %s still there after down.sh (%v)", d.state, err)
	}
	if !purge {
		return
	}
	var name string
	if err := admin.QueryRow("SELECT schema_name FROM information_schema.schemata WHERE schema_name = ?", d.db).Scan(&name); err != sql.ErrNoRows {
		t.Errorf("database %s still there after down.sh --purge (%v)", d.db, err)
	}
	if keys := scanKeys(t, rdb, d.prefix); len(keys) > 0 {
		t.Errorf("%d keys under %s left after down.sh --purge, e.g. %s", len(keys), d.prefix, keys[0])
	}
}

// probe is one buyer's attempt prepared by hand, as the page does it.
type probe struct {
	c             *http.Client
	bearer, token string
	path          string
}

func newProbe(t *testing.T, c *http.Client, edge, user string) *probe {
	t.Helper()
	p := &probe{c: c}
	var v struct{ Token, Path string }
	a := do(t, c, "POST", edge+"/api/login", map[string]string{"Content-Type": "application/json"}, []byte(`{"username":"`+user+`"}`))
	if err := json.Unmarshal(a.body, &v); err != nil || v.Token == "" {
		t.Fatalf("login %s: %d %s", user, a.code, a.body)
	}
	p.bearer = "Bearer " + v.Token
	v = struct{ Token, Path string }{}
	a = do(t, c, "POST", edge+"/api/activity/token", map[string]string{"Authorization": p.bearer, "Content-Type": "application/json"}, []byte(`{}`))
	if err := json.Unmarshal(a.body, &v); err != nil || a.code != 200 || v.Token == "" || v.Path == "" {
		t.Fatalf("access token for %s: %d %s", user, a.code, a.body)
	}
	p.token, p.path = v.Token, v.Path
	return p
}

// buy gets a captcha (its answer through the demo hook) through the edge and
// sends the buy straight to the instance at api.
func (p *probe) buy(t *testing.T, edge, api string) answer {
	t.Helper()
	var ch struct {
		ID         string `json:"id"`
		DemoAnswer string `json:"demo_answer"`
	}
	a := do(t, p.c, "GET", edge+"/api/captcha?image=none", map[string]string{"Authorization": p.bearer}, nil)
	if err := json.Unmarshal(a.body, &ch); err != nil || ch.ID == "" || ch.DemoAnswer == "" {
		t.Fatalf("captcha: %d %s", a.code, a.body)
	}
	body, _ := json.Marshal(map[string]string{"token": p.token, "captcha_id": ch.ID, "captcha": ch.DemoAnswer, "request_id": "probe-" + randHex(6)})
	return do(t, p.c, "POST", "http://"+api+p.path, map[string]string{"Authorization": p.bearer, "Content-Type": "application/json"}, body)
}

// checkConsumerGroup waits (bounded) until the broker reports exactly one
// consumer group, stable, with one member per worker, each holding at least
// one partition, no partition twice and every partition assigned.
func checkConsumerGroup(t *testing.T, brokers []string, workers int) {
	t.Helper()
	cfg := orderkafka.SaramaConfig()
	cfg.ClientID = "deploy-test"
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatalf("cluster admin: %v", err)
	}
	defer admin.Close()
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for {
		ok, state := groupAssigned(admin, workers)
		if ok {
			t.Log(state)
			return
		}
		if state != last {
			t.Log(state)
			last = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer group did not settle with %d members holding partitions: %s", workers, state)
		}
		time.Sleep(200 * time.Millisecond) // polling the broker's view, bounded by deadline
	}
}

func groupAssigned(admin sarama.ClusterAdmin, workers int) (bool, string) {
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		return false, "list groups: " + err.Error()
	}
	if len(groups) != 1 {
		return false, fmt.Sprintf("groups %v, want exactly one", groups)
	}
	var name string
	for g := range groups {
		name = g
	}
	descs, err := admin.DescribeConsumerGroups([]string{name})
	if err != nil || len(descs) != 1 {
		return false, fmt.Sprintf("describe %s: %v", name, err)
	}
	g := descs[0]
	if g.State != "Stable" || len(g.Members) != workers {
		return false, fmt.Sprintf("group %s: state %s, %d members", name, g.State, len(g.Members))
	}
	owned := map[string]map[int32]string{} // topic → partition → member
	var report []string
	for id, m := range g.Members {
		as, err := m.GetMemberAssignment()
		if err != nil || as == nil {
			return false, fmt.Sprintf("member %s: no assignment (%v)", id, err)
		}
		n := 0
		for topic, parts := range as.Topics {
			if owned[topic] == nil {
				owned[topic] = map[int32]string{}
			}
			for _, p := range parts {
				if other, dup := owned[topic][p]; dup {
					return false, fmt.Sprintf("%s/%d assigned to %s and %s", topic, p, other, id)
				}
				owned[topic][p] = id
				n++
			}
		}
		if n == 0 {
			return false, fmt.Sprintf("group %s: member %s (%s) holds no partition", name, id, m.ClientHost)
		}
		report = append(report, fmt.Sprintf("%s: %v", m.ClientId, as.Topics))
	}
	for topic, parts := range owned {
		md, err := admin.DescribeTopics([]string{topic})
		if err != nil || len(md) != 1 {
			return false, fmt.Sprintf("describe topic %s: %v", topic, err)
		}
		if len(parts) != len(md[0].Partitions) {
			return false, fmt.Sprintf("%s: %d of %d partitions assigned", topic, len(parts), len(md[0].Partitions))
		}
	}
	sort.Strings(report)
	return true, fmt.Sprintf("group %s stable, %d members: %s", name, len(g.Members), strings.Join(report, "; "))
}

// metric reads one sample of the instance's /metrics (0 when absent) with
// the metrics token; without it the instance must refuse.
func metric(t *testing.T, token, addr, series string) float64 {
	t.Helper()
	if a := do(t, http.DefaultClient, "GET", "http://"+addr+"/metrics", nil, nil); a.code != 401 {
		t.Fatalf("%s/metrics without the token: %d, want 401", addr, a.code)
	}
	a := do(t, http.DefaultClient, "GET", "http://"+addr+"/metrics", map[string]string{"Authorization": "Bearer " + token}, nil)
	if a.code != 200 {
		t.Fatalf("%s/metrics: %d", addr, a.code)
	}
	for _, line := range strings.Split(string(a.body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", addr, line, err)
			}
			return f
		}
	}
	return 0
}

func redisClient(t *testing.T, cluster, standalone string) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if cluster != "" { // as up.sh: the Cluster wins
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cluster, ",")})
	} else {
		c = redis.NewClient(&redis.Options{Addr: standalone})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// scanKeys lists every key under prefix (on every master of a Cluster).
func scanKeys(t *testing.T, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, n redis.UniversalClient) error {
		it := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatalf("scan %s*: %v", prefix, err)
	}
	return keys
}

func deleteKeys(c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := func(ctx context.Context, n redis.UniversalClient) error {
		it := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			n.Del(ctx, it.Val())
		}
		return it.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
		return
	}
	_ = del(ctx, c)
}

// openMySQL opens database db ("" = none) on the server of dsn.
func openMySQL(t *testing.T, dsn, db string) *sql.DB {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("SECKILL_MYSQL_DSN: %v", err)
	}
	cfg.DBName = db
	c, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// checkStores counts the invariants straight from the tables and the stock's
// Redis hashes (layout in stock/keys.go: "<prefix>{a:1}:meta" holds stock,
// ":buyers" user → held units, ":resv" request ID → "user:qty:state:atMs",
// state R = held).
func checkStores(t *testing.T, db *sql.DB, rdb redis.UniversalClient, prefix string, stock int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const activity = 1
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var total, dbStock int64
	if err := tx.QueryRowContext(ctx, "SELECT total_stock, stock FROM seckill_activity WHERE id = ?", activity).Scan(&total, &dbStock); err != nil {
		t.Fatalf("activity: %v", err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT reservation_id, user_id, qty FROM seckill_order WHERE activity_id = ? AND status IN (?, ?)",
		activity, order.OrderCreated, order.OrderPaid)
	if err != nil {
		t.Fatalf("orders: %v", err)
	}
	liveResv := map[string]bool{}
	perUser := map[int64]int64{}
	var live int64
	for rows.Next() {
		var resv string
		var user, qty int64
		if err := rows.Scan(&resv, &user, &qty); err != nil {
			t.Fatal(err)
		}
		liveResv[resv] = true
		perUser[user] += qty
		live += qty
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var pending int64
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_message WHERE status = 'PENDING'").Scan(&pending); err != nil {
		t.Fatalf("outbox: %v", err)
	}

	tag := prefix + "{a:" + strconv.Itoa(activity) + "}:"
	meta, err := rdb.HGetAll(ctx, tag+"meta").Result()
	if err != nil {
		t.Fatal(err)
	}
	remaining, err := strconv.ParseInt(meta["stock"], 10, 64)
	if err != nil {
		t.Fatalf("redis %smeta stock = %q: %v", tag, meta["stock"], err)
	}
	ledger, err := rdb.HGetAll(ctx, tag+"resv").Result()
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	var heldUnits int64
	for id, v := range ledger {
		f := strings.Split(v, ":")
		if len(f) < 4 {
			t.Fatalf("ledger %s = %q", id, v)
		}
		if f[2] == "R" {
			q, _ := strconv.ParseInt(f[1], 10, 64)
			held[id] = q
			heldUnits += q
		}
	}
	buyers, err := rdb.HGetAll(ctx, tag+"buyers").Result()
	if err != nil {
		t.Fatal(err)
	}

	t.Logf("DB: total %d, stock %d, live units %d for %d users, outbox pending %d; Redis: remaining %d, held %d in %d reservations, %d buyers",
		total, dbStock, live, len(perUser), pending, remaining, heldUnits, len(held), len(buyers))
	if total != stock {
		t.Errorf("activity total %d, want %d", total, stock)
	}
	if live != total {
		t.Errorf("sold %d, want = stock %d (3,000 users wanted one each)", live, total)
	}
	if dbStock < 0 || remaining < 0 || live > total {
		t.Errorf("oversell: DB stock %d, Redis remaining %d, sold %d of %d", dbStock, remaining, live, total)
	}
	for u, n := range perUser {
		if n > 1 {
			t.Errorf("user %d holds %d units in the DB", u, n)
		}
	}
	for u, v := range buyers {
		if v != "0" && v != "1" {
			t.Errorf("user %s holds %s units in Redis", u, v)
		}
	}
	if dbStock+live != total {
		t.Errorf("DB: stock %d + live %d != total %d", dbStock, live, total)
	}
	if remaining+heldUnits != total {
		t.Errorf("Redis: remaining %d + held %d != total %d", remaining, heldUnits, total)
	}
	if pending != 0 {
		t.Errorf("%d outbox rows still pending", pending)
	}
	for id := range held {
		if !liveResv[id] {
			t.Errorf("Redis holds reservation %s with no live order", id)
		}
	}
	for id := range liveResv {
		if _, ok := held[id]; !ok {
			t.Errorf("live order of reservation %s not held in Redis", id)
		}
	}
}
