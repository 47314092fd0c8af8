package order_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/status"
)

// longResvIDs are reservation IDs over the 64 bytes of earlier releases,
// up to MaxReservationIDLen: the reference deployment's
// u<len>.<user>-<attempt> of a UUID buyer with a 24-hex attempt ID (65
// bytes), of a 64-byte buyer with a 40-byte request ID (109 bytes), and
// one of 128 bytes using every kind of byte the rule allows.
func longResvIDs(i int) []string {
	uuid := uuidUser(i)
	return []string{
		fmt.Sprintf("u%d.%s-%024x", len(uuid), uuid, i),
		fmt.Sprintf("u64.%s-%040d", strings.Repeat("b", 60)+fmt.Sprintf("%04d", i), i),
		fmt.Sprintf("%s~!#$%%&*/:;<=>?[]^`{|}%04d", strings.Repeat("Z", 128-25), i),
	}
}

// A reservation ID of 65..128 bytes goes through Submit, the consumer and
// the fence like a short one, on every database.
func TestLongReservationIDs(t *testing.T) {
	t.Parallel()
	ids := longResvIDs(1)
	require.Equal(t, 65, len(ids[0]))
	require.Equal(t, 109, len(ids[1]))
	require.Equal(t, order.MaxReservationIDLen, len(ids[2]))
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 5)
		clock := newClock()
		led := newLedger()
		fence, err := handoff.NewFence(db, led, handoff.WithClock(clock))
		require.NoError(t, err)
		var published []order.Message
		sub, err := handoff.NewSubmitter(handoff.Publisher(func(_ context.Context, m order.Message) error {
			published = append(published, m)
			return nil
		}), (&memFallback{}).Store, fence)
		require.NoError(t, err)
		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		c, err := order.NewConsumer(p, led)
		require.NoError(t, err)

		user := uuidUser(1)
		var recs []order.Record
		for i, id := range ids {
			led.reserve("1", Reservation{ID: id, User: user, Qty: 1, At: clock.Now()})
			route, err := sub.Submit(ctx, order.Message{MsgID: fmt.Sprintf("m-%d", i), ReservationID: id, ActivityID: "1", UserID: user, Qty: 1})
			require.NoError(t, err, "%d bytes", len(id))
			require.Equal(t, handoff.RouteKafka, route)
			recs = append(recs, kmsg(t, int64(i), published[i]))
		}
		require.NoError(t, runClaim(t, c, &fakeSession{ctx: ctx}, recs))
		for _, id := range ids {
			assert.EqualValues(t, 1, countOrders(t, db, "reservation_id = ?", id), "%d bytes", len(id))
			o, err := status.NewOrders(db)
			require.NoError(t, err)
			got, err := o.ByReservation(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, id, got.ReservationID, "stored whole")
			// consumed: the fence refuses to release it
			assert.ErrorIs(t, fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", User: user, ReservationID: id}), handoff.ErrConsumed)
		}
		assert.Zero(t, led.releases())
		checkConservation(t, db, "1", 10)

		// Unconsumed long reservations are fenced one by one, although they
		// share their first 70 bytes (so "fence:"+ID cut to 64 would not
		// tell them apart), and their late messages deduct nothing.
		late := longResvIDs(2)[1:]
		late = append(late, late[0][:len(late[0])-1]+"x")
		for i, id := range late {
			led.reserve("1", Reservation{ID: id, User: user, Qty: 1, At: clock.Now()})
			require.NoError(t, fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", User: user, ReservationID: id}), "%d bytes", len(id))
			assert.EqualValues(t, 1, rowCount(t, db, defaultTables().Dedup, "reservation_id = ? AND outcome = ?", id, order.StatusFailed), "%d bytes", len(id))
			out, err := p.Handle(ctx, order.Message{Version: order.MessageVersion, MsgID: fmt.Sprintf("late-%d", i), ReservationID: id,
				ActivityID: "1", UserID: user, Qty: 1, CreatedAt: testenv.Epoch()})
			require.NoError(t, err)
			assert.Equal(t, order.StatusFailed, out.Status)
			assert.Equal(t, handoff.ReasonReleased, out.Reason)
		}
		assert.Equal(t, len(late), led.releases())
		assert.EqualValues(t, len(ids), countOrders(t, db, ""))
		checkConservation(t, db, "1", 10)
	})
}

// The message rule is ValidReservationID: 1..128 bytes of printable ASCII
// without space.
func TestMessageReservationIDRule(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"r": true, strings.Repeat("r", 64): true, strings.Repeat("r", 65): true, strings.Repeat("r", order.MaxReservationIDLen): true,
		"a:b{c}~": true, "": false, strings.Repeat("r", order.MaxReservationIDLen+1): false, "a b": false, "r ": false,
		"r\x00": false, "é": false, "r\x7f": false,
	} {
		m := msg(1, "1", "7")
		m.ReservationID = id
		err := m.Validate()
		if ok {
			assert.NoError(t, err, "%q", id)
		} else {
			assert.ErrorIs(t, err, order.ErrInvalidMessage, "%q", id)
		}
		assert.Equal(t, ok, order.ValidReservationID(id), "%q", id)
	}
}

// A reservation that can never become an order — its ID is refused by
// ValidReservationID (a ledger entry of an older release or another
// writer) — is still released: by the fence (the hand-off's failure path)
// and by the reconciler, instead of being a release error on every run.
func TestRefusedReservationIDIsReleased(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		led := newLedger()
		long := strings.Repeat("L", order.MaxReservationIDLen+1)
		spaced := "old id"
		fence, err := handoff.NewFence(db, led, handoff.WithClock(clock))
		require.NoError(t, err)
		led.reserve("1", Reservation{ID: long, User: "7", Qty: 1, At: clock.Now()})
		require.NoError(t, fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", User: "7", ReservationID: long, Reason: handoff.ReasonHandoff}))
		assert.Equal(t, map[string]int{long: 1}, led.releasedByID())

		// the reconciler, past the grace period
		led.reserve("1", Reservation{ID: spaced, User: "8", Qty: 1, At: clock.Now()})
		led.reserve("1", Reservation{ID: long + "2", User: "9", Qty: 1, At: clock.Now()})
		clock.Add(time.Hour)
		rep, err := newReconcilerMust(t, db, led, clock).Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Empty(t, rep.ReleaseErrors)
		assert.ElementsMatch(t, []string{spaced, long + "2"}, rep.Released)
		assert.Equal(t, map[string]int{long: 1, long + "2": 1, spaced: 1}, led.releasedByID())
		assert.Zero(t, rowCount(t, db, defaultTables().Dedup, ""), "no fence row: none can be written, none is needed")
	})
}

// A refused ID that nevertheless has an order (made under an older rule)
// is not released: the order wins.
func TestRefusedReservationIDWithOrderIsNotReleased(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		led := newLedger()
		p := newProc(t, db)
		out, err := p.Handle(ctx, msg(1, "1", "7"))
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)
		require.NoError(t, db.Exec("UPDATE seckill_order SET reservation_id = ? WHERE reservation_id = ?", "old r-1", "r-1").Error)
		fence, err := handoff.NewFence(db, led)
		require.NoError(t, err)
		assert.ErrorIs(t, fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", ReservationID: "old r-1"}), handoff.ErrConsumed)
		assert.Zero(t, led.releases())
		assert.ErrorIs(t, fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", ReservationID: ""}), order.ErrInvalidMessage)
		assert.False(t, errors.Is(fence.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", ReservationID: "r"}), order.ErrInvalidMessage))
	})
}

// Tables made before reservation IDs of 128 bytes (reservation_id
// VARCHAR(64), on MySQL/MariaDB in the table's default collation) are
// widened by AutoMigrate in place, on every database: old rows stay, a
// 128-byte ID fits, and on MySQL/MariaDB the column compares byte for byte.
func TestAutoMigrateWidensReservationID(t *testing.T) {
	t.Parallel()
	for _, kind := range dbKinds() {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			db := openDB(t, kind)
			ctx := context.Background()
			ddl, old := mustSchema(t, "postgres"), `"reservation_id" VARCHAR(64)   `
			if kind == testenv.KindMySQL {
				ddl, old = mustSchema(t, "mysql"), "reservation_id VARCHAR(64)   "
			}
			ddl = strings.ReplaceAll(ddl, `"reservation_id" VARCHAR(128)  `, old)
			ddl = strings.ReplaceAll(ddl, "reservation_id VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin", old)
			require.Equal(t, 3, strings.Count(ddl, old), "the old DDL (order, dedup and line tables)")
			if kind == testenv.KindSQLite {
				// SQLite's tables come from AutoMigrate only (Schema has no
				// SQLite DDL) and SQLite has no column widths: nothing to
				// widen; the rest of the test runs as on the others.
				require.NoError(t, order.AutoMigrate(ctx, db))
			} else {
				for _, stmt := range strings.Split(order.StripSQLComments(ddl), ";") {
					if strings.TrimSpace(stmt) != "" {
						require.NoError(t, db.Exec(stmt).Error, stmt)
					}
				}
			}
			addActivity(t, db, "1", 10, 5)
			p := newProc(t, db)
			out, err := p.Handle(ctx, msg(1, "1", "7"))
			require.NoError(t, err)
			require.Equal(t, order.StatusSuccess, out.Status)

			require.NoError(t, order.AutoMigrate(ctx, db))
			require.NoError(t, order.AutoMigrate(ctx, db), "again: nothing left to change")

			for _, table := range []string{defaultTables().Order, defaultTables().Dedup, defaultTables().Line} {
				width, collation := reservationColumn(t, db, table)
				if kind != testenv.KindSQLite {
					assert.EqualValues(t, order.MaxReservationIDLen, width, table)
				}
				if kind == testenv.KindMySQL {
					assert.Equal(t, "ascii_bin", collation, table)
				}
			}
			assert.Equal(t, order.WantIndexes(defaultTables())[defaultTables().Order], order.IndexesOf(t, db, defaultTables().Order, &order.Order{}))
			assert.Equal(t, order.WantIndexes(defaultTables())[defaultTables().Dedup], order.IndexesOf(t, db, defaultTables().Dedup, &order.Dedup{}))
			assert.EqualValues(t, 1, countOrders(t, db, "reservation_id = ?", "r-1"), "the old row stays")

			long := strings.Repeat("q", order.MaxReservationIDLen-1) + "Q"
			m := msg(2, "1", "7")
			m.ReservationID = long
			out, err = p.Handle(ctx, m)
			require.NoError(t, err)
			require.Equal(t, order.StatusSuccess, out.Status, out.Reason)
			assert.EqualValues(t, 1, countOrders(t, db, "reservation_id = ?", long))
			assert.Zero(t, countOrders(t, db, "reservation_id = ?", strings.ToLower(long)), "byte for byte")
			// the same ID in other case is another reservation
			m = msg(3, "1", "7")
			m.ReservationID = strings.ToLower(long)
			out, err = p.Handle(ctx, m)
			require.NoError(t, err)
			assert.Equal(t, order.StatusSuccess, out.Status, out.Reason)
			checkConservation(t, db, "1", 10)
		})
	}
}

// reservationColumn reads the width (0 when the database has none) and,
// on MySQL/MariaDB, the collation of table's reservation_id.
func reservationColumn(t *testing.T, db *gorm.DB, table string) (int64, string) {
	t.Helper()
	switch db.Dialector.Name() {
	case "mysql":
		var r struct {
			Width     int64
			Collation string
		}
		require.NoError(t, db.Raw("SELECT CHARACTER_MAXIMUM_LENGTH AS width, COLLATION_NAME AS collation FROM information_schema.COLUMNS "+
			"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'reservation_id'", table).Scan(&r).Error)
		return r.Width, r.Collation
	case "postgres":
		var w int64
		require.NoError(t, db.Raw("SELECT character_maximum_length FROM information_schema.columns "+
			"WHERE table_schema = current_schema() AND table_name = ? AND column_name = 'reservation_id'", table).Scan(&w).Error)
		return w, ""
	}
	return 0, ""
}
