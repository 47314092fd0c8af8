package load

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBaselineInProcess(t *testing.T) {
	rep, err := Baseline(context.Background(), Config{Users: 300, Concurrency: 8})
	require.NoError(t, err)
	assert.Equal(t, 300, rep.BuyRequests)
	assert.Equal(t, map[string]int{"sold_out": 300}, rep.Outcomes)
	assert.True(t, rep.SameProcess)
	assert.Positive(t, rep.Throughput)
	assert.LessOrEqual(t, rep.P50, rep.P99)
	assert.LessOrEqual(t, rep.P99, rep.P999)
	assert.LessOrEqual(t, rep.P999, rep.Max)
	assert.Contains(t, rep.BaselineString(""), "300 requests")
}

func TestBaselineOtherServer(t *testing.T) {
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	rep, err := Baseline(context.Background(), Config{Target: srv.URL, Users: 100, Repeat: 2, Concurrency: 4})
	require.NoError(t, err)
	assert.Equal(t, 200, rep.BuyRequests)
	assert.False(t, rep.SameProcess)
	assert.Equal(t, 200, rep.Outcomes["sold_out"])
}

// The CPU figures come from the server's /metrics (process collector) and
// from getrusage; both must read something real.
func TestCPUReadings(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the process collector reads /proc")
	}
	srv := httptest.NewServer(BareHandler())
	defer srv.Close()
	c := newClient(srv.URL, 2)
	// The server is this process. /proc counts CPU in clock ticks (10 ms),
	// so a process that has just started (this test run alone) may read 0:
	// work until the reading moves, with a generous bound, so the check
	// depends neither on the tests run before nor on the machine's speed.
	d, ok := c.serverCPU(context.Background())
	require.True(t, ok, "process_cpu_seconds_total not found in /metrics")
	var sink uint64
	for bound := time.Now().Add(time.Minute); d == 0 && time.Now().Before(bound); {
		sink += burnCPU()
		d, ok = c.serverCPU(context.Background())
		require.True(t, ok)
	}
	assert.Positive(t, d, "process_cpu_seconds_total after CPU work (%d)", sink)
	self, ok := selfCPU()
	require.True(t, ok)
	assert.Positive(t, self)
	assert.GreaterOrEqual(t, self+10*time.Millisecond, d, "getrusage %v and /proc %v disagree beyond a tick", self, d)

	// a server without /metrics: unknown, not zero-and-ok
	bad := httptest.NewServer(nil)
	defer bad.Close()
	_, ok = newClient(bad.URL, 1).serverCPU(context.Background())
	assert.False(t, ok)
}

// burnCPU does a fixed amount of CPU work (no I/O, no sleep).
func burnCPU() uint64 {
	x := uint64(88172645463325252)
	for i := 0; i < 1<<20; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

func TestReportCPULine(t *testing.T) {
	r := &Report{BuyRequests: 1000, GenCPU: 50e6, ServerCPU: 70e6}
	assert.Contains(t, r.String(), "server 70µs per buy, generator 50µs per buy")
	r.SameProcess = true
	assert.Contains(t, r.String(), "50µs per buy (generator + embedded server, one process)")
	assert.False(t, strings.Contains((&Report{BuyRequests: 1}).String(), "cpu "))
}
