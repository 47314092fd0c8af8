package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/stock"
)

// readCounter is a request body that counts the reads made of it.
type readCounter struct {
	r     io.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }
func (c *readCounter) Close() error               { return nil }

// TestSoldOutRefusalReadsNoBody: once the sale is sold out, a buyer none of
// whose attempts won is refused 409 without the body being read (before,
// every refusal parsed it, and reading it to the end also started
// net/http's background read of the connection). A winner's retry is still
// answered with its reservation, and a winner's new attempt is refused.
// A sale in sizes: TestSoldOutSizesReadsNoBody.
func TestSoldOutRefusalReadsNoBody(t *testing.T) {
	a, base, winBearer, winPath, winBody := soldOutSale(t, 10)
	resv := app.ClientReservationID("1", "winner1")
	bearer, path, body := benchBuyer(t, base, "user3", "lost3")
	rc := &readCounter{r: bytes.NewReader(body)}
	req := httptest.NewRequest("POST", path, nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Body, req.ContentLength = rc, int64(len(body))
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, req)
	assert.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	assert.JSONEq(t, `{"status":"sold_out","message":"sold out"}`, w.Body.String())
	assert.Zero(t, rc.reads, "the body of a buyer who won nothing was read")

	// The winner's retry (same attempt) gets its reservation back: still
	// queued (202), or already an order (200 created) when the consumer was
	// quicker (CI, a loaded box).
	code, m := benchCall(t, base, "POST", winPath, winBearer, rawJSON(winBody))
	if code == http.StatusOK {
		assert.Equal(t, "created", m["status"], m)
	} else {
		assert.Equal(t, http.StatusAccepted, code, m)
	}
	assert.Equal(t, resv, m["reservation"])
	// A new attempt of the winner is sold out.
	_, _, newBody := benchBuyer(t, base, "user1", "winner1-again")
	code, m = benchCall(t, base, "POST", winPath, winBearer, rawJSON(newBody))
	assert.Equal(t, http.StatusConflict, code, m)
	assert.Equal(t, "sold_out", m["status"])
}

// withVariant is a buy body with "variant": v added.
func withVariant(t testing.TB, body []byte, v string) []byte {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, json.Unmarshal(body, &m))
	m["variant"] = v
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// buyRead sends body to path as bearer straight to the handler, and
// returns the answer and how often the body was read.
func buyRead(t testing.TB, a *app.App, bearer, path string, body []byte) (*httptest.ResponseRecorder, int) {
	t.Helper()
	rc := &readCounter{r: bytes.NewReader(body)}
	req := httptest.NewRequest("POST", path, nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Body, req.ContentLength = rc, int64(len(body))
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, req)
	return w, rc.reads
}

// sizeWin is the winner of one size: its bearer, buy path, body and
// reservation.
type sizeWin struct {
	bearer, path string
	body         []byte
	resv         string
}

// soldOutSizes starts the embedded service selling a sale in sizes 36 and
// 37 (one unit each), sells 36 to user1 and 37 to user2, and has user3
// refused at 36 while 37 still sells (its body is read: the sale is not
// sold out), then at 37, so that each size's sold-out flag is set.
func soldOutSizes(tb testing.TB) (*app.App, string, map[string]sizeWin) {
	tb.Helper()
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.StartIn, cfg.DemoUsers, cfg.Demo, cfg.LogLevel = "127.0.0.1:0", 0, 10, true, "warn"
	cfg.Variants = []stock.Variant{{ID: "36", Stock: 1}, {ID: "37", Stock: 1}}
	cfg.Stock = 2
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(tb, err)
	base, err := a.Start()
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	wins := map[string]sizeWin{}
	for i, v := range []string{"36", "37"} {
		user, req := []string{"user1", "user2"}[i], "winner-"+v
		bearer, path, body := benchBuyer(tb, base, user, req)
		body = withVariant(tb, body, v)
		code, m := benchCall(tb, base, "POST", path, bearer, json.RawMessage(body))
		require.Equal(tb, http.StatusAccepted, code, m)
		wins[v] = sizeWin{bearer, path, body, app.ClientReservationID([]string{"1", "2"}[i], req) + "/" + v}
		assert.Equal(tb, wins[v].resv, m["reservation"])
	}
	for i, v := range []string{"36", "37"} {
		bearer, path, body := benchBuyer(tb, base, "user3", "lost-"+v)
		w, reads := buyRead(tb, a, bearer, path, withVariant(tb, body, v))
		require.Equal(tb, http.StatusConflict, w.Code, w.Body.String())
		if i == 0 {
			assert.NotZero(tb, reads, "37 still sells: the body is read")
		}
	}
	return a, base, wins
}

// TestSoldOutSizesReadsNoBody is TestSoldOutRefusalReadsNoBody for a sale
// in sizes (36 and 37, one unit each): once every size is sold out, a
// buyer who won no size is refused 409 without the body being read; while
// one size still sells, the body is read; the winners of each size get
// their reservation back. Before, the sale's ID had no sold-out flag of
// its own (only each size's), so every losing buyer's body was parsed.
func TestSoldOutSizesReadsNoBody(t *testing.T) {
	a, base, wins := soldOutSizes(t)
	bearer, path, body := benchBuyer(t, base, "user4", "lost4")
	w, reads := buyRead(t, a, bearer, path, withVariant(t, body, "36"))
	assert.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	assert.JSONEq(t, `{"status":"sold_out","message":"sold out"}`, w.Body.String())
	assert.Zero(t, reads, "every size sold out: the body of a buyer who won nothing was read")

	// Each winner's retry gets its reservation back: queued, or already an
	// order when the consumer was quicker.
	for v, wn := range wins {
		code, m := benchCall(t, base, "POST", wn.path, wn.bearer, json.RawMessage(wn.body))
		if code == http.StatusOK {
			assert.Equal(t, "created", m["status"], m)
		} else {
			assert.Equal(t, http.StatusAccepted, code, "size %s: %v", v, m)
		}
		assert.Equal(t, wn.resv, m["reservation"], "size %s", v)
	}
}

// BenchmarkBuySoldOutSizes is BenchmarkBuySoldOut for a sale in sizes
// whose every size is sold out: a buyer who won nothing, with a valid
// path and a body naming a size (the handler called in-process).
func BenchmarkBuySoldOutSizes(b *testing.B) {
	a, base, _ := soldOutSizes(b)
	bearer, path, body := benchBuyer(b, base, "user5", "loser5")
	body = withVariant(b, body, "36")
	h := a.Handler()
	req := httptest.NewRequest("POST", path, nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.ContentLength = int64(len(body))
	rd := bytes.NewReader(body)
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.code, w.body = 0, w.body[:0]
		h.ServeHTTP(w, req)
		if w.code != http.StatusConflict {
			b.Fatalf("buy: %d %s", w.code, w.body)
		}
	}
}
