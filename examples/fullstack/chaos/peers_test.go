package chaos

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpPeers returns the remote addresses of pid's established TCP
// connections (IPv4), read from /proc: the socket inodes of its open file
// descriptors matched against /proc/<pid>/net/tcp.
func tcpPeers(pid int) (map[string]int, error) {
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/tcp")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(fs) < 10 || fs[3] != "01" || !inodes[fs[9]] { // 01 = ESTABLISHED
			continue
		}
		a, err := hexAddr(fs[2])
		if err != nil {
			return nil, err
		}
		out[a]++
	}
	return out, sc.Err()
}

// hexAddr decodes /proc/net/tcp's "0100007F:1F90" (little-endian IPv4).
func hexAddr(s string) (string, error) {
	h, p, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(h)
	if !ok || err != nil || len(b) != 4 {
		return "", fmt.Errorf("chaos: /proc/net/tcp address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", fmt.Errorf("chaos: /proc/net/tcp port %q", s)
	}
	return net.JoinHostPort(net.IPv4(b[3], b[2], b[1], b[0]).String(), strconv.FormatUint(port, 10)), nil
}

// kafkaPeers counts w's connections to the broker's own ports and to its
// own Kafka proxies (F7d): with -kafka-addr-map none may go to the broker
// directly, or the partition would not cut it off.
func (r *run) kafkaPeers(w *proc) error {
	peers, err := tcpPeers(w.pid())
	if err != nil {
		r.note("connections of %s not read (%v): isolation not verified", w.name, err)
		return nil
	}
	direct, proxied := 0, 0
	for i, a := range r.sys.brokerA {
		direct += peers[a]
		proxied += peers[r.sys.px.by[kafkaProxy(w.name, i)].Listen]
	}
	r.count("worker→broker direct conns", direct)
	r.count("worker→broker proxied conns", proxied)
	r.note("%s's connections: %d to the broker's own ports, %d to its Kafka proxies", w.name, direct, proxied)
	if direct > 0 {
		r.violation("F7d: %s holds %d connections to the broker's own ports: the partition does not cut it off", w.name, direct)
	}
	return nil
}
