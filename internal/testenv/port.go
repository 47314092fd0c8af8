package testenv

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

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
				return 0, err
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
	return 0, errors.New("testenv: no free loopback port below the ephemeral range in 200 draws")
}
