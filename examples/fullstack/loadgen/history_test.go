package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/history"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// TestHistoryCatchesAContradictionOnTheWire: a proxy in front of the
// embedded server answers the result read that follows the first payment
// with "queued" (an answer that contradicts the "paid" before it, as a
// stale replica read would). The run records it on the wire and the
// history check names it: a contradiction of that reservation and no
// other violation (the service itself is right: SQL agrees with every
// buyer's last word).
func TestHistoryCatchesAContradictionOnTheWire(t *testing.T) {
	embeddedOnly(t)
	ctx := context.Background()
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.StartIn, cfg.LogLevel, cfg.Stock, cfg.DemoUsers = "127.0.0.1:0", 0, "warn", 10, 60
	cfg.Demo, cfg.DemoWithRealServers = true, true
	require.NoError(t, cfg.Validate())
	lc := load.Config{Users: 60, Concurrency: 8, Drain: 2 * time.Minute}
	shutdown, err := startEmbedded(ctx, cfg, &lc)
	require.NoError(t, err)
	defer shutdown()

	target, err := url.Parse(lc.Target)
	require.NoError(t, err)
	var mu sync.Mutex
	resvOf := map[string]string{} // order number → reservation, from the result answers
	var victim string             // the reservation of the first order paid
	rewritten := false
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		path := resp.Request.URL.Path
		if resp.StatusCode != http.StatusOK || !(strings.HasPrefix(path, "/api/pay") || strings.HasPrefix(path, "/api/result/")) {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		var v struct {
			Status      string `json:"status"`
			Reservation string `json:"reservation"`
			OrderNo     string `json:"order_no"`
		}
		_ = json.Unmarshal(body, &v)
		mu.Lock()
		switch {
		case strings.HasPrefix(path, "/api/pay") && v.Status == "paid" && victim == "":
			victim = resvOf[v.OrderNo]
		case path == "/api/result/"+victim && !rewritten:
			body, rewritten = []byte(`{"status":"queued","reservation":"`+victim+`"}`), true
		case v.OrderNo != "":
			resvOf[v.OrderNo] = v.Reservation
		}
		mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	lc.Target = front.URL
	rep, err := load.Run(ctx, lc)
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, victim, "no order was paid")
	require.True(t, rewritten, "the read after the payment did not go through the proxy")
	var kinds []string
	for _, v := range rep.History.Violations {
		kinds = append(kinds, v.Kind+" "+v.Reservation)
	}
	assert.Equal(t, []string{history.Contradiction + " " + victim}, kinds, "%v", rep.History.Violations)
	assert.True(t, rep.History.Truth, "checked against SQL too")
	require.Len(t, rep.Violations, 1, "the history violation only: %v", rep.Violations)
	assert.Contains(t, rep.Violations[0], "history contradiction: reservation "+victim)
	assert.Contains(t, rep.Violations[0], "then result answered queued")
}
