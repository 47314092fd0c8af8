package crash

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

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
