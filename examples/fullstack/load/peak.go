package load

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The peak of a sale (loadgen -peak): stock for half the buyers, so the buy
// phase is the contended moment — half the buys accepted while stock
// remains, the other half refused once it is gone — measured beside the
// bare server (Report.BareBefore, BareAfter) and, on a real Redis, with the
// Redis commands the service sent per accepted buy (Report.Redis).

// RedisReading is one reading of the service's Redis servers (summed over
// them): the commands each has served since its start or its last CONFIG
// RESETSTAT, by name, and the CPU it has used (INFO commandstats and INFO
// cpu). Config.Redis takes two, right before and right after the buy
// phase.
type RedisReading struct {
	Calls map[string]int64 // by command, upper case: EVALSHA, GET, CLIENT|SETNAME, ...
	CPU   time.Duration    // used_cpu_sys + used_cpu_user
}

// RedisUse is what the service's Redis servers did during the buy phase:
// the difference of two readings. It counts every client of those servers
// (the service's api, its workers, anything else), not the INFO calls that
// read it.
type RedisUse struct {
	Calls map[string]int64
	CPU   time.Duration
}

// Total is the number of commands served.
func (u *RedisUse) Total() int64 {
	var n int64
	for _, c := range u.Calls {
		n += c
	}
	return n
}

// redisUse is after − before, without INFO (the readings' own calls) and
// without commands that did not run in between.
func redisUse(before, after RedisReading) *RedisUse {
	u := &RedisUse{Calls: map[string]int64{}, CPU: after.CPU - before.CPU}
	for cmd, n := range after.Calls {
		if d := n - before.Calls[cmd]; d > 0 && cmd != "INFO" {
			u.Calls[cmd] = d
		}
	}
	return u
}

// ParseCommandStats reads the calls per command of an INFO commandstats
// answer ("cmdstat_evalsha:calls=6,usec=...,..."), keyed by the command in
// upper case (Redis 7 names subcommands "client|setname"). Other lines
// (the section header, blank lines, other sections) are skipped; a
// cmdstat line without a readable calls= field is an error.
func ParseCommandStats(info string) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("load: INFO commandstats: bad line %q", line)
		}
		calls := int64(-1)
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("load: INFO commandstats: bad calls in %q", line)
				}
				calls = n
			}
		}
		if calls < 0 {
			return nil, fmt.Errorf("load: INFO commandstats: no calls in %q", line)
		}
		out[strings.ToUpper(name)] += calls
	}
	return out, sc.Err()
}

// ParseCPU reads used_cpu_sys + used_cpu_user (seconds) of an INFO cpu
// answer.
func ParseCPU(info string) (time.Duration, error) {
	var sum float64
	found := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("load: INFO cpu: bad %s %q", k, v)
		}
		sum += f
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("load: INFO cpu: no used_cpu_sys and used_cpu_user")
	}
	return time.Duration(sum * float64(time.Second)), sc.Err()
}

// Ratios are the buy phase against the bare server measured beside it
// (BareBefore and BareAfter, both set): by throughput (the bare rate is
// both halves' requests over their summed time), and by CPU, which is
// steadier on a shared machine: (bare server + generator CPU per request)
// ÷ (service + generator CPU per buy). cpu is 0 when a CPU reading is
// missing; both are 0 without the bare server.
func (r *Report) Ratios() (throughput, cpu float64) {
	b, a := r.BareBefore, r.BareAfter
	if b == nil || a == nil {
		return 0, 0
	}
	n := b.BuyRequests + a.BuyRequests
	t := b.BuyTime + a.BuyTime
	if n == 0 || t <= 0 {
		return 0, 0
	}
	throughput = r.Throughput / (float64(n) / t.Seconds())
	bb, ba, svc := b.phaseCPU(), a.phaseCPU(), r.phaseCPU()
	if bb > 0 && ba > 0 && svc > 0 && r.BuyRequests > 0 {
		cpu = (float64(bb+ba) / float64(n)) / (float64(svc) / float64(r.BuyRequests))
	}
	return throughput, cpu
}

// phaseCPU is the CPU a measured phase cost generator and server together
// (0 when a reading is missing). In one process the generator's reading
// already holds the server's.
func (r *Report) phaseCPU() time.Duration {
	switch {
	case r.GenCPU <= 0:
		return 0
	case r.SameProcess:
		return r.GenCPU
	case r.ServerCPU <= 0:
		return 0
	}
	return r.GenCPU + r.ServerCPU
}

// serverCPUPerRequest is the server's CPU per request of a phase, and what
// it holds: the server alone (its /metrics), or generator and server when
// they share this process. 0 when unknown.
func (r *Report) serverCPUPerRequest() (time.Duration, string) {
	n := time.Duration(max(r.BuyRequests, 1))
	switch {
	case r.SameProcess && r.GenCPU > 0:
		return (r.GenCPU / n).Round(100 * time.Nanosecond), "generator + server, one process"
	case !r.SameProcess && r.ServerCPU > 0:
		return (r.ServerCPU / n).Round(100 * time.Nanosecond), "server"
	}
	return 0, ""
}

// UntilSoldOut is the part of the buy phase up to the last accepted
// answer: the requests answered by then and the time from the phase's
// start (0, 0 when none was accepted).
func (r *Report) UntilSoldOut() (requests int, d time.Duration) {
	for _, s := range r.Samples {
		if s.Outcome == "queued" {
			d = max(d, s.End())
		}
	}
	if d == 0 {
		return 0, 0
	}
	for _, s := range r.Samples {
		if s.End() <= d {
			requests++
		}
	}
	return requests, d
}

// peakRow is one line of the side-by-side table.
type peakRow struct {
	Phase, Requests, Rate, P50, P99, CPU string
}

// roundLatency keeps about three digits of a latency: 1.06s, 76.3ms,
// 812µs.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// peakRows is the side-by-side table: the buy phase, the bare server
// before and after it (when measured).
func (r *Report) peakRows() []peakRow {
	row := func(name string, x *Report) peakRow {
		cpu := "-"
		if c, what := x.serverCPUPerRequest(); c > 0 {
			cpu = fmt.Sprintf("%v (%s)", c, what)
		}
		return peakRow{Phase: name, Requests: strconv.Itoa(x.BuyRequests), Rate: fmt.Sprintf("%.0f/s", x.Throughput),
			P50: roundLatency(x.P50).String(), P99: roundLatency(x.P99).String(), CPU: cpu}
	}
	rows := []peakRow{row(fmt.Sprintf("contended: %d accepted, %d refused", r.Accepted, r.BuyRequests-r.Accepted), r)}
	if r.BareBefore != nil {
		rows = append(rows, row("bare net/http right before", r.BareBefore))
	}
	if r.BareAfter != nil {
		rows = append(rows, row("bare net/http right after", r.BareAfter))
	}
	return rows
}

// RedisPerAccepted lists the Redis commands per accepted buy, most first,
// as "EVALSHA 6.00, EVALSHA_RO 1.00, GET 2.00 (9.00 in all)", and the
// Redis CPU per accepted buy; "n/a (why)" when Redis was not read.
func (r *Report) RedisPerAccepted() (calls, cpu string) {
	if r.Redis == nil {
		why := r.RedisNote
		if why == "" {
			why = "Redis not read"
		}
		return "n/a (" + why + ")", "n/a"
	}
	if r.Accepted == 0 {
		return "n/a (no buy accepted)", "n/a"
	}
	acc := float64(r.Accepted)
	cmds := make([]string, 0, len(r.Redis.Calls))
	for c := range r.Redis.Calls {
		cmds = append(cmds, c)
	}
	sort.Slice(cmds, func(i, j int) bool {
		a, b := r.Redis.Calls[cmds[i]], r.Redis.Calls[cmds[j]]
		if a != b {
			return a > b
		}
		return cmds[i] < cmds[j]
	})
	parts := make([]string, 0, len(cmds))
	for _, c := range cmds {
		parts = append(parts, fmt.Sprintf("%s %.2f", c, float64(r.Redis.Calls[c])/acc))
	}
	if len(parts) == 0 {
		parts = append(parts, "none")
	}
	calls = fmt.Sprintf("%s (%.2f in all; %d commands for %d accepted of %d buy requests)",
		strings.Join(parts, ", "), float64(r.Redis.Total())/acc, r.Redis.Total(), r.Accepted, r.BuyRequests)
	cpu = (r.Redis.CPU / time.Duration(r.Accepted)).Round(10 * time.Nanosecond).String()
	return calls, cpu
}

// PeakString renders the peak's figures for a terminal: the contended buy
// phase beside the bare server (rate, p50, p99, server CPU per request),
// the ratios, the part until sold out, and the Redis commands and CPU per
// accepted buy.
func (r *Report) PeakString() string {
	var b strings.Builder
	s := r.Server
	fmt.Fprintf(&b, "peak        %d units for %d users (%d buy requests), the buy phase beside the bare server, same generator and connections:\n",
		s.Units(), r.Users, r.BuyRequests)
	fmt.Fprintf(&b, "            %-38s %9s %9s %9s %9s  %s\n", "phase", "requests", "rate", "p50", "p99", "CPU per request")
	for _, row := range r.peakRows() {
		fmt.Fprintf(&b, "            %-38s %9s %9s %9s %9s  %s\n", row.Phase, row.Requests, row.Rate, row.P50, row.P99, row.CPU)
	}
	if tp, cpu := r.Ratios(); tp > 0 {
		fmt.Fprintf(&b, "            ratio %.2f× the bare server's rate", tp)
		if cpu > 0 {
			fmt.Fprintf(&b, ", CPU ratio %.2f", cpu)
		}
		b.WriteString("\n")
	}
	if n, d := r.UntilSoldOut(); n > 0 && d > 0 {
		fmt.Fprintf(&b, "            until the last accepted answer: %d requests in %v, %.0f/s\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
	}
	calls, cpu := r.RedisPerAccepted()
	fmt.Fprintf(&b, "redis       per accepted buy, buy phase, every client (INFO commandstats): %s\n", calls)
	fmt.Fprintf(&b, "redis cpu   %s per accepted buy\n", cpu)
	return b.String()
}
