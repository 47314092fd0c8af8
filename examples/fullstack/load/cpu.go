package load

import (
	"bufio"
	"bytes"
	"context"
	"github.com/valyala/fasthttp"
	"strconv"
	"strings"
	"time"
)

// serverCPU reads process_cpu_seconds_total from the service's Prometheus
// /metrics (the process collector). ok is false when the endpoint or the
// metric is missing (another OS, a proxy in front).
func (c *client) serverCPU(ctx context.Context) (time.Duration, bool) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + "/metrics")
	if c.metrics != "" {
		req.Header.Set("Authorization", "Bearer "+c.metrics)
	}
	if ctx.Err() != nil || c.hc.DoTimeout(req, resp, 10*time.Second) != nil || resp.StatusCode() != 200 {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(resp.Body()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		v, found := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total ")
		if !found {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, false
		}
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}
