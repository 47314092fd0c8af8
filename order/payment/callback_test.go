package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
)

var testSecret = []byte("whsec_test")

type callbackFixture struct {
	*fixture
	h    *Handler
	now  *testenv.Clock // the handler's clock
	rdb  Client
	conf []status.Payment
	mu   sync.Mutex
	late int
}

func newCallbackFixture(t *testing.T, db *gorm.DB, n int) *callbackFixture {
	t.Helper()
	cf := &callbackFixture{now: testenv.NewEpochClock(0)}
	cf.fixture = newFixture(t, db, 20, n,
		status.WithOnPayConflict(func(_ context.Context, _ order.Order, p status.Payment) {
			cf.mu.Lock()
			cf.conf = append(cf.conf, p)
			cf.mu.Unlock()
		}),
		status.WithOnPayCancelled(func(context.Context, order.Order) {
			cf.mu.Lock()
			cf.late++
			cf.mu.Unlock()
		}))
	cf.callbacks = true
	cf.rdb = testenv.Redis(t)
	var err error
	cf.h, err = NewHandler("stripe", cf.c, cf.rdb, HMACSHA256(testSecret), WithClock(cf.now), WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	return cf
}

func body(t testing.TB, e Event) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return b
}

// post delivers a callback signed at at with secret and returns the code
// and outcome.
func (cf *callbackFixture) post(t testing.TB, b []byte, sig string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/cb", bytes.NewReader(b))
	if sig != "" {
		r.Header.Set("Seckill-Signature", sig)
	}
	w := httptest.NewRecorder()
	cf.h.ServeHTTP(w, r)
	var a struct{ Outcome string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &a))
	return w.Code, a.Outcome
}

func (cf *callbackFixture) send(t testing.TB, e Event) (int, string) {
	t.Helper()
	b := body(t, e)
	return cf.post(t, b, Sign(testSecret, cf.now.Now(), b))
}

func TestCallbackPayRefundExpire(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		cf := newCallbackFixture(t, db, 3)
		paid := Event{ID: "evt_1", Type: EventPaid, OrderNo: cf.nos[0], Reference: "pi_1"}
		code, out := cf.send(t, paid)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "paid", out)
		code, out = cf.send(t, paid)
		assert.Equal(t, "duplicate", out, "a replayed event ID changes nothing")
		assert.Equal(t, http.StatusOK, code)
		// the same payment under another event ID (the provider's retry): the same answer
		code, out = cf.send(t, Event{ID: "evt_1b", Type: EventPaid, OrderNo: cf.nos[0], Reference: "pi_1"})
		assert.Equal(t, "paid", out)
		code, out = cf.send(t, Event{ID: "evt_2", Type: EventPaid, OrderNo: cf.nos[0], Reference: "pi_2"})
		assert.Equal(t, "conflict", out)
		assert.Equal(t, []status.Payment{{Provider: "stripe", Reference: "pi_2"}}, cf.conf)

		code, out = cf.send(t, Event{ID: "evt_3", Type: EventRefunded, OrderNo: cf.nos[0], Restock: status.RestockSale})
		assert.Equal(t, "refunded", out)
		code, out = cf.send(t, Event{ID: "evt_3b", Type: EventRefunded, OrderNo: cf.nos[0], Restock: status.RestockSale})
		assert.Equal(t, "already_refunded", out)
		assert.Equal(t, order.OrderRefunded, cf.order(t, cf.nos[0]).Status)

		code, out = cf.send(t, Event{ID: "evt_4", Type: EventExpired, OrderNo: cf.nos[1]})
		assert.Equal(t, "cancelled", out)
		code, out = cf.send(t, Event{ID: "evt_5", Type: EventPaid, OrderNo: cf.nos[1], Reference: "pi_5"})
		assert.Equal(t, "late", out)
		assert.Equal(t, 1, cf.late)

		code, out = cf.send(t, Event{ID: "evt_6", Type: EventPaid, OrderNo: "404", Reference: "pi_6"})
		assert.Equal(t, http.StatusNotFound, code)
		code, out = cf.send(t, Event{ID: "evt_7", Type: "payment.weird", OrderNo: cf.nos[2]})
		assert.Equal(t, http.StatusBadRequest, code)
		code, _ = cf.send(t, Event{ID: "evt_7", Type: EventPaid, OrderNo: cf.nos[2], Reference: "pi_7"})
		assert.Equal(t, http.StatusOK, code, "a refused event releases its ID: the fixed retry goes through")
		assert.Equal(t, order.OrderPaid, cf.order(t, cf.nos[2]).Status)
		_ = code
		cf.fixture.check(t)
	})
}

// Forged, stale and replayed callbacks change nothing: no order row, no
// payment row, no Redis stock moves.
func TestCallbackForgedStaleReplayedChangeNothing(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		cf := newCallbackFixture(t, db, 1)
		no := cf.nos[0]
		e := Event{ID: "evt_1", Type: EventPaid, OrderNo: no, Reference: "pi_1"}
		b := body(t, e)
		now := cf.now.Now()
		other := body(t, Event{ID: "evt_1", Type: EventPaid, OrderNo: no, Reference: "pi_evil"})
		cases := map[string]struct {
			b   []byte
			sig string
		}{
			"unsigned":          {b, ""},
			"wrong secret":      {b, Sign([]byte("guess"), now, b)},
			"body changed":      {other, Sign(testSecret, now, b)},
			"timestamp changed": {b, "t=" + strconv.FormatInt(now.Unix()+1, 10) + ",v1=" + Sign(testSecret, now, b)[len("t=")+len(strconv.FormatInt(now.Unix(), 10))+len(",v1="):]},
			"stale":             {b, Sign(testSecret, now.Add(-6*time.Minute), b)},
			"from the future":   {b, Sign(testSecret, now.Add(6*time.Minute), b)},
			"garbage":           {b, "t=x,v1=zz"},
		}
		for name, c := range cases {
			code, _ := cf.post(t, c.b, c.sig)
			assert.Equal(t, http.StatusUnauthorized, code, name)
		}
		assert.Equal(t, order.OrderCreated, cf.order(t, no).Status)
		var rows int64
		require.NoError(t, db.Table("seckill_payment").Count(&rows).Error)
		assert.Zero(t, rows)

		// the genuine one, then its replay within the tolerance and after it
		code, out := cf.post(t, b, Sign(testSecret, now, b))
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "paid", out)
		_, out = cf.post(t, b, Sign(testSecret, now, b))
		assert.Equal(t, "duplicate", out)
		cf.now.Add(10 * time.Minute)
		code, _ = cf.post(t, b, Sign(testSecret, now, b))
		assert.Equal(t, http.StatusUnauthorized, code, "stale replay")
		require.NoError(t, db.Table("seckill_payment").Count(&rows).Error)
		assert.EqualValues(t, 1, rows)
		cf.fixture.check(t)
	})
}

// Many deliveries of the same events at once (a provider retrying, out of
// order): each event applied once, the order's end state the one of the
// events, stock back once.
func TestCallbackDuplicatesConcurrent(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		cf := newCallbackFixture(t, db, 10)
		var wg sync.WaitGroup
		var mu sync.Mutex
		retry := map[string]Event{} // answered 409: the provider delivers them again
		refunded := map[string]bool{}
		for i, no := range cf.nos {
			evs := []Event{{ID: fmt.Sprint("p", i), Type: EventPaid, OrderNo: no, Reference: fmt.Sprint("pi_", i)},
				{ID: fmt.Sprint("x", i), Type: EventExpired, OrderNo: no}}
			if i%2 == 0 {
				evs = append(evs, Event{ID: fmt.Sprint("r", i), Type: EventRefunded, OrderNo: no, Restock: status.RestockSale})
				refunded[no] = true
			}
			for _, e := range evs {
				for range 3 {
					wg.Go(func() {
						code, _ := cf.send(t, e)
						switch code {
						case http.StatusOK:
						case http.StatusConflict:
							mu.Lock()
							retry[e.ID] = e
							mu.Unlock()
						default:
							t.Errorf("%s: %d", e.ID, code)
						}
					})
				}
			}
		}
		wg.Wait()
		for id, e := range retry {
			code, out := cf.send(t, e)
			assert.Equal(t, http.StatusOK, code, "%s: %s", id, out)
		}
		for _, no := range cf.nos {
			st := cf.order(t, no).Status
			if refunded[no] {
				assert.Contains(t, []string{order.OrderCancelled, order.OrderRefunded}, st, "a refund event is never lost")
			} else {
				assert.Contains(t, []string{order.OrderPaid, order.OrderCancelled}, st)
			}
		}
		cf.fixture.check(t)
	})
}

func TestNewHandlerConfig(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	require.NoError(t, order.AutoMigrate(context.Background(), db))
	c, err := status.NewCanceller(db, nil, order.ReleaserFunc(func(context.Context, string, string) error { return nil }))
	require.NoError(t, err)
	rdb := testenv.Redis(t)
	v := HMACSHA256(testSecret)
	for name, f := range map[string]func() (*Handler, error){
		"provider":  func() (*Handler, error) { return NewHandler("", c, rdb, v) },
		"canceller": func() (*Handler, error) { return NewHandler("p", nil, rdb, v) },
		"redis":     func() (*Handler, error) { return NewHandler("p", c, nil, v) },
		"verifier":  func() (*Handler, error) { return NewHandler("p", c, rdb, nil) },
		"clock":     func() (*Handler, error) { return NewHandler("p", c, rdb, v, WithClock(nil)) },
		"tolerance": func() (*Handler, error) { return NewHandler("p", c, rdb, v, WithTolerance(0)) },
	} {
		_, err := f()
		assert.ErrorIs(t, err, order.ErrInvalidConfig, name)
	}
	h, err := NewHandler("p", c, rdb, v, nil)
	require.NoError(t, err)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	_, err = HMACSHA256(nil)(http.Header{}, nil)
	assert.ErrorIs(t, err, ErrRefused)
}

// FuzzHMACSHA256 checks the verifier on any header and body: it never
// panics, accepts only a signature Sign would make for that body and
// timestamp, and refuses the genuine signature once a byte of the body
// changes.
func FuzzHMACSHA256(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	seed := []byte(`{"id":"evt_1","type":"payment.paid","order_no":"1","reference":"pi_1"}`)
	f.Add(seed, Sign(testSecret, now, seed), uint(3))
	f.Add([]byte("{}"), "t=1,v1=00", uint(0))
	f.Add([]byte(""), "", uint(0))
	f.Add(seed, "t=01800000000,v1="+Sign(testSecret, now, seed)[len("t=1800000000,v1="):], uint(1))
	v := HMACSHA256(testSecret)
	f.Fuzz(func(t *testing.T, b []byte, sig string, flip uint) {
		h := http.Header{}
		h.Set("Seckill-Signature", sig)
		e, err := v(h, b)
		if err == nil && Sign(testSecret, e.At, b) != canonical(sig) {
			t.Fatalf("accepted %q for %q", sig, b)
		}
		if len(b) == 0 {
			return
		}
		good := http.Header{}
		good.Set("Seckill-Signature", Sign(testSecret, now, b))
		mut := bytes.Clone(b)
		mut[flip%uint(len(mut))] ^= 0x01
		if _, err := v(good, mut); err == nil {
			t.Fatalf("a changed body passed: %q", mut)
		}
	})
}

// canonical is the t and v1 parts of a header the verifier accepted, in
// Sign's form (lower-case hex).
func canonical(sig string) string {
	var t, v string
	for _, part := range bytes.Split([]byte(sig), []byte(",")) {
		k, val, _ := bytes.Cut(bytes.TrimSpace(part), []byte("="))
		switch string(k) {
		case "t":
			t = string(val)
		case "v1":
			v = string(bytes.ToLower(val))
		}
	}
	return "t=" + t + ",v1=" + v
}

// setArgsHook records the arguments of every SET NX.
type setArgsHook struct {
	mu   sync.Mutex
	args [][]any
}

func (h *setArgsHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *setArgsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *setArgsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); cmd.Name() == "set" && slices.ContainsFunc(a, func(x any) bool { s, _ := x.(string); return strings.EqualFold(s, "nx") }) {
			h.mu.Lock()
			h.args = append(h.args, a)
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// TestCallbackClaimIsALease: the replay guard's claim of an event being
// applied lapses after claimLease, not twice the tolerance: a node that
// dies mid-apply holds up the provider's retries for seconds, not for the
// order's payment window.
func TestCallbackClaimIsALease(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	require.NoError(t, order.AutoMigrate(context.Background(), db))
	cf := newCallbackFixture(t, db, 1)
	rdb, _ := testenv.Miniredis(t)
	hook := &setArgsHook{}
	rdb.AddHook(hook)
	h, err := NewHandler("stripe", cf.c, rdb, HMACSHA256(testSecret), WithClock(cf.now), WithTolerance(time.Hour))
	require.NoError(t, err)
	cf.h = h
	code, out := cf.send(t, Event{ID: "evt_lease", Type: EventPaid, OrderNo: cf.nos[0], Reference: "pi_lease"})
	require.Equal(t, http.StatusOK, code, out)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	require.Len(t, hook.args, 1, "one claim")
	a := hook.args[0] // set key pending ex|px N nx
	var ttl time.Duration
	for i := 0; i+1 < len(a); i++ {
		switch s, _ := a[i].(string); strings.ToLower(s) {
		case "ex":
			ttl = time.Duration(a[i+1].(int64)) * time.Second
		case "px":
			ttl = time.Duration(a[i+1].(int64)) * time.Millisecond
		}
	}
	require.Equal(t, claimLease, ttl, "the claim's TTL (args %v)", a)
}
