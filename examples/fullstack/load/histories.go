package load

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/history"
)

// The buyers' histories: while the pipeline drains every buyer with an
// accepted reservation polls its result, as the page does, and the first
// pushStreams of them also follow it on the SSE stream; after the final
// answers every third buyer told "created" pays and reads the result again,
// and a few buyers read a reservation of another buyer. Every answer is
// recorded per attempt (history.Client, one goroutine at a time), and the
// histories are checked at the end of the run with the other invariants.

const (
	pollWorkers = 32                    // result polls in parallel during the drain
	pollPause   = 50 * time.Millisecond // between poll rounds: paces the polling, synchronises nothing
	crossReads  = 50                    // reads of another buyer's reservation
	pushStreams = 20                    // buyers that also follow their result on the SSE stream
)

// pushDuring opens the SSE result stream (a ticket, then GET
// /api/events/{reservation}) of the first pushStreams accepted attempts,
// each recording the views pushed to it in a history client of its own
// (same user: the polls of the attempt run meanwhile), until the final
// view or the returned stop (which waits for the streams to close).
func (r *runner) pushDuring(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: pushStreams}} // net/http: the body is read as it comes
	var wg sync.WaitGroup
	acc := r.accepted()
	for _, a := range acc[:min(pushStreams, len(acc))] {
		h := r.rec.NewClient(strings.TrimPrefix(a.user, "user"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := r.c.follow(ctx, hc, a, h)
			r.pushed.Add(int64(n))
			if n > 0 {
				r.streams.Add(1)
			}
		}()
	}
	return func() { cancel(); wg.Wait(); hc.CloseIdleConnections() }
}

// follow reads a's result stream until its final view or ctx ends,
// recording each pushed view in h, and returns how many it read. A
// pushed view was read by the service after the stream was asked for:
// its interval runs from the request to its arrival.
func (c *client) follow(ctx context.Context, hc *http.Client, a *attempt, h *history.Client) int {
	var tk struct {
		Ticket string `json:"ticket"`
	}
	if code, err := c.do(ctx, "POST", "/api/events/"+url.PathEscape(a.resv)+"/ticket", a.bearer, struct{}{}, &tk); err != nil || code != 200 || tk.Ticket == "" {
		return 0
	}
	start := h.Now()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/events/"+url.PathEscape(a.resv)+"?ticket="+url.QueryEscape(tk.Ticket), nil)
	if err != nil {
		return 0
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var v apiResp
		if json.Unmarshal([]byte(data), &v) != nil {
			continue
		}
		n++
		h.Add(history.Op{Kind: history.Push, Reservation: a.resv, Start: start, End: h.Now(), Code: 200,
			Status: v.Status, OrderNo: v.OrderNo, Reason: v.Reason, Named: v.Reservation})
		if v.Status != "queued" && v.Status != "unknown" {
			return n
		}
	}
	return n
}

// accepted lists the attempts answered 202.
func (r *runner) accepted() []*attempt {
	var out []*attempt
	for _, a := range r.atts {
		if a.outcome == "queued" && a.resv != "" {
			out = append(out, a)
		}
	}
	return out
}

// pollDuring polls, round after round, the result of every accepted
// attempt not yet answered an outcome, until the returned stop is called
// (which waits for the round in flight to end).
func (r *runner) pollDuring(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	open := r.accepted()
	go func() {
		defer close(done)
		for len(open) > 0 && ctx.Err() == nil {
			_ = parallel(ctx, min(pollWorkers, r.cfg.Concurrency), len(open), nil, func(i int) error {
				_, _ = r.c.resultOf(ctx, open[i], open[i].resv) // a failed poll is recorded; the next round asks again
				return nil
			})
			still := open[:0]
			for _, a := range open {
				if a.last == "" || a.last == "queued" || a.last == "unknown" {
					still = append(still, a)
				}
			}
			open = still
			if sleep(ctx, pollPause) != nil {
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// pay makes a share (Config.PayShare, default every third) of the accepted
// attempts whose final answer was "created" pay their order, half through
// the fake provider (refunds.go), then read their result again; the
// answers are counted in Report.Paid. Then some are refunded (refunds).
func (r *runner) pay(ctx context.Context) error {
	var payers []*attempt
	for i, a := range r.accepted() {
		if r.payer(i) && a.last == "created" && a.orderNo != "" {
			payers = append(payers, a)
		}
	}
	keys := make([]string, len(payers))
	err := parallel(ctx, r.cfg.Concurrency, len(payers), nil, func(i int) error {
		a := payers[i]
		var resp apiResp
		start := a.h.Now()
		code, err := r.c.do(ctx, "POST", payPath(i), a.bearer, map[string]string{"order_no": a.orderNo}, &resp)
		a.h.Add(history.Op{Kind: history.Pay, Reservation: a.resv, Start: start, End: a.h.Now(), Code: code,
			Status: resp.Status, OrderNo: resp.OrderNo, Reason: resp.Reason})
		if err != nil {
			return err
		}
		keys[i] = strconv.Itoa(code) + " " + resp.Status
		if _, err := r.c.result(ctx, a); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		r.rep.Paid[k]++
	}
	return r.refunds(ctx, payers)
}

// crossRead makes up to crossReads buyers read the reservation of another
// buyer (the next accepted attempt of a different user): the service must
// answer each "unknown".
func (r *runner) crossRead(ctx context.Context) error {
	acc := r.accepted()
	for i := 0; i < min(crossReads, len(acc)); i++ {
		owner := acc[i]
		for j := 1; j < len(r.atts); j++ {
			reader := r.atts[(i+j)%len(r.atts)]
			if reader.user == owner.user || reader.bearer == "" {
				continue
			}
			var resp apiResp
			start := reader.h.Now()
			code, err := r.c.do(ctx, "GET", "/api/result/"+url.PathEscape(owner.resv), reader.bearer, nil, &resp)
			reader.h.Add(history.Op{Kind: history.Result, Reservation: owner.resv, Start: start, End: reader.h.Now(), Code: code,
				Status: resp.Status, OrderNo: resp.OrderNo, Reason: resp.Reason, Named: resp.Reservation})
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// histories pays, reads across buyers, reads the stores' facts
// (Config.Truth) and checks every recorded history: the verdict goes in
// Report.History and its violations (the first 20 named) in
// Report.Violations.
func (r *runner) histories(ctx context.Context, activity string) error {
	if err := r.pay(ctx); err != nil {
		return err
	}
	if err := r.crossRead(ctx); err != nil {
		return err
	}
	var truth history.Truth
	switch {
	case r.cfg.Truth == nil:
		r.rep.HistoryNote = "no database to read (the stores' facts are read in embedded mode)"
	default:
		t, err := r.cfg.Truth(ctx, activity)
		if err != nil {
			r.rep.HistoryNote = "reading the stores' facts: " + err.Error()
		} else {
			truth = t
		}
	}
	v := history.Check(r.rec.Ops(), truth)
	r.rep.History = v
	r.rep.Pushed, r.rep.Streams = int(r.pushed.Load()), int(r.streams.Load())
	for i, x := range v.Violations {
		if i == 20 {
			r.rep.Violations = append(r.rep.Violations, fmt.Sprintf("history: and %d more violations", len(v.Violations)-i))
			break
		}
		r.rep.Violations = append(r.rep.Violations, "history "+x.String())
	}
	if v.Undecided > 0 {
		r.rep.Violations = append(r.rep.Violations, fmt.Sprintf("history: %d reservation histories undecided (checker timeout)", v.Undecided))
	}
	return nil
}

// historyLine is the report's line on the buyers' histories.
func (r *Report) historyLine() string {
	s := r.History.String()
	if r.HistoryNote != "" {
		s += "; " + r.HistoryNote
	}
	if r.Pushed > 0 {
		s += fmt.Sprintf("; %d views pushed on %d SSE streams", r.Pushed, r.Streams)
	}
	if len(r.Paid) > 0 {
		s += "; payments " + fmtMap(r.Paid)
	}
	if len(r.Refunded) > 0 {
		s += "; refunds " + fmtMap(r.Refunded)
	}
	return s
}
