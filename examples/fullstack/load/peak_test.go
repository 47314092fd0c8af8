package load

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// An INFO commandstats answer of Redis 7 (subcommands named with "|"),
// with the section header, CRLF line ends and a field order of its own.
const commandStats = "# Commandstats\r\n" +
	"cmdstat_evalsha:calls=6,usec=120,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_evalsha_ro:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_get:usec=4,calls=2,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setname:calls=3,usec=1,usec_per_call=0.33,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=12,usec=400,usec_per_call=33.33,rejected_calls=0,failed_calls=0\r\n" +
	"\r\n"

func TestParseCommandStats(t *testing.T) {
	got, err := ParseCommandStats(commandStats)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"EVALSHA": 6, "EVALSHA_RO": 1, "GET": 2, "CLIENT|SETNAME": 3, "INFO": 12}, got)

	got, err = ParseCommandStats("# Commandstats\r\n")
	require.NoError(t, err)
	assert.Empty(t, got, "no command run yet")

	for _, bad := range []string{
		"cmdstat_get:usec=4,usec_per_call=2.00", // no calls
		"cmdstat_get:calls=x,usec=4",            // not a number
		"cmdstat_get:calls=-1,usec=4",           // negative
		"cmdstat_get",                           // no fields
		"cmdstat_:calls=1",                      // no name
	} {
		_, err := ParseCommandStats("# Commandstats\r\n" + bad + "\r\n")
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseCPU(t *testing.T) {
	got, err := ParseCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n")
	require.NoError(t, err)
	assert.Equal(t, 3750*time.Millisecond, got)
	_, err = ParseCPU("# CPU\r\nused_cpu_sys:1.5\r\n")
	assert.Error(t, err, "used_cpu_user missing")
	_, err = ParseCPU("used_cpu_sys:x\r\nused_cpu_user:1\r\n")
	assert.Error(t, err)
}

// The buy phase's use is after − before, without the readings' own INFO
// and without commands that did not run in between.
func TestRedisUse(t *testing.T) {
	before := RedisReading{Calls: map[string]int64{"EVALSHA": 10, "GET": 5, "INFO": 2, "PING": 1}, CPU: time.Second}
	after := RedisReading{Calls: map[string]int64{"EVALSHA": 70, "GET": 25, "INFO": 4, "PING": 1, "EVALSHA_RO": 10}, CPU: 1300 * time.Millisecond}
	u := redisUse(before, after)
	assert.Equal(t, map[string]int64{"EVALSHA": 60, "GET": 20, "EVALSHA_RO": 10}, u.Calls)
	assert.Equal(t, int64(90), u.Total())
	assert.Equal(t, 300*time.Millisecond, u.CPU)
}

// peakReport: 200 buy requests for 100 units, 100 accepted (all answered
// by 1 s), the bare server beside it, 900 Redis commands.
func peakReport() *Report {
	r := &Report{Users: 200, BuyRequests: 200, Accepted: 100, Throughput: 100, P50: 40 * ms, P99: 90 * ms,
		BuyTime: 2 * time.Second, GenCPU: 40 * ms, ServerCPU: 60 * ms, Outcomes: map[string]int{"queued": 100, "sold_out": 100},
		Server: Invariants{Initial: 100}, Config: Config{Peak: true, Users: 200},
		Redis: &RedisUse{Calls: map[string]int64{"EVALSHA": 600, "EVALSHA_RO": 100, "GET": 200}, CPU: 3 * ms}}
	for i := range 200 {
		out := "queued"
		if i%2 == 1 {
			out = "sold_out"
		}
		start := time.Duration(i) * 5 * ms // 0 … 995 ms
		if i >= 180 {
			out = "sold_out"
		}
		if out == "queued" {
			r.Samples = append(r.Samples, Sample{Start: start, Latency: 5 * ms, Outcome: out})
		} else {
			r.Samples = append(r.Samples, Sample{Start: start + time.Second, Latency: 5 * ms, Outcome: out})
		}
	}
	bare := func() *Report {
		return &Report{BuyRequests: 100, BuyTime: 100 * ms, Throughput: 1000, P50: 4 * ms, P99: 9 * ms, GenCPU: 2 * ms, ServerCPU: 3 * ms}
	}
	r.BareBefore, r.BareAfter = bare(), bare()
	return r
}

func TestRatios(t *testing.T) {
	r := peakReport()
	tp, cpu := r.Ratios()
	assert.InDelta(t, 0.1, tp, 1e-9, "100/s against 200 requests in 200 ms")
	// bare (2+3)·2 ms / 200 requests = 50 µs; service (40+60) ms / 200 = 500 µs.
	assert.InDelta(t, 0.1, cpu, 1e-9)
	r.BareAfter = nil
	tp, cpu = r.Ratios()
	assert.Zero(t, tp)
	assert.Zero(t, cpu)
}

func TestUntilSoldOut(t *testing.T) {
	r := peakReport()
	n, d := r.UntilSoldOut()
	// The last accepted answer ends at 890 + 5 ms; 90 answers end by then.
	assert.Equal(t, 895*ms, d)
	assert.Equal(t, 90, n)
	r.Samples = []Sample{{Outcome: "sold_out", Latency: ms}}
	n, d = r.UntilSoldOut()
	assert.Zero(t, n)
	assert.Zero(t, d)
}

func TestPeakString(t *testing.T) {
	r := peakReport()
	s := r.PeakString()
	assert.Contains(t, s, "100 units for 200 users (200 buy requests)")
	assert.Regexp(t, `contended: 100 accepted, 100 refused\s+200\s+100/s\s+40ms\s+90ms\s+300µs \(server\)`, s)
	assert.Regexp(t, `bare net/http right before\s+100\s+1000/s\s+4ms\s+9ms\s+30µs \(server\)`, s)
	assert.Contains(t, s, "ratio 0.10× the bare server's rate, CPU ratio 0.10")
	assert.Contains(t, s, "EVALSHA 6.00, GET 2.00, EVALSHA_RO 1.00 (9.00 in all; 900 commands for 100 accepted of 200 buy requests)")
	assert.Contains(t, s, "redis cpu   30µs per accepted buy")

	r.Redis, r.RedisNote = nil, "the embedded miniredis has no INFO commandstats: give -redis"
	s = r.PeakString()
	assert.Contains(t, s, "(INFO commandstats): n/a (the embedded miniredis has no INFO commandstats: give -redis)")
	assert.Contains(t, s, "redis cpu   n/a per accepted buy")
}

// The HTML report of a peak run has the side-by-side table and the Redis
// figures; a run that is not the peak has no such section.
func TestHTMLReportPeak(t *testing.T) {
	r := peakReport()
	doc, err := html.Parse(bytes.NewReader(render(t, r)))
	require.NoError(t, err)
	rows := find(byID(t, doc, "peak"), tag("tr"))
	require.Len(t, rows, 4, "header, the buy phase, bare before, bare after")
	assert.Contains(t, text(rows[1]), "contended: 100 accepted, 100 refused")
	assert.Contains(t, text(rows[2]), "bare net/http right before")
	assert.Contains(t, text(byID(t, doc, "redis-calls")), "EVALSHA 6.00")
	assert.Contains(t, text(byID(t, doc, "peak-figures")), "0.10× the bare server's rate")

	plain := syntheticReport()
	doc, err = html.Parse(bytes.NewReader(render(t, plain)))
	require.NoError(t, err)
	assert.Empty(t, find(doc, func(n *html.Node) bool { return attr(n, "id") == "peak" }))
}

// Without a reader the note says why Redis is not read; a reader's error
// is the note (loadgen's TestPeakEmbedded runs a whole peak with one).
func TestReadRedisNote(t *testing.T) {
	r := &runner{cfg: Config{RedisNote: "no Redis here"}}
	_, err := r.readRedis(context.Background())
	require.EqualError(t, err, "no Redis here")
	boom := errors.New("boom")
	r.cfg.Redis = func(context.Context) (RedisReading, error) { return RedisReading{}, boom }
	_, err = r.readRedis(context.Background())
	assert.ErrorIs(t, err, boom)
	assert.True(t, strings.HasPrefix(err.Error(), "reading Redis: "))
}

func TestRoundLatency(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1063036302 * time.Nanosecond: "1.06s",
		135140856 * time.Nanosecond:  "135ms",
		37290798 * time.Nanosecond:   "37.3ms",
		8123456 * time.Nanosecond:    "8.12ms",
		812345 * time.Nanosecond:     "812µs",
	} {
		assert.Equal(t, want, roundLatency(d).String(), "%v", d)
	}
}
