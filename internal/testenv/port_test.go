package testenv

import (
	"net"
	"strconv"
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
