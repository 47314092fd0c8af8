package order

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func TestChunks(t *testing.T) {
	t.Parallel()
	for _, size := range []int{sqliteChunk, preparedChunk} {
		shapes := map[int]bool{}
		for n := 0; n <= 3*size+7; n++ {
			sum := 0
			for _, c := range chunks(n, size) {
				require.Positive(t, c)
				require.LessOrEqual(t, c, size)
				require.Zero(t, c&(c-1), "chunk %d of %d is not a power of two", c, n)
				shapes[c] = true
				sum += c
			}
			require.Equal(t, n, sum, "rows lost or added for n=%d", n)
		}
		// a connection never prepares more than log2(size)+1 shapes per table
		assert.LessOrEqual(t, len(shapes), bitsLen(size))
	}
}

func bitsLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// TestProcessPreparedAndText writes a batch that needs full chunks and a
// remainder, once through the prepared statements and once through a gorm
// PrepareStmt session (text INSERTs), and reads every row back.
func TestProcessPreparedAndText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mode := range []string{"prepared", "text"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			eachDB(t, func(t *testing.T, db *gorm.DB) {
				addActivity(t, db, "1", 1000, 1)
				addActivity(t, db, "2", 1000, 3)
				use := db
				if mode == "text" {
					use = db.Session(&gorm.Session{PrepareStmt: true})
				}
				p := newProc(t, use)
				const n = 2*preparedChunk + 77 // full chunks and a remainder on every dialect
				msgs := make([]Message, n)
				for i := range msgs {
					msgs[i] = msg(i, num(1+i%2), num(1000+i))
					msgs[i].Qty = int64(1 + i%2)
					msgs[i].Price = int64(100 + i)
				}
				outs, err := p.Process(ctx, msgs)
				require.NoError(t, err)
				byRes := map[string]Outcome{}
				for i, o := range outs {
					require.Equal(t, StatusSuccess, o.Status, i)
					require.False(t, o.Duplicate, i)
					byRes[o.Message.ReservationID] = o
				}
				if mode == "prepared" {
					assert.Positive(t, p.stmts.used.Load(), "the batch did not use prepared statements")
				} else {
					assert.Zero(t, p.stmts.used.Load(), "a PrepareStmt session must take the text path")
				}

				var orders []Order
				require.NoError(t, db.Order("id").Find(&orders).Error)
				require.Len(t, orders, n)
				for _, o := range orders {
					out, ok := byRes[o.ReservationID]
					require.True(t, ok, o.ReservationID)
					m := out.Message
					assert.Equal(t, out.OrderNo, o.OrderNo)
					assert.Equal(t, out.OrderID, o.ID)
					assert.Equal(t, m.UserID, o.UserID)
					assert.Equal(t, m.ActivityID, o.ActivityID)
					assert.Equal(t, m.Qty, o.Qty)
					assert.Equal(t, Cents(m.Price), o.Price)
					assert.Equal(t, OrderCreated, o.Status)
					assert.WithinDuration(t, out.ExpireTime, o.ExpireTime, time.Millisecond) // DATETIME(3)
					if m.ActivityID == "1" {
						require.NotNil(t, o.LiveSlot, "cap 1 sets live_slot")
					} else {
						assert.Nil(t, o.LiveSlot, "cap 3 leaves live_slot NULL")
					}
				}
				var dedups int64
				require.NoError(t, db.Model(&Dedup{}).Count(&dedups).Error)
				assert.EqualValues(t, n, dedups)
				checkConservation(t, db, "1", 1000)
				checkConservation(t, db, "2", 1000)

				// Close drops the statements; the processor prepares them again.
				require.NoError(t, p.Close())
				assert.Empty(t, p.stmts.m)
				more := make([]Message, 3)
				for i := range more {
					more[i] = msg(n+i, "2", num(5000+i))
				}
				outs, err = p.Process(ctx, more)
				require.NoError(t, err)
				for _, o := range outs {
					assert.Equal(t, StatusSuccess, o.Status, fmt.Sprint(o.Message.MsgID))
				}
				checkConservation(t, db, "2", 1000)
			})
		})
	}
}
