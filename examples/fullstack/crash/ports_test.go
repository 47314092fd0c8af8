package crash

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortBelowEphemeralRange: FreePort's ports lie below the kernel's
// ephemeral range (where outgoing connections take their source ports, and
// could take a port between FreePort and the server's bind), are never one
// of the shared servers', never given twice, and can be bound.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	top := ephemeralLow()
	if top-lowestPort < 1000 {
		t.Skipf("the ephemeral range starts at %d: FreePort asks the kernel", top)
	}
	seen := map[int]bool{}
	for range 300 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowestPort || p >= top {
			t.Fatalf("port %d outside [%d, %d)", p, lowestPort, top)
		}
		if sharedPorts[p] || seen[p] {
			t.Fatalf("port %d: shared %v, given before %v", p, sharedPorts[p], seen[p])
		}
		seen[p] = true
	}
	p, _ := FreePort()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("bind the port given: %v", err)
	}
	_ = ln.Close()
}

// TestStartServiceMovesOffATakenPort: a port taken between FreePort and
// the service's bind ("address already in use") moves the first start to
// another port instead of failing the test (the fault battery met it in
// CI). Runs the embedded service.
func TestStartServiceMovesOffATakenPort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service binary")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return FreePort()
	}
	t.Cleanup(func() { freePort = FreePort })
	cfg := ServiceConfig{Prefix: "ck:", SecretFile: WriteSecret(t), Stock: 5, Users: 10,
		SQLite: filepath.Join(t.TempDir(), "shop.db")}
	s := StartService(t, serviceBin, cfg)
	if s.Addr == taken.Addr().String() || calls != 2 {
		t.Fatalf("service on %s after %d ports; %s was taken", s.Addr, calls, taken.Addr())
	}
	if !strings.Contains(Tail(s.LogPath, 40), "address already in use") {
		t.Fatalf("the first start did not meet the taken port:\n%s", Tail(s.LogPath, 40))
	}
}
