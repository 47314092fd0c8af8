package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

type bizRow struct {
	ID   int64 `gorm:"primaryKey;autoIncrement"`
	Name string
}

func (bizRow) TableName() string { return "outbox_test_biz" }

func TestWriteCommitsAndRollsBackWithBusinessTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&bizRow{}))
		clk := newFakeClock()
		w, err := NewWriter(WithClock(clk))
		require.NoError(t, err)

		// Commit: business row and both messages land.
		err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&bizRow{Name: "order-1"}).Error; err != nil {
				return err
			}
			return w.Write(ctx, tx,
				Message{Topic: "orders", Key: "u1", Payload: []byte(`{"n":1}`), Headers: map[string]string{"v": "1"}},
				Message{Topic: "orders", Key: "u2", Payload: []byte(`{"n":2}`), MsgID: "fixed-id"})
		})
		require.NoError(t, err)

		// Rollback: the business failure after Write undoes the message too.
		boom := errors.New("business failure")
		err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&bizRow{Name: "order-2"}).Error; err != nil {
				return err
			}
			if err := w.Write(ctx, tx, Message{Topic: "orders", Key: "u3"}); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)

		var biz int64
		require.NoError(t, db.Model(&bizRow{}).Count(&biz).Error)
		assert.EqualValues(t, 1, biz)
		rows := allRows(t, db)
		require.Len(t, rows, 2)
		for _, r := range rows {
			assert.Equal(t, StatusPending, r.Status)
			assert.Equal(t, 0, r.Attempts)
			assert.True(t, r.NextAttemptAt.Equal(clk.Now()), "next_attempt_at %v", r.NextAttemptAt)
			assert.True(t, r.CreatedAt.Equal(clk.Now()))
			assert.Nil(t, r.SentAt)
			assert.NotEmpty(t, r.MsgID)
		}
		assert.Equal(t, "u1", rows[0].Key)
		assert.Equal(t, []byte(`{"n":1}`), rows[0].Payload)
		assert.Equal(t, map[string]string{"v": "1"}, rows[0].Headers)
		assert.Len(t, rows[0].MsgID, 32)
		assert.Equal(t, "fixed-id", rows[1].MsgID)

		// The same MsgID twice is refused by the unique index.
		err = w.Write(ctx, db, Message{Topic: "orders", MsgID: "fixed-id"})
		require.ErrorIs(t, err, ErrDuplicateMsgID)
		assert.Len(t, allRows(t, db), 2)
	})
}

func TestWriteRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		w, err := NewWriter()
		require.NoError(t, err)

		require.ErrorIs(t, w.Write(ctx, nil, Message{Topic: "t"}), ErrInvalidArgument)
		require.NoError(t, w.Write(ctx, db)) // nothing to write
		cases := map[string]Message{
			"empty topic": {Key: "k"},
			"long topic":  {Topic: strings.Repeat("t", maxTopicLen+1)},
			"long key":    {Topic: "t", Key: strings.Repeat("k", maxKeyLen+1)},
			"long msg id": {Topic: "t", MsgID: strings.Repeat("m", maxMsgIDLen+1)},
			// the reservation ID's limit (128 bytes, as in stock and
			// order), not its column's 255
			"long reservation id": {Topic: "t", ReservationID: strings.Repeat("r", 129)},
		}
		for name, m := range cases {
			t.Run(name, func(t *testing.T) {
				// a valid message first: the batch is validated before any insert
				err := w.Write(ctx, db, Message{Topic: "ok"}, m)
				require.ErrorIs(t, err, ErrInvalidArgument)
			})
		}
		assert.Empty(t, allRows(t, db))
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", ReservationID: strings.Repeat("r", 128)}))
		rows := allRows(t, db)
		require.Len(t, rows, 1)
		assert.Equal(t, strings.Repeat("r", 128), rows[0].ReservationID, "stored in the ref column")

		_, err = NewWriter(WithClock(nil))
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = NewWriter(WithStoreTimeout(0))
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = NewWriter(WithLogger(nil))
		require.ErrorIs(t, err, ErrInvalidConfig, "a nil logger is bad configuration")
	})
}

func TestSendOrStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		w, err := NewWriter()
		require.NoError(t, err)

		var got []Message
		ok := PublisherFunc(func(_ context.Context, m Message) error { got = append(got, m); return nil })
		down := PublisherFunc(func(context.Context, Message) error { return errors.New("kafka: brokers not available") })

		// Published: no row.
		res, err := w.SendOrStore(ctx, db, ok, Message{Topic: "orders", Key: "u1", Payload: []byte("a")})
		require.NoError(t, err)
		assert.Equal(t, Published, res.Delivery)
		require.Len(t, got, 1)
		assert.Equal(t, res.MsgID, got[0].MsgID)
		assert.Len(t, res.MsgID, 32)
		assert.Empty(t, allRows(t, db))

		// Stored: one PENDING row with the same MsgID as the failed publish.
		var tried string
		down2 := PublisherFunc(func(ctx context.Context, m Message) error { tried = m.MsgID; return down(ctx, m) })
		res, err = w.SendOrStore(ctx, db, down2, Message{Topic: "orders", Key: "u2", Payload: []byte("b")})
		require.NoError(t, err)
		assert.Equal(t, Stored, res.Delivery)
		require.Error(t, res.PublishErr)
		rows := allRows(t, db)
		require.Len(t, rows, 1)
		assert.Equal(t, tried, rows[0].MsgID)
		assert.Equal(t, res.MsgID, rows[0].MsgID)
		assert.Equal(t, StatusPending, rows[0].Status)

		// Stored even when the caller's context ended during the publish.
		cctx, cancel := context.WithCancel(ctx)
		cancelling := PublisherFunc(func(ctx context.Context, m Message) error { cancel(); return ctx.Err() })
		res, err = w.SendOrStore(cctx, db, cancelling, Message{Topic: "orders", Key: "u3"})
		require.NoError(t, err)
		assert.Equal(t, Stored, res.Delivery)
		assert.Len(t, allRows(t, db), 2)

		// Both fail: ErrUndelivered joined with both causes.
		require.NoError(t, db.Exec("DROP TABLE "+defaultTable).Error)
		res, err = w.SendOrStore(ctx, db, down, Message{Topic: "orders", Key: "u4"})
		require.ErrorIs(t, err, ErrUndelivered)
		assert.Equal(t, Undelivered, res.Delivery)
		assert.Contains(t, err.Error(), "brokers not available")
		assert.Contains(t, err.Error(), "outbox: store")

		// Bad input.
		_, err = w.SendOrStore(ctx, nil, ok, Message{Topic: "t"})
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = w.SendOrStore(ctx, db, nil, Message{Topic: "t"})
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = w.SendOrStore(ctx, db, ok, Message{})
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
}

func TestDeliveryString(t *testing.T) {
	t.Parallel()
	for d, s := range map[Delivery]string{Published: "published", Stored: "stored", Undelivered: "undelivered"} {
		assert.Equal(t, s, d.String())
	}
	assert.Equal(t, "skip-locked", ClaimSkipLocked.name())
	assert.Equal(t, "ClaimMode(9)", ClaimMode(9).name())
}

func TestTruncErr(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "", truncErr(nil))
	long := errors.New(strings.Repeat("é", 600)) // 1200 bytes
	s := truncErr(long)
	assert.LessOrEqual(t, len(s), maxErrLen)
	assert.True(t, strings.HasPrefix(long.Error(), s))
	assert.Equal(t, 0, len(s)%2, "no cut rune")
}
