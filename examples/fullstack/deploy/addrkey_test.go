package deploy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

// TestEdgeAddressKeyIPv6Per64 runs the edge's address-key map (the block
// of nginx.conf.tmpl between the edge-addr-key markers) in a real nginx,
// fed client addresses through the realip module, and counts the keys:
// every address of one IPv6 /64 maps to at most a few keys, addresses of
// different /64s never share one, IPv4 addresses keep one each. (The
// per-address limits keyed IPv6 clients by /128: one host with a /64 could
// spread its requests over 2^64 keys.)
func TestEdgeAddressKeyIPv6Per64(t *testing.T) {
	nginx := needTools(t)
	tmpl, err := os.ReadFile("nginx.conf.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)# edge-addr-key:begin\n(.*?)# edge-addr-key:end`).FindSubmatch(tmpl)
	if block == nil {
		t.Fatal("nginx.conf.tmpl: no edge-addr-key block")
	}
	dir := t.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, d := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/tmp; proxy_temp_path %[1]s/tmp; fastcgi_temp_path %[1]s/tmp; uwsgi_temp_path %[1]s/tmp; scgi_temp_path %[1]s/tmp;
%[2]s
    server {
        listen %[3]s;
        set_real_ip_from 127.0.0.1;
        real_ip_header X-Real-IP;
        location / { return 200 "$edge_addr_key"; }
    }
}
`, dir, block[1], addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nginx, "-p", dir, "-c", confPath)
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // never SIGKILL: its workers would stay
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // SIGTERM: the master stops its workers (SIGKILL would leave them running)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})

	key := func(ip string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Header.Set("X-Real-IP", ip)
		for try := 0; ; try++ { // nginx starting: its port is all there is to wait on
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return string(b)
			}
			if try == 200 {
				t.Fatalf("nginx at %s: %v", addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// One /64, many interface IDs and textual shapes (nginx prints the
	// canonical form, whatever the header's spelling).
	per64 := map[string][]string{
		"2001:db8:1:2": {"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2:0:0:0:5", "2001:0db8:0001:0002:a:b:c:d"},
		"2001:db8::":   {"2001:db8::1", "2001:db8:0:0:1::", "2001:db8::1:2:3:4", "2001:db8:0:0:ffff::1", "2001:db8::abcd:0:0:1"},
		"fd00::":       {"fd00::1", "fd00:0:0:0:1:2:3:4", "fd00::9"},
	}
	seen := map[string]string{} // key → /64
	for p64, ips := range per64 {
		keys := map[string]bool{}
		for _, ip := range ips {
			k := key(ip)
			if !strings.HasPrefix(k, "6/") {
				t.Errorf("%s: key %q, want a /64 key", ip, k)
			}
			keys[k] = true
			if other, ok := seen[k]; ok && other != p64 {
				t.Errorf("%s (/64 %s) shares key %q with /64 %s", ip, p64, k, other)
			}
			seen[k] = p64
		}
		if len(keys) > 2 {
			t.Errorf("/64 %s: %d keys for %d addresses, want at most 2: %v", p64, len(keys), len(ips), keys)
		}
	}
	for _, ip := range []string{"2001:db8:1:3::1", "2001:db8:0:1::1"} { // neighbouring /64s
		if k := key(ip); seen[k] != "" {
			t.Errorf("%s shares key %q with /64 %s", ip, k, seen[k])
		}
	}
	if a, b := key("192.0.2.1"), key("192.0.2.2"); a == b || len(a) != 4 {
		t.Errorf("IPv4 keys %q and %q: want the 4-byte address each", a, b)
	}
	if a, b := key("::ffff:192.0.2.1"), key("::ffff:192.0.2.2"); a == b {
		t.Errorf("IPv4-mapped addresses share key %q", a)
	}
}
