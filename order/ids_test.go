package order_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
)

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"1", "9223372036854775807", "4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95", "01HZY3N8K2W5",
		"ann@shop.example", "u+tag", "A.b_C-d", strings.Repeat("z", order.MaxIDLen)} {
		assert.True(t, order.ValidID(ok), ok)
	}
	for _, bad := range []string{"", strings.Repeat("z", order.MaxIDLen+1), "a b", "a:b", "{a}", "a/b", "é", "a\x00b", "a,b", "a'b", `a"b`} {
		assert.False(t, order.ValidID(bad), "%q", bad)
	}
}

// Messages of versions 1 and 2 — numeric user and activity IDs — still
// decode, literal bytes as old producers wrote them; their IDs become
// decimal strings. Each version has one shape: a number in version 3 or a
// string in version 1 is refused, as are IDs outside ValidID.
func TestDecodeOldAndNewIDs(t *testing.T) {
	t.Parallel()
	const v1 = `{"v":1,"msg_id":"old-1","reservation_id":"r-old-1","activity_id":42,"user_id":9007199254740993,"qty":2,"created_at":"2026-11-29T08:00:00Z"}`
	const v2 = `{"v":2,"msg_id":"old-2","reservation_id":"r-old-2","activity_id":42,"user_id":7,"qty":1,"created_at":"2026-11-29T08:00:00Z","ext":{"sku":"A-1"}}`
	const v3 = `{"v":3,"msg_id":"new-1","reservation_id":"r-new-1","activity_id":"sale-42","user_id":"4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95","qty":1,"created_at":"2026-11-29T08:00:00Z"}`
	m, err := order.Decode([]byte(v1))
	require.NoError(t, err)
	assert.Equal(t, "42", m.ActivityID)
	assert.Equal(t, "9007199254740993", m.UserID, "exact beyond 2^53: parsed as an integer, not a float")
	assert.Equal(t, "9007199254740993", m.Key(), "the Kafka key is the user ID")
	m, err = order.Decode([]byte(v2))
	require.NoError(t, err)
	assert.Equal(t, order.Message{Version: 2, MsgID: "old-2", ReservationID: "r-old-2", ActivityID: "42", UserID: "7", Qty: 1,
		CreatedAt: m.CreatedAt, Ext: []byte(`{"sku":"A-1"}`)}, m)
	m, err = order.Decode([]byte(v3))
	require.NoError(t, err)
	assert.Equal(t, "sale-42", m.ActivityID)
	assert.Equal(t, "4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95", m.UserID)
	// re-encoding an old message writes the current version, with strings
	old, err := order.Decode([]byte(v1))
	require.NoError(t, err)
	b, err := old.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"v":3,`)
	assert.Contains(t, string(b), `"activity_id":"42","user_id":"9007199254740993"`)
	again, err := order.Decode(b)
	require.NoError(t, err)
	assert.Equal(t, old.UserID, again.UserID)

	long := strings.Repeat("u", 5000)
	for name, raw := range map[string]string{
		"v3 numeric user":     strings.Replace(v3, `"user_id":"4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95"`, `"user_id":7`, 1),
		"v3 numeric activity": strings.Replace(v3, `"activity_id":"sale-42"`, `"activity_id":42`, 1),
		"v1 string user":      strings.Replace(v1, `"user_id":9007199254740993`, `"user_id":"7"`, 1),
		"v2 string activity":  strings.Replace(v2, `"activity_id":42`, `"activity_id":"42"`, 1),
		"v1 zero user":        strings.Replace(v1, `"user_id":9007199254740993`, `"user_id":0`, 1),
		"v1 negative user":    strings.Replace(v1, `"user_id":9007199254740993`, `"user_id":-7`, 1),
		"v1 fractional user":  strings.Replace(v1, `"user_id":9007199254740993`, `"user_id":7.5`, 1),
		"v1 exponent user":    strings.Replace(v1, `"user_id":9007199254740993`, `"user_id":7e3`, 1),
		"v1 user over int64":  strings.Replace(v1, `"user_id":9007199254740993`, `"user_id":9223372036854775808`, 1),
		"v1 null user":        strings.Replace(v1, `"user_id":9007199254740993`, `"user_id":null`, 1),
		"v3 no user":          strings.Replace(v3, `"user_id":"4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95",`, ``, 1),
		"v3 bad char":         strings.Replace(v3, `"user_id":"4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95"`, `"user_id":"a b"`, 1),
		"v3 brace":            strings.Replace(v3, `"activity_id":"sale-42"`, `"activity_id":"{sale}"`, 1),
		"v3 long user":        strings.Replace(v3, `"user_id":"4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95"`, `"user_id":"`+long+`"`, 1),
	} {
		_, err := order.Decode([]byte(raw))
		require.Error(t, err, name)
		assert.True(t, isPermanent(err), name)
		assert.ErrorIs(t, err, order.ErrInvalidMessage, name)
		assert.NotContains(t, err.Error(), long[:order.MaxIDLen+1], "%s: the over-long ID is not echoed", name)
	}
	_, err = order.Decode([]byte(strings.Replace(v3, `"user_id":"4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95"`, `"user_id":"`+long+`"`, 1)))
	assert.ErrorIs(t, err, order.ErrInvalidID)
	assert.Contains(t, err.Error(), "user_id is 5000 bytes long")
	_, err = order.Decode([]byte(`{"v":5,"msg_id":"a","reservation_id":"r","activity_id":1,"user_id":1,"qty":1}`))
	assert.ErrorIs(t, err, order.ErrUnsupportedVersion, "a future version is refused as such, whatever its shape")
}

// Every exported call taking a user or activity ID refuses an invalid one
// with ErrInvalidID (and so ErrInvalidMessage), without echoing an
// over-long ID and before anything is written or released.
func TestInvalidIDsRefused(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	ctx := context.Background()
	require.NoError(t, order.AutoMigrate(ctx, db))
	addActivity(t, db, "1", 10, 1)
	led := newLedger()
	led.reserve("1", Reservation{ID: "r-1", User: "7", Qty: 1})
	res, err := status.NewResults(testenv.Redis(t), db, status.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	fence, err := handoff.NewFence(db, led)
	require.NoError(t, err)
	rec, err := reconcile.NewReconciler(db, led.Reservations, led)
	require.NoError(t, err)
	p := newProc(t, db)
	sub, err := handoff.NewSubmitter(handoff.Publisher(func(context.Context, order.Message) error { return nil }),
		handoff.Fallback(func(context.Context, order.Message) error { return nil }), led)
	require.NoError(t, err)

	long := strings.Repeat("x", 1000)
	for _, bad := range []string{"", long, "a b", "x:y", "ü"} {
		checks := map[string]error{}
		_, checks["Results.Get activity"] = res.Get(ctx, bad, "7")
		_, checks["Results.Get user"] = res.Get(ctx, "1", bad)
		_, checks["Results.Reservation"] = res.Reservation(ctx, status.ResultQuery{Activity: "1", User: bad, ReservationID: "r-1"})
		checks["Results.Set"] = res.Set(ctx, order.Result{Activity: bad, User: "7", Status: order.StatusQueued, ReservationID: "r-1"})
		checks["Fence.Release"] = fence.Release(ctx, bad, "r-1")
		checks["Fence.ReleaseFor user"] = fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", User: bad + "?", ReservationID: "r-1"})
		_, checks["Reconciler.Reconcile"] = rec.Reconcile(ctx, bad)
		_, checks["LiveReservations"] = reconcile.LiveReservations(ctx, db, bad)
		_, checks["Processor.Handle"] = p.Handle(ctx, msg(1, "1", bad))
		_, checks["Processor.Process"] = p.Process(ctx, []order.Message{msg(2, "1", "8"), msg(3, bad, "9")})
		_, checks["Submitter.Submit"] = sub.Submit(ctx, order.Message{ReservationID: "r-1", ActivityID: bad, UserID: "7", Qty: 1})
		for name, err := range checks {
			require.Error(t, err, "%s %.10q", name, bad)
			assert.ErrorIs(t, err, order.ErrInvalidID, name)
			assert.ErrorIs(t, err, order.ErrInvalidMessage, name)
			assert.NotContains(t, err.Error(), long[:order.MaxIDLen+1], name)
		}
		assert.True(t, isPermanent(checks["Processor.Handle"]))
		assert.True(t, isPermanent(checks["Processor.Process"]))
	}
	assert.Zero(t, countOrders(t, db, ""))
	assert.Zero(t, rowCount(t, db, defaultTables().Dedup, ""))
	assert.Zero(t, led.calls, "nothing released")
	checkConservation(t, db, "1", 10)
}

// IDs are compared byte for byte, as Redis compares them: "Alice" and
// "alice" are two buyers of a cap-1 activity, each gets an order, and each
// is answered with their own. Under MariaDB's default collation
// (utf8mb4_general_ci) the second order would be refused as a duplicate
// and Results.Get("alice") would answer with Alice's order.
func TestIDsAreCaseSensitive(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "Sale", 10, 1)
		addActivity(t, db, "sale", 10, 1)
		p := newProc(t, db)
		outs, err := p.Process(ctx, []order.Message{msg(1, "Sale", "Alice"), msg(2, "Sale", "alice"), msg(3, "sale", "alice")})
		require.NoError(t, err)
		for i, o := range outs {
			require.Equal(t, order.StatusSuccess, o.Status, "%d: %s", i, o.Reason)
		}
		out, err := p.Handle(ctx, msg(4, "Sale", "ALICE"))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status, out.Reason)
		assert.EqualValues(t, 3, rowCount(t, db, defaultTables().Order, "activity_id = ?", "Sale"))
		assert.EqualValues(t, 1, rowCount(t, db, defaultTables().Order, "activity_id = ? AND user_id = ?", "Sale", "alice"))
		assert.EqualValues(t, 1, rowCount(t, db, defaultTables().Order, "activity_id = ?", "sale"))
		checkConservation(t, db, "Sale", 10)
		checkConservation(t, db, "sale", 10)

		res, err := status.NewResults(testenv.Redis(t), db, status.WithKeyPrefix(testenv.Prefix(t)))
		require.NoError(t, err)
		for i, who := range []string{"Alice", "alice"} {
			r, err := res.Get(ctx, "Sale", who)
			require.NoError(t, err)
			assert.Equal(t, outs[i].OrderNo, r.OrderNo, who)
			assert.Equal(t, who, r.User)
		}
		r, err := res.Get(ctx, "Sale", "aLiCe")
		require.NoError(t, err)
		assert.Equal(t, order.StatusNone, r.Status, "no buyer aLiCe")
		live, err := reconcile.LiveReservations(ctx, db, "sale")
		require.NoError(t, err)
		require.Len(t, live, 1)
		assert.Equal(t, "alice", live[0].User)
		if db.Dialector.Name() == "mysql" {
			var colls []string
			require.NoError(t, db.Raw("SELECT DISTINCT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "+
				"AND ((TABLE_NAME = ? AND COLUMN_NAME = 'id') OR (TABLE_NAME IN ? AND COLUMN_NAME IN ('user_id', 'activity_id')))",
				defaultTables().Activity, []string{defaultTables().Order, defaultTables().Dedup}).Scan(&colls).Error)
			assert.Equal(t, []string{"ascii_bin"}, colls)
		}
	})
}

// The fence and the reconciler key the Redis side by the string activity
// and user: a release reaches the ledger under the same activity ID, and a
// FAILED result is recorded for the UUID buyer.
func TestFenceWithStringIDs(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		const act = "flash.sale-2026"
		user := uuidUser(1)
		addActivity(t, db, act, 5, 1)
		led := newLedger()
		var released []string
		rel := order.ReleaserFunc(func(ctx context.Context, activity, id string) error {
			released = append(released, activity+"/"+id)
			return led.Release(ctx, activity, id)
		})
		led.reserve(act, Reservation{ID: "r-1", User: user, Qty: 1})
		res, err := status.NewResults(testenv.Redis(t), db, status.WithKeyPrefix(testenv.Prefix(t)))
		require.NoError(t, err)
		f, err := handoff.NewFence(db, rel, handoff.WithResults(res))
		require.NoError(t, err)
		require.NoError(t, f.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: act, User: user, ReservationID: "r-1"}))
		assert.Equal(t, []string{act + "/r-1"}, released)
		assert.Equal(t, 1, led.releases())
		n, outcome, reason := dedupRows(t, db, "r-1")
		assert.EqualValues(t, 1, n)
		assert.Equal(t, string(order.StatusFailed), outcome)
		assert.Equal(t, handoff.ReasonReleased, reason)
		var who []string
		require.NoError(t, db.Raw("SELECT user_id FROM message_dedup WHERE reservation_id = ? AND activity_id = ?", "r-1", act).Scan(&who).Error)
		assert.Equal(t, []string{user}, who)
		r, err := res.Get(ctx, act, user)
		require.NoError(t, err)
		assert.Equal(t, order.StatusFailed, r.Status)
		// the message arrives late: FAILED, nothing deducted
		out, err := newProc(t, db).Handle(ctx, order.Message{Version: order.MessageVersion, MsgID: "m-1", ReservationID: "r-1",
			ActivityID: act, UserID: user, Qty: 1, CreatedAt: testenv.Epoch()})
		require.NoError(t, err)
		assert.Equal(t, order.StatusFailed, out.Status)
		assert.Zero(t, countOrders(t, db, ""))
		assert.EqualValues(t, 5, dbStock(t, db, act))
		assert.True(t, errors.Is(f.Release(ctx, act, ""), order.ErrInvalidMessage)) // any other ID is released (TestRefusedReservationIDIsReleased)
	})
}
