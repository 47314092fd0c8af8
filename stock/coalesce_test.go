package stock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Batches in these tests are formed by hand: the window is an hour and
// maxBatch large, the test adds requests one at a time (waiting until each
// has joined the open batch, so their order in it is known) and then seals
// and sends the batch with flushNow, the path the window's timer takes.
const handWindow = time.Hour

type reply struct {
	res Result
	err error
}

func reserveAsync(ctx context.Context, d *Deductor, req Request) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		res, err := d.Reserve(ctx, req)
		ch <- reply{res, err}
	}()
	return ch
}

// queuedCalls is the number of requests in the activity's open batch.
func queuedCalls(d *Deductor, activity string) int {
	d.co.mu.Lock()
	defer d.co.mu.Unlock()
	if b := d.co.open[plain(activity)]; b != nil {
		return len(b.calls)
	}
	return 0
}

// waitQueued yields until the open batch of activity holds n requests. It
// does not sleep: the goroutines it waits for only need to be scheduled.
func waitQueued(d *Deductor, activity string, n int) {
	for queuedCalls(d, activity) != n {
		runtime.Gosched()
	}
}

// flushNow seals and sends the activity's open batch, as its timer would.
func flushNow(d *Deductor, activity string) {
	d.co.mu.Lock()
	b := d.co.open[plain(activity)]
	d.co.mu.Unlock()
	if b != nil {
		b.timer.Stop()
		d.co.flush(b)
	}
}

// batchOf decides reqs (all of one activity) as one batch, in this order.
func batchOf(t testing.TB, d *Deductor, reqs ...Request) []reply {
	t.Helper()
	require.Zero(t, queuedCalls(d, reqs[0].Activity), "a batch is already open")
	chs := make([]<-chan reply, len(reqs))
	for i, r := range reqs {
		require.Equal(t, reqs[0].Activity, r.Activity)
		chs[i] = reserveAsync(context.Background(), d, r)
		waitQueued(d, r.Activity, i+1)
	}
	flushNow(d, reqs[0].Activity)
	out := make([]reply, len(reqs))
	for i, ch := range chs {
		out[i] = <-ch
	}
	return out
}

func TestCoalescingOption(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	d, err := New(rdb, WithCoalescing(0, 0))
	require.NoError(t, err)
	assert.Equal(t, defaultCoalesceWindow, d.co.window)
	assert.Equal(t, defaultCoalesceMaxBatch, d.co.max)
	d, err = New(rdb, WithCoalescing(200*time.Microsecond, maxCoalesceBatch))
	require.NoError(t, err)
	assert.Equal(t, 200*time.Microsecond, d.co.window)
	assert.Equal(t, maxCoalesceBatch, d.co.max)
	d, err = New(rdb)
	require.NoError(t, err)
	assert.Nil(t, d.co, "off by default")
	for name, o := range map[string]DeductorOption{
		"negative window":    WithCoalescing(-time.Millisecond, 10),
		"negative max batch": WithCoalescing(time.Millisecond, -1),
		"max batch too big":  WithCoalescing(time.Millisecond, maxCoalesceBatch+1),
	} {
		_, err := New(rdb, o)
		assert.Error(t, err, name)
	}
}

// step of the randomized sequence: one batch of reserves, then releases.
type step struct {
	reqs     []Request // Activity set when run
	releases []string
	freeze   bool // freeze the activity before the batch, unfreeze after it
}

// genSteps draws a sequence full of the cases that matter: the same request
// ID twice in one batch, IDs reused with another user or qty (conflicts), a
// qty above the cap (2), buyers hitting the cap, stock running out and
// coming back through releases, releases of IDs not reserved yet
// (tombstones) and their later reserves, and a frozen stretch.
func genSteps(seed uint64) []step {
	rng := rand.New(rand.NewPCG(seed, seed*7919+1))
	const ids = 40
	// Numeric user IDs for odd seeds, UUIDs for even ones.
	userID := func(n int64) string {
		if seed%2 == 0 {
			return uuidOf(n)
		}
		return uid(n)
	}
	user := make([]string, ids)
	qty := make([]int64, ids)
	for i := range ids {
		user[i], qty[i] = userID(rng.Int64N(12)+1), rng.Int64N(2)+1
	}
	var steps []step
	for round := range 40 {
		var s step
		for range rng.IntN(12) + 1 {
			i := rng.IntN(ids)
			r := Request{User: user[i], Qty: qty[i], ReservationID: "r" + strconv.Itoa(i)}
			if rng.IntN(5) == 0 { // another user or qty: a conflict once the ID is known
				r.User, r.Qty = userID(rng.Int64N(12)+1), rng.Int64N(3)+1
			}
			s.reqs = append(s.reqs, r)
		}
		for range rng.IntN(3) {
			s.releases = append(s.releases, "r"+strconv.Itoa(rng.IntN(ids)))
		}
		s.freeze = round == 17 || round == 18
		steps = append(steps, s)
	}
	return steps
}

// norm is what must be equal between the two runs (times differ).
type norm struct {
	Status                 Status
	Remaining, Held, Limit int64
	Replayed, Local, At    bool
	Err                    string
}

func normalize(r reply) norm {
	n := norm{Status: r.res.Status, Remaining: r.res.Remaining, Held: r.res.Held, Limit: r.res.Limit,
		Replayed: r.res.Replayed, Local: r.res.Local, At: !r.res.ReservedAt.IsZero()}
	switch {
	case r.err == nil:
	case errors.Is(r.err, ErrIDConflict):
		n.Err = "conflict"
	case errors.Is(r.err, ErrInvalidArgument):
		n.Err = "invalid"
	default:
		n.Err = r.err.Error()
	}
	return n
}

// TestCoalescedEqualsOneByOne runs the same randomized sequence one request
// at a time on one activity and in batches (each step one batch, in the
// same order) on another, and requires the same result for every request
// and the same meta (stock, seq, frozen, …), buyers and ledger (but for the
// Redis times), read with HGETALL. It also runs one batch per activity not
// started, ended and not loaded. The sold-out cache is off in both runs:
// it refuses in-process after a sell-out in the one-by-one run, where the
// batch already is in Redis.
func TestCoalescedEqualsOneByOne(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		for _, seed := range []uint64{1, 2, 3} {
			one := newTestDeductor(t, rdb, prefix, WithoutSoldOutCache())
			co := newTestDeductor(t, rdb, prefix, WithoutSoldOutCache(), WithCoalescing(handWindow, maxCoalesceBatch))
			a1, a2 := uid(seed*10+1), uid(seed*10+2)
			if seed == 2 {
				a1, a2 = "sale-"+uuidOf(seed*10+1), "sale-"+uuidOf(seed*10+2)
			}
			for _, a := range []string{a1, a2} {
				mustLoad(t, one, Activity{ID: a, Stock: 14, PerUserLimit: 2})
			}
			kinds := map[string]int{}
			for i, s := range genSteps(seed) {
				if s.freeze {
					require.NoError(t, one.Freeze(ctx, a1))
					require.NoError(t, co.Freeze(ctx, a2))
				}
				want := make([]reply, len(s.reqs))
				reqs2 := make([]Request, len(s.reqs))
				for j, r := range s.reqs {
					r.Activity = a1
					res, err := one.Reserve(ctx, r)
					want[j] = reply{res, err}
					r.Activity = a2
					reqs2[j] = r
				}
				got := batchOf(t, co, reqs2...)
				for j := range want {
					w, g := normalize(want[j]), normalize(got[j])
					require.Equal(t, w, g, "seed %d step %d request %d %+v", seed, i, j, s.reqs[j])
					kinds[fmt.Sprintf("%v/%v/%s", w.Status, w.Replayed, w.Err)]++
				}
				if s.freeze {
					require.NoError(t, one.Unfreeze(ctx, a1))
					require.NoError(t, co.Unfreeze(ctx, a2))
				}
				for _, id := range s.releases {
					r1, err := one.Release(ctx, a1, id)
					require.NoError(t, err)
					r2, err := co.Release(ctx, a2, id)
					require.NoError(t, err)
					require.Equal(t, r1, r2, "release %s", id)
				}
			}
			t.Logf("seed %d: outcomes %v", seed, kinds)
			for _, k := range []string{"reserved/false/", "reserved/true/", "sold out/false/", "limit reached/false/",
				"released/true/", "frozen/false/", "unknown/false/conflict", "unknown/false/invalid"} {
				assert.Positive(t, kinds[k], "seed %d never produced %s", seed, k)
			}

			k1, k2 := activityKeys(prefix, a1), activityKeys(prefix, a2)
			m1, m2 := hgetall(t, rdb, k1.meta), hgetall(t, rdb, k2.meta)
			for _, f := range []string{"stock", "total", "limit", "start", "end", "seq", "frozen", "origin"} {
				assert.Equal(t, m1[f], m2[f], "meta %s", f)
			}
			b1 := hgetall(t, rdb, k1.buyers)
			assert.Equal(t, b1, hgetall(t, rdb, k2.buyers), "buyers")
			l1, l2 := hgetall(t, rdb, k1.ledger), hgetall(t, rdb, k2.ledger)
			assert.Equal(t, untimed(t, l1), untimed(t, l2), "ledger")
			// And the sale is exact: remaining + held in the ledger = loaded.
			var held int64
			for _, rec := range untimed(t, l1) {
				f := strings.Split(rec, ":")
				if f[2] == "R" {
					q, err := strconv.ParseInt(f[1], 10, 64)
					require.NoError(t, err)
					held += q
				}
			}
			rem, err := strconv.ParseInt(m1["stock"], 10, 64)
			require.NoError(t, err)
			assert.EqualValues(t, 14, rem+held)
		}

		// The window (Redis TIME, real on real servers and on miniredis
		// without SetTime, so the real clock) and an unloaded activity.
		now := testenv.NewRealClock().Now()
		one := newTestDeductor(t, rdb, prefix, WithoutSoldOutCache())
		co := newTestDeductor(t, rdb, prefix, WithoutSoldOutCache(), WithCoalescing(handWindow, maxCoalesceBatch))
		for i, c := range []struct {
			name string
			a    Activity
			want Status
		}{
			{"not started", Activity{Stock: 5, Start: now.Add(time.Hour)}, NotStarted},
			{"ended", Activity{Stock: 5, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour)}, Ended},
			{"not loaded", Activity{}, NotLoaded},
		} {
			a1, a2 := uid(101+2*i), uid(102+2*i)
			if c.want != NotLoaded {
				for _, id := range []string{a1, a2} {
					a := c.a
					a.ID = id
					mustLoad(t, one, a)
				}
			}
			reqs := []Request{{User: "1", Qty: 1, ReservationID: "x"}, {User: "2", Qty: 1, ReservationID: "y"}, {User: "1", Qty: 1, ReservationID: "x"}}
			var want []reply
			for _, r := range reqs {
				r.Activity = a1
				res, err := one.Reserve(ctx, r)
				want = append(want, reply{res, err})
			}
			for i := range reqs {
				reqs[i].Activity = a2
			}
			got := batchOf(t, co, reqs...)
			for i := range want {
				assert.Equal(t, c.want, want[i].res.Status, c.name)
				assert.Equal(t, normalize(want[i]), normalize(got[i]), c.name)
			}
		}
	})
}

// untimed strips the Redis times from ledger records: user:qty:state.
func untimed(t *testing.T, l map[string]string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(l))
	for id, rec := range l {
		f := strings.Split(rec, ":")
		require.GreaterOrEqual(t, len(f), 4, rec)
		out[id] = strings.Join(f[:3], ":") + ":" + strconv.Itoa(len(f))
	}
	return out
}

// TestCoalescedTenThousandBuyers: 10,000 goroutines started together
// against stock 100 with coalescing on (default window and batch), per-user
// cap 1 with qty 1 (UUID user IDs) and cap 3 with qty 1–3 (numeric user
// IDs). Counted from the hashes with
// HGETALL: no oversell, no buyer above the cap, remaining + held = 100, and
// the ledger, the buyers hash and the results agree.
func TestCoalescedTenThousandBuyers(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		for _, c := range []struct {
			name         string
			limit, users int64
			user         func(int64) string
		}{{"cap1", 1, 10000, uuidOf[int64]}, {"cap3", 3, 2500, uid[int64]}} {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				cc := &countingClient{UniversalClient: rdb}
				pfx := prefix + c.name + ":"
				d := newTestDeductor(t, cc, pfx, WithCoalescing(0, 0))
				const activity, stock, n = "5", 100, 10000
				mustLoad(t, d, Activity{ID: activity, Stock: stock, PerUserLimit: c.limit})

				var (
					wg    sync.WaitGroup
					start = make(chan struct{})
					mu    sync.Mutex
					got   = map[string]int64{} // user -> units from Reserved results
					ids   = map[string]bool{}
					total int64
					local int
					fails []error
				)
				for i := range n {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						<-start
						req := Request{Activity: activity, User: c.user(int64(i)%c.users + 1), Qty: int64(i)%c.limit + 1, ReservationID: "q" + strconv.Itoa(i)}
						res, err := d.Reserve(ctx, req)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err != nil:
							fails = append(fails, err)
						case res.Status == Reserved:
							got[req.User] += req.Qty
							total += req.Qty
							ids[req.ReservationID] = true
						case res.Status == SoldOut:
							if res.Local {
								local++
							} else if res.Remaining >= req.Qty {
								fails = append(fails, fmt.Errorf("sold out with %d left for qty %d", res.Remaining, req.Qty))
							}
						case res.Status == LimitReached:
							if res.Held+req.Qty <= c.limit {
								fails = append(fails, fmt.Errorf("limit reached with %d held for qty %d", res.Held, req.Qty))
							}
						default:
							fails = append(fails, fmt.Errorf("unexpected status %v", res.Status))
						}
					}(i)
				}
				close(start)
				wg.Wait()
				require.Empty(t, firstN(fails, 5), "%d failures", len(fails))
				t.Logf("%d script calls for %d requests that reached Redis, %d refused in-process",
					cc.count(reserveManyScript), n-local, local)
				assert.Zero(t, cc.count(reserveScript), "the single-request script is not used")

				k := activityKeys(pfx, activity)
				rem := hint(t, rdb, k.meta, "stock")
				led := hgetall(t, rdb, k.ledger)
				buyers := hgetall(t, rdb, k.buyers)
				var held int64
				per := map[string]int64{}
				for id, rec := range led {
					r, err := parseRecord(id, rec)
					require.NoError(t, err)
					require.Equal(t, Held, r.State)
					assert.True(t, ids[id], "ledger entry %s without a Reserved result", id)
					held += r.Qty
					per[r.User] += r.Qty
				}
				assert.Len(t, led, len(ids))
				assert.EqualValues(t, stock, rem+held, "remaining + held != loaded")
				assert.EqualValues(t, stock-rem, total, "results disagree with the hashes")
				if c.limit == 1 {
					assert.EqualValues(t, stock, held, "exactly the stock is reserved")
				}
				assert.Less(t, rem, c.limit)
				assert.Equal(t, got, per)
				assert.Len(t, buyers, len(per))
				for u, q := range buyers {
					assert.Equal(t, strconv.FormatInt(per[u], 10), q, "buyer %s", u)
					assert.LessOrEqual(t, per[u], c.limit, "buyer %s above the cap", u)
				}
				assert.EqualValues(t, len(ids), hint(t, rdb, k.meta, "seq"), "one seq step per reservation")
			})
		}
	})
}

// holdHook holds the first reserve_many.lua call the client makes until
// release is closed: before it reaches Redis, or (after) once Redis has run
// it, with err then replacing its reply (a timeout after the script ran).
type holdHook struct {
	after    bool
	err      error
	held     atomic.Bool
	in       chan struct{} // closed when the call is held
	release  chan struct{}
	deadline atomic.Pointer[time.Time] // the held call's context deadline
}

func newHoldHook() *holdHook {
	return &holdHook{in: make(chan struct{}), release: make(chan struct{})}
}

func isReserveMany(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 1 && (cmd.Name() == "evalsha" && args[1] == reserveManyScript.Hash() ||
		cmd.Name() == "eval" && args[1] == reserveManyLua)
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isReserveMany(cmd) || !h.held.CompareAndSwap(false, true) {
			return next(ctx, cmd)
		}
		if dl, ok := ctx.Deadline(); ok {
			h.deadline.Store(&dl)
		}
		if !h.after {
			close(h.in)
			<-h.release
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		close(h.in)
		<-h.release
		if h.err != nil {
			cmd.SetErr(h.err)
			return h.err
		}
		return err
	}
}

// holdRig is a Deductor with coalescing (a batch is sent when it holds max
// requests; the window never fires) on a miniredis client with a holdHook.
type holdRig struct {
	rdb    *redis.Client
	hook   *holdHook
	d      *Deductor
	prefix string
}

func newHoldRig(t *testing.T, hook *holdHook, maxBatch int, opts ...DeductorOption) *holdRig {
	c, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	c.AddHook(hook)
	require.NoError(t, reserveManyScript.Load(context.Background(), c).Err())
	d := newTestDeductor(t, c, prefix, append([]DeductorOption{WithCoalescing(handWindow, maxBatch)}, opts...)...)
	mustLoad(t, d, Activity{ID: "1", Stock: 100, PerUserLimit: 1})
	return &holdRig{rdb: c, hook: hook, d: d, prefix: prefix}
}

func (g *holdRig) ledger(t *testing.T) map[string]string {
	return hgetall(t, g.rdb, activityKeys(g.prefix, "1").ledger)
}

func req1(user int64, id string) Request {
	return Request{Activity: "1", User: uid(user), Qty: 1, ReservationID: id}
}

// parkedInWait reports whether some goroutine is blocked in batch.wait: a
// caller whose context ended after its request was sent, waiting for the
// outcome.
func parkedInWait() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[chan receive") && strings.Contains(g, "stock.(*batch).wait") {
			return true
		}
	}
	return false
}

// TestCoalescedCancellation: a caller whose context ends before its batch
// is sent gets the context's error and its request is never sent; a caller
// whose context ends after it was sent waits for, and gets, its real
// outcome; a request arriving while its batch is in Redis goes in the next
// batch. Redis is held still by a go-redis hook.
func TestCoalescedCancellation(t *testing.T) {
	t.Parallel()

	t.Run("ended before sent: never sent", func(t *testing.T) {
		t.Parallel()
		g := newHoldRig(t, newHoldHook(), 3)
		close(g.hook.release)
		ctxA, cancelA := context.WithCancel(context.Background())
		a := reserveAsync(ctxA, g.d, req1(1, "a"))
		waitQueued(g.d, "1", 1)
		cancelA()
		oa := <-a
		require.ErrorIs(t, oa.err, context.Canceled)
		assert.ErrorIs(t, oa.err, ErrUnavailable, "as a single call whose context ended")

		// b and c fill the batch (3 slots, a's abandoned): it goes without a.
		b := reserveAsync(context.Background(), g.d, req1(2, "b"))
		waitQueued(g.d, "1", 2)
		c := reserveAsync(context.Background(), g.d, req1(3, "c"))
		for _, o := range []reply{<-b, <-c} {
			require.NoError(t, o.err)
			assert.Equal(t, Reserved, o.res.Status)
		}
		l := g.ledger(t)
		assert.NotContains(t, l, "a", "a was reported as not sent: it must never run")
		assert.Contains(t, l, "b")
		assert.Contains(t, l, "c")
		assert.EqualValues(t, 98, hint(t, g.rdb, activityKeys(g.prefix, "1").meta, "stock"))

		// A context already ended never joins a batch.
		n := queuedCalls(g.d, "1")
		_, err := g.d.Reserve(ctxA, req1(4, "d"))
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, n, queuedCalls(g.d, "1"))
	})

	t.Run("ended after sent: waits for its outcome", func(t *testing.T) {
		t.Parallel()
		g := newHoldRig(t, &holdHook{after: true, in: make(chan struct{}), release: make(chan struct{})}, 2)
		ctxA, cancelA := context.WithCancel(context.Background())
		defer cancelA()
		a := reserveAsync(ctxA, g.d, req1(1, "a"))
		waitQueued(g.d, "1", 1)
		b := reserveAsync(context.Background(), g.d, req1(2, "b")) // fills and sends the batch
		<-g.hook.in                                                // Redis has run it; the reply is held
		require.Contains(t, g.ledger(t), "a")
		cancelA()
		for !parkedInWait() {
			select {
			case oa := <-a:
				t.Fatalf("a returned %+v before its reply came, though Redis reserved it", oa)
			default:
				runtime.Gosched()
			}
		}
		close(g.hook.release)
		oa, ob := <-a, <-b
		require.NoError(t, oa.err, "a was sent: it gets its real outcome, not its context's error")
		assert.Equal(t, Reserved, oa.res.Status)
		require.NoError(t, ob.err)
		assert.Equal(t, Reserved, ob.res.Status)
	})

	t.Run("context ended while its batch ran", func(t *testing.T) {
		t.Parallel()
		g := newHoldRig(t, newHoldHook(), 2)
		ctxA := &endedCtx{Context: context.Background()}
		a := reserveAsync(ctxA, g.d, req1(1, "a"))
		waitQueued(g.d, "1", 1)
		b := reserveAsync(context.Background(), g.d, req1(2, "b"))
		<-g.hook.in
		ctxA.end(context.Canceled) // Err says ended; Done never fires
		close(g.hook.release)
		oa := <-a
		require.NoError(t, oa.err, "the outcome is the batch's, not the context's")
		assert.Equal(t, Reserved, oa.res.Status)
		require.NoError(t, (<-b).err)
		assert.Contains(t, g.ledger(t), "a")
	})

	t.Run("a request arriving while its batch is in redis goes in the next", func(t *testing.T) {
		t.Parallel()
		g := newHoldRig(t, newHoldHook(), 2)
		a := reserveAsync(context.Background(), g.d, req1(1, "a"))
		waitQueued(g.d, "1", 1)
		b := reserveAsync(context.Background(), g.d, req1(2, "b"))
		<-g.hook.in // {a, b} is held on its way to Redis
		c := reserveAsync(context.Background(), g.d, req1(3, "c"))
		waitQueued(g.d, "1", 1)
		d := reserveAsync(context.Background(), g.d, req1(4, "d"))
		for _, o := range []reply{<-c, <-d} { // the next batch is not held
			require.NoError(t, o.err)
			assert.Equal(t, Reserved, o.res.Status)
		}
		assert.NotContains(t, g.ledger(t), "a")
		close(g.hook.release)
		for _, o := range []reply{<-a, <-b} {
			require.NoError(t, o.err)
			assert.Equal(t, Reserved, o.res.Status)
		}
		assert.Len(t, g.ledger(t), 4)
	})
}

// endedCtx is a context whose Err reports an end that its Done channel
// never signals: it pins the caller in the state where its batch has been
// sent and its context has ended.
type endedCtx struct {
	context.Context
	err atomic.Pointer[error]
}

func (c *endedCtx) end(err error) { c.err.Store(&err) }

func (c *endedCtx) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TestCoalescedFailures: a Redis failure fails every request of the batch
// as a single call would and writes nothing; a timeout after the script ran
// is reported to every request as unavailable (uncertain), and retrying the
// same reservation IDs reserves nothing twice; the batch's deadline is the
// latest of its callers'.
func TestCoalescedFailures(t *testing.T) {
	t.Parallel()

	t.Run("redis down", func(t *testing.T) {
		t.Parallel()
		rdb, m := testenv.Miniredis(t)
		prefix := testenv.Prefix(t)
		d := newTestDeductor(t, rdb, prefix, WithCoalescing(handWindow, maxCoalesceBatch))
		mustLoad(t, d, Activity{ID: "1", Stock: 10})
		before := snapshot(t, rdb, prefix)
		for _, msg := range []string{"LOADING Redis is loading the dataset in memory", "CLUSTERDOWN The cluster is down"} {
			m.SetError(msg)
			for _, o := range batchOf(t, d, req1(1, "a"), req1(2, "b"), req1(3, "c")) {
				assert.ErrorIs(t, o.err, ErrUnavailable, msg)
				assert.Zero(t, o.res)
			}
		}
		m.SetError("ERR Error running script: boom")
		for _, o := range batchOf(t, d, req1(1, "a"), req1(2, "b")) {
			require.Error(t, o.err)
			assert.NotErrorIs(t, o.err, ErrUnavailable, "a script error is not an outage")
		}
		m.SetError("")
		assert.Equal(t, before, snapshot(t, rdb, prefix), "nothing written")
		for _, o := range batchOf(t, d, req1(1, "a"), req1(2, "b")) {
			require.NoError(t, o.err)
			assert.Equal(t, Reserved, o.res.Status)
		}
	})

	t.Run("timeout after the script ran", func(t *testing.T) {
		t.Parallel()
		h := &holdHook{after: true, err: context.DeadlineExceeded, in: make(chan struct{}), release: make(chan struct{})}
		close(h.release)
		g := newHoldRig(t, h, maxCoalesceBatch)
		meta := activityKeys(g.prefix, "1").meta
		for _, o := range batchOf(t, g.d, req1(1, "a"), req1(2, "b"), req1(3, "c")) {
			assert.ErrorIs(t, o.err, ErrUnavailable)
			assert.ErrorIs(t, o.err, context.DeadlineExceeded)
		}
		assert.Len(t, g.ledger(t), 3, "the script ran: the outcome was uncertain, not nothing")
		assert.EqualValues(t, 97, hint(t, g.rdb, meta, "stock"))
		for _, o := range batchOf(t, g.d, req1(1, "a"), req1(2, "b"), req1(3, "c"), req1(4, "d")) {
			require.NoError(t, o.err)
			assert.Equal(t, Reserved, o.res.Status)
		}
		assert.EqualValues(t, 96, hint(t, g.rdb, meta, "stock"), "retries deduct nothing twice")
		assert.Len(t, g.ledger(t), 4)
	})

	t.Run("the batch runs until its callers' latest deadline", func(t *testing.T) {
		t.Parallel()
		// Real deadlines on the real clock; nobody waits for them.
		now := testenv.NewRealClock().Now()
		for _, c := range []struct {
			name      string
			deadlines []time.Duration // 0: no deadline
			want      time.Duration   // 0: none
		}{
			{"latest", []time.Duration{time.Hour, 3 * time.Hour, 2 * time.Hour}, 3 * time.Hour},
			{"one without", []time.Duration{time.Hour, 0}, 0},
		} {
			h := newHoldHook()
			close(h.release)
			g := newHoldRig(t, h, len(c.deadlines))
			var chs []<-chan reply
			for i, dl := range c.deadlines {
				ctx := context.Background()
				if dl > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, now.Add(dl))
					defer cancel()
				}
				chs = append(chs, reserveAsync(ctx, g.d, req1(int64(i+1), strconv.Itoa(i))))
				if i < len(c.deadlines)-1 {
					waitQueued(g.d, "1", i+1)
				}
			}
			for _, ch := range chs {
				require.NoError(t, (<-ch).err)
			}
			got := h.deadline.Load()
			if c.want == 0 {
				assert.Nil(t, got, c.name)
			} else if assert.NotNil(t, got, c.name) {
				assert.True(t, got.Equal(now.Add(c.want)), "%s: %v", c.name, *got)
			}
		}
	})
}

// TestCoalescedFence: the data-loss fence judges each decision of a batch
// as it judges a single reply, and since a batch ran on one copy in one
// step, a loss shown by any decision answers all of them Frozen, reported
// once, the activity frozen in Redis (read with HGETALL).
func TestCoalescedFence(t *testing.T) {
	forEachRedisKind(t, func(t *testing.T, kind testenv.RedisKind, rdb redis.UniversalClient, prefix string) {
		t.Run("rollback", func(t *testing.T) {
			var losses lossLog
			d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook), WithCoalescing(handWindow, maxCoalesceBatch))
			k := activityKeys(prefix, "1")
			mustLoad(t, d, Activity{ID: "1", Stock: 10})
			for _, o := range batchOf(t, d, req1(1, "a"), req1(2, "b")) {
				require.Equal(t, Reserved, o.res.Status)
			}
			old := saveKeys(t, kind, rdb, k)
			for _, o := range batchOf(t, d, req1(3, "c"), req1(4, "d")) {
				require.Equal(t, Reserved, o.res.Status)
			}
			require.EqualValues(t, 4, hint(t, rdb, k.meta, "seq"))
			restoreKeys(t, rdb, old)

			// Redis answers them at seq 3, 4 and 5: the first is below the 4
			// already seen; the other two ran on the same rolled-back copy.
			for i, o := range batchOf(t, d, req1(5, "e"), req1(6, "f"), req1(7, "g")) {
				require.NoError(t, o.err)
				assert.Equal(t, Frozen, o.res.Status, "decision %d answered from a rolled-back copy", i)
			}
			require.Len(t, losses.get("1"), 1)
			assert.Contains(t, losses.get("1")[0], "rolled back")
			assert.Equal(t, "1", hgetall(t, rdb, k.meta)["frozen"])
			out := batchOf(t, d, req1(8, "h"), req1(1, "a"))
			require.NoError(t, out[0].err)
			assert.Equal(t, Frozen, out[0].res.Status, "frozen: new requests wait")
			require.NoError(t, out[1].err)
			assert.Equal(t, Reserved, out[1].res.Status, "a replay answers from the ledger")
			assert.True(t, out[1].res.Replayed)
			assert.Len(t, losses.get("1"), 1, "reported once")
		})

		t.Run("wipe", func(t *testing.T) {
			var losses lossLog
			d := newTestDeductor(t, rdb, prefix, WithOnLoss(losses.hook), WithCoalescing(handWindow, maxCoalesceBatch))
			k := activityKeys(prefix, "2")
			mustLoad(t, d, Activity{ID: "2", Stock: 10})
			r := Request{Activity: "2", User: "1", Qty: 1, ReservationID: "a"}
			require.Equal(t, Reserved, batchOf(t, d, r)[0].res.Status)
			wipe(t, rdb, k)
			r2, r3 := r, r
			r2.User, r2.ReservationID = "2", "b"
			r3.User, r3.ReservationID = "3", "c"
			for _, o := range batchOf(t, d, r2, r3) {
				require.NoError(t, o.err)
				assert.Equal(t, Frozen, o.res.Status, "not loaded before its expiry is a loss")
			}
			require.Len(t, losses.get("2"), 1)
			assert.Contains(t, losses.get("2")[0], "gone before their expiry")
		})
	})
}

// TestCoalescedHooksFallbackSoldOut: with coalescing on, OnReserve sees
// every request with its own outcome, the fallback is called per request
// when Redis is down, and the sold-out short-circuit works as without it
// (a winner's retry still reaches Redis and gets its reservation back).
func TestCoalescedHooksFallbackSoldOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, m := testenv.Miniredis(t)
	var (
		mu    sync.Mutex
		seen  = map[string]Result{}
		calls atomic.Int64
	)
	hook := func(_ context.Context, r Request, res Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			seen[r.ReservationID] = res
		}
	}
	fb := func(_ context.Context, r Request) (Result, error) {
		calls.Add(1)
		u, err := strconv.ParseInt(r.User, 10, 64)
		return Result{Status: Reserved, Remaining: 1000 + u}, err
	}
	d := newTestDeductor(t, rdb, testenv.Prefix(t), WithOnReserve(hook), WithFallback(fb),
		WithCoalescing(handWindow, maxCoalesceBatch), WithClock(testenv.NewEpochClock(0)))
	mustLoad(t, d, Activity{ID: "1", Stock: 1})

	m.SetError("LOADING Redis is loading the dataset in memory")
	for i, o := range batchOf(t, d, req1(1, "f1"), req1(2, "f2")) {
		require.NoError(t, o.err)
		assert.True(t, o.res.Fallback)
		assert.EqualValues(t, 1001+i, o.res.Remaining)
	}
	assert.EqualValues(t, 2, calls.Load())
	m.SetError("")

	out := batchOf(t, d, req1(1, "win"), req1(2, "lose"), req1(1, "win"))
	assert.Equal(t, Reserved, out[0].res.Status)
	assert.Equal(t, SoldOut, out[1].res.Status)
	assert.Equal(t, Reserved, out[2].res.Status)
	assert.True(t, out[2].res.Replayed, "the same ID twice in one batch is decided once")
	mu.Lock()
	assert.Equal(t, out[1].res, seen["lose"])
	assert.Equal(t, Reserved, seen["win"].Status)
	assert.True(t, seen["f1"].Fallback)
	assert.Len(t, seen, 4, "one hook call per reservation ID")
	mu.Unlock()

	require.True(t, d.SoldOut("1"), "the batch's SoldOut set the in-process flag")
	res, err := d.Reserve(ctx, req1(3, "new")) // refused at once: no batch opens
	require.NoError(t, err)
	assert.Equal(t, Result{Status: SoldOut, Local: true}, res)
	out = batchOf(t, d, req1(1, "win")) // the winner's retry goes to Redis
	require.NoError(t, out[0].err)
	assert.Equal(t, Reserved, out[0].res.Status)
	assert.True(t, out[0].res.Replayed)
}
