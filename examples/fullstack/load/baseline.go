package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BareHandler is the bare server of [Baseline]: every request is answered
// with the service's 409 "sold out" JSON, nothing else is done; /metrics
// reports the process's CPU like the service's does.
func BareHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	body := []byte(`{"status":"sold_out","message":"sold out"}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(body)
	})
}

// Baseline measures the floor under the buy phase on this machine: the same
// generator, concurrency and request count, and requests of the buy's shape
// (a POST with a bearer token and a JSON body of the buy's size), against a
// bare net/http server ([BareHandler]) that answers each with the service's
// 409 "sold out" JSON and does nothing else. cfg.Target names a running
// bare server (e.g. in another process, to match a service measured in
// another process); empty starts one in this process. Run it beside [Run]
// in the same arrangement to see how much of the machine's HTTP capacity
// the full chain keeps; the report's invariant fields are empty.
func Baseline(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Target == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("load: baseline: %w", err)
		}
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: BareHandler()}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		cfg.Target = "http://" + ln.Addr().String()
		cfg.SameProcess = true
	}
	c := newClient(cfg.Target, cfg.Concurrency)
	c.metrics = cfg.MetricsToken
	defer c.hc.CloseIdleConnections()
	n := cfg.Users * cfg.Repeat
	reqBody := []byte(`{"token":"` + strings.Repeat("t", 43) + `","captcha_id":"` + strings.Repeat("c", 20) + `","captcha":"ABCD"}`)
	bearer := strings.Repeat("b", 43)
	atts := make([]attempt, n)
	rep := &Report{Users: cfg.Users, BuyRequests: n, Outcomes: map[string]int{}, SameProcess: cfg.SameProcess}
	gen0, genOK := selfCPU()
	t0 := time.Now()
	srv0, srvOK := c.serverCPU(ctx)
	err := parallel(ctx, cfg.Concurrency, n, bar(cfg.Progress, n, "baseline"), func(i int) error {
		var r apiResp
		t := time.Now()
		code, err := c.do(ctx, "POST", "/api/buy/1/signature", bearer, reqBody, &r)
		atts[i].latency = time.Since(t)
		if err != nil {
			return err
		}
		if code != http.StatusConflict || r.Status != "sold_out" {
			return errors.New("load: baseline: unexpected answer " + fmt.Sprint(code, " ", r.Status))
		}
		atts[i].outcome = r.Status
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.BuyTime = time.Since(t0)
	if gen1, ok := selfCPU(); ok && genOK {
		rep.GenCPU = gen1 - gen0
	}
	if srv1, ok := c.serverCPU(ctx); ok && srvOK && !cfg.SameProcess {
		rep.ServerCPU = srv1 - srv0
	}
	rep.Throughput = float64(n) / rep.BuyTime.Seconds()
	lat := make([]time.Duration, n)
	for i := range atts {
		lat[i] = atts[i].latency
		rep.Outcomes[atts[i].outcome]++
	}
	rep.setLatency(lat)
	return rep, nil
}

// BaselineString formats a baseline report; when names the measurement
// ("right before the buy phase"), or is empty.
func (r *Report) BaselineString(when string) string {
	var b strings.Builder
	if when != "" {
		when = " " + when
	}
	fmt.Fprintf(&b, "baseline    bare net/http%s, same generator: %d requests in %v, %.0f req/s, p50 %v p99 %v p999 %v",
		when, r.BuyRequests, r.BuyTime.Round(time.Millisecond), r.Throughput, r.P50, r.P99, r.P999)
	n := time.Duration(max(r.BuyRequests, 1))
	switch {
	case r.GenCPU > 0 && r.SameProcess:
		fmt.Fprintf(&b, ", %v CPU per request (generator + server, one process)", (r.GenCPU / n).Round(100*time.Nanosecond))
	case r.GenCPU > 0 && r.ServerCPU > 0:
		fmt.Fprintf(&b, ", CPU per request: server %v, generator %v", (r.ServerCPU / n).Round(100*time.Nanosecond), (r.GenCPU / n).Round(100*time.Nanosecond))
	}
	b.WriteString("\n")
	return b.String()
}
