package order

import (
	"context"
	"errors"
	"testing"

	"github.com/seckillkit/seckill/order/internal/dbx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func newProc(t testing.TB, db *gorm.DB, opts ...ProcessorOption) *Processor {
	t.Helper()
	p, err := NewProcessor(db, newGen(t, 1), opts...)
	require.NoError(t, err)
	return p
}

func TestHandleOnceAndDuplicate(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		p := newProc(t, db)

		out, err := p.Handle(ctx, msg(1, "1", "7"))
		require.NoError(t, err)
		assert.Equal(t, StatusSuccess, out.Status)
		assert.False(t, out.Duplicate)
		assert.NotEmpty(t, out.OrderNo)

		again, err := p.Handle(ctx, msg(1, "1", "7"))
		require.NoError(t, err)
		assert.True(t, again.Duplicate)
		assert.Equal(t, out.OrderNo, again.OrderNo)

		assert.EqualValues(t, 1, countOrders(t, db, ""))
		checkConservation(t, db, "1", 10)
	})
}

func TestHandleBusinessFailures(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 1, 1) // one unit, cap 1
		addActivity(t, db, "2", 10, 3)
		p := newProc(t, db)

		ok, err := p.Handle(ctx, msg(1, "1", "7"))
		require.NoError(t, err)
		require.Equal(t, StatusSuccess, ok.Status)

		// another user, no unit left in the DB → sold out
		soldOut, err := p.Handle(ctx, msg(2, "1", "8"))
		require.NoError(t, err)
		assert.Equal(t, StatusFailed, soldOut.Status)
		assert.Equal(t, ReasonSoldOut, soldOut.Reason)
		assert.True(t, soldOut.release())

		unknown, err := p.Handle(ctx, msg(3, "99", "8"))
		require.NoError(t, err)
		assert.Equal(t, ReasonUnknownActivity, unknown.Reason)

		// cap 3: user 7 may buy three times
		for i := 10; i < 13; i++ {
			o, err := p.Handle(ctx, msg(i, "2", "7"))
			require.NoError(t, err)
			assert.Equal(t, StatusSuccess, o.Status, i)
		}
		// the same reservation under a new message ID is the existing order, not a failure
		m := msg(10, "2", "7")
		m.MsgID = "other"
		dup, err := p.Handle(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, StatusSuccess, dup.Status)
		assert.True(t, dup.Duplicate)
		assert.False(t, dup.release(), "never release the reservation of an existing order")

		// redelivered failure is answered from the dedup row and still asks for release
		again, err := p.Handle(ctx, msg(2, "1", "8"))
		require.NoError(t, err)
		assert.True(t, again.Duplicate)
		assert.True(t, again.release())

		assert.EqualValues(t, 4, countOrders(t, db, ""))
		checkConservation(t, db, "1", 1)
		checkConservation(t, db, "2", 10)
	})
}

func TestDuplicateUserCapOne(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		p := newProc(t, db)
		_, err := p.Handle(ctx, msg(1, "1", "7"))
		require.NoError(t, err)
		o, err := p.Handle(ctx, msg(2, "1", "7"))
		require.NoError(t, err)
		assert.Equal(t, StatusFailed, o.Status)
		assert.Equal(t, ReasonDuplicate, o.Reason)
		assert.EqualValues(t, 1, countOrders(t, db, ""))
		checkConservation(t, db, "1", 10)
	})
}

func TestProcessBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("all fit: one transaction", func(t *testing.T) {
		t.Parallel()
		eachDB(t, func(t *testing.T, db *gorm.DB) {
			addActivity(t, db, "1", 100, 1)
			addActivity(t, db, "2", 100, 1)
			p := newProc(t, db)
			var msgs []Message
			for i := 0; i < 40; i++ {
				msgs = append(msgs, msg(i, num(1+i%2), num(100+i)))
			}
			msgs = append(msgs, msgs[3]) // the same message twice in one batch
			outs, err := p.Process(ctx, msgs)
			require.NoError(t, err)
			require.Len(t, outs, 41)
			for i, o := range outs {
				assert.Equal(t, StatusSuccess, o.Status, i)
			}
			assert.True(t, outs[40].Duplicate)
			assert.Equal(t, outs[3].OrderNo, outs[40].OrderNo)
			assert.EqualValues(t, 40, countOrders(t, db, ""))
			checkConservation(t, db, "1", 100)
			checkConservation(t, db, "2", 100)

			// the whole batch again: all duplicates, nothing new
			outs, err = p.Process(ctx, msgs)
			require.NoError(t, err)
			for _, o := range outs {
				assert.True(t, o.Duplicate)
			}
			assert.EqualValues(t, 40, countOrders(t, db, ""))
		})
	})

	t.Run("conflict falls back per message", func(t *testing.T) {
		t.Parallel()
		eachDB(t, func(t *testing.T, db *gorm.DB) {
			addActivity(t, db, "1", 5, 1) // fewer units than messages
			p := newProc(t, db)
			var msgs []Message
			for i := 0; i < 8; i++ {
				msgs = append(msgs, msg(i, "1", num(100+i)))
			}
			outs, err := p.Process(ctx, msgs)
			require.NoError(t, err)
			succ, failed := 0, 0
			for _, o := range outs {
				switch o.Status {
				case StatusSuccess:
					succ++
				case StatusFailed:
					failed++
					assert.Equal(t, ReasonSoldOut, o.Reason)
				}
			}
			assert.Equal(t, 5, succ)
			assert.Equal(t, 3, failed)
			assert.EqualValues(t, 0, dbStock(t, db, "1"))
			checkConservation(t, db, "1", 5)
		})
	})

	t.Run("duplicate user inside a batch", func(t *testing.T) {
		t.Parallel()
		eachDB(t, func(t *testing.T, db *gorm.DB) {
			addActivity(t, db, "1", 50, 1)
			p := newProc(t, db)
			msgs := []Message{msg(1, "1", "7"), msg(2, "1", "8"), msg(3, "1", "7"), msg(4, "1", "9")}
			outs, err := p.Process(ctx, msgs)
			require.NoError(t, err)
			assert.Equal(t, StatusSuccess, outs[0].Status)
			assert.Equal(t, StatusSuccess, outs[1].Status)
			assert.Equal(t, StatusFailed, outs[2].Status)
			assert.Equal(t, ReasonDuplicate, outs[2].Reason)
			assert.Equal(t, StatusSuccess, outs[3].Status)
			checkConservation(t, db, "1", 50)
		})
	})

	t.Run("existing order in DB makes the batch conflict", func(t *testing.T) {
		t.Parallel()
		eachDB(t, func(t *testing.T, db *gorm.DB) {
			addActivity(t, db, "1", 50, 1)
			p := newProc(t, db)
			_, err := p.Handle(ctx, msg(100, "1", "7"))
			require.NoError(t, err)
			msgs := []Message{msg(1, "1", "8"), msg(2, "1", "7"), msg(3, "1", "9")}
			outs, err := p.Process(ctx, msgs)
			require.NoError(t, err)
			assert.Equal(t, []Status{StatusSuccess, StatusFailed, StatusSuccess}, []Status{outs[0].Status, outs[1].Status, outs[2].Status})
			assert.EqualValues(t, 3, countOrders(t, db, ""))
			checkConservation(t, db, "1", 50)
		})
	})

	t.Run("invalid message is permanent", func(t *testing.T) {
		t.Parallel()
		eachDB(t, func(t *testing.T, db *gorm.DB) {
			p := newProc(t, db)
			bad := msg(1, "1", "7")
			bad.Qty = 0
			_, err := p.Process(ctx, []Message{bad})
			require.Error(t, err)
			assert.True(t, isPermanent(err))
			assert.ErrorIs(t, err, ErrInvalidMessage)
		})
	})
}

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"garbage", "{not json"},
		{"empty", ""},
		{"future version", `{"v":9,"msg_id":"a","reservation_id":"r","activity_id":1,"user_id":1,"qty":1}`},
		{"no msg id", `{"v":1,"reservation_id":"r","activity_id":1,"user_id":1,"qty":1}`},
		{"negative qty", `{"v":1,"msg_id":"a","reservation_id":"r","activity_id":1,"user_id":1,"qty":-1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in))
			require.Error(t, err)
			assert.True(t, isPermanent(err))
			var pe *PermanentError
			require.ErrorAs(t, err, &pe)
			assert.NotNil(t, pe.Unwrap())
		})
	}
	m := msg(1, "2", "3")
	m.Price = 990
	b, err := m.Encode()
	require.NoError(t, err)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	assert.Contains(t, string(b), `"v":3`)
	assert.Equal(t, "3", got.Key())
}

// UNIQUE(user_id, activity_id, live_slot) is "one live order per buyer when
// the cap is 1" only because NULLs never collide in a unique index: true
// on SQLite, MySQL/MariaDB and PostgreSQL (whose default is NULLS
// DISTINCT). Each unique key's violation is recognised as a duplicate
// (PostgreSQL: SQLSTATE 23505), and the rows are counted with raw SQL.
func TestLiveSlotNullsNeverCollide(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		p := newProc(t, db)
		one := int8(1)
		mk := func(id int64, resv string, slot *int8) Order {
			o := p.newOrder(msg(int(id), "1", "7"), activityInfo{ID: "1"}, id, p.o.clock.Now())
			o.ReservationID, o.LiveSlot = resv, slot
			return o
		}
		insert := func(o Order) error {
			return db.Transaction(func(tx *gorm.DB) error {
				return p.insertRows(ctx, tx, tableOrder, orderArgs([]Order{o}))
			})
		}
		require.NoError(t, insert(mk(1, "r-1", nil)))
		require.NoError(t, insert(mk(2, "r-2", nil)), "two NULL live slots of one buyer")
		require.NoError(t, insert(mk(3, "r-3", &one)))
		err := insert(mk(4, "r-4", &one))
		require.Error(t, err, "a second live slot of one buyer")
		assert.True(t, dbx.IsDuplicate(err), "%v", err)
		err = insert(mk(5, "r-1", nil))
		assert.True(t, dbx.IsDuplicate(err), "reservation: %v", err)
		o := mk(6, "r-6", nil)
		o.OrderNo = "1"
		err = insert(o)
		assert.True(t, dbx.IsDuplicate(err), "order no: %v", err)
		d := dedupOf(msg(1, "1", "7"), StatusSuccess, "1", "", p.o.clock.Now())
		require.NoError(t, db.Transaction(func(tx *gorm.DB) error {
			return p.insertRows(ctx, tx, tableDedup, dedupArgs([]Dedup{d}))
		}))
		err = db.Transaction(func(tx *gorm.DB) error { return p.insertRows(ctx, tx, tableDedup, dedupArgs([]Dedup{d})) })
		assert.True(t, dbx.IsDuplicate(err), "msg_id: %v", err)
		assert.False(t, dbx.IsDuplicate(errors.New("order: something else")))
		assert.EqualValues(t, 3, rowCount(t, db, defaultOrderTable, "user_id = '7' AND activity_id = '1'"))
		assert.EqualValues(t, 1, rowCount(t, db, defaultOrderTable, "live_slot IS NOT NULL"))
	})
}
