package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"gorm.io/gorm"
)

// Writer stores outbox rows. It holds no connection: every call is handed
// the transaction or database to use. A Writer is safe for concurrent use.
type Writer struct {
	o options
}

// NewWriter returns a Writer. Options used: [WithClock], [WithLogger],
// [WithStoreTimeout], [WithTable], [WithObserver].
func NewWriter(opts ...WriterOption) (*Writer, error) {
	o, err := buildOptions(opts, WriterOption.applyWriter)
	if err != nil {
		return nil, err
	}
	return &Writer{o: o}, nil
}

// Write inserts msgs as PENDING rows inside tx, the caller's transaction,
// so they commit or roll back with the caller's business rows:
//
//	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
//		if err := tx.Create(&order).Error; err != nil {
//			return err
//		}
//		return w.Write(ctx, tx, outbox.Message{Topic: "orders", Key: uid, Payload: body})
//	})
//
// Write never commits the caller's transaction; given a plain *gorm.DB it
// inserts in a transaction of its own, so one Write is all or nothing
// either way. Every message is validated before anything
// is written; a MsgID is generated where empty. Writing no messages is a
// no-op. The rows are claimable at once (next_attempt_at = now). A MsgID
// already in the table fails the Write with an error wrapping
// [ErrDuplicateMsgID] (and the database's own error); a nil tx or an
// invalid message, with one wrapping [ErrInvalidArgument].
func (w *Writer) Write(ctx context.Context, tx *gorm.DB, msgs ...Message) error {
	if w.o.observer == nil {
		return w.write(ctx, tx, msgs)
	}
	start := time.Now()
	err := w.write(ctx, tx, msgs)
	if len(msgs) > 0 || err != nil {
		w.o.report(ctx, observe.Event{Stage: StageWrite, Outcome: writeOutcome(err), Value: float64(len(msgs)), Err: err}, start)
	}
	return err
}

func (w *Writer) write(ctx context.Context, tx *gorm.DB, msgs []Message) error {
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", ErrInvalidArgument)
	}
	if len(msgs) == 0 {
		return nil
	}
	rows, err := w.rows(msgs)
	if err != nil {
		return err
	}
	d := tx.WithContext(ctx).Table(w.o.table.name)
	if len(rows) <= writeChunk {
		err = d.Create(&rows).Error
	} else {
		// Multi-row INSERTs of writeChunk rows: bigger statements cost
		// more than they save (bind time grows faster than linearly in the
		// pure-Go SQLite driver). Inside the caller's transaction this is a
		// savepoint; on a plain DB it keeps the whole Write atomic.
		err = d.Transaction(func(tx *gorm.DB) error {
			for i := 0; i < len(rows); i += writeChunk {
				chunk := rows[i:min(i+writeChunk, len(rows))]
				if err := tx.Create(&chunk).Error; err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		if isDuplicateKey(tx, err) {
			return fmt.Errorf("outbox: write %d message(s): %w: %w", len(rows), ErrDuplicateMsgID, err)
		}
		return fmt.Errorf("outbox: write %d message(s): %w", len(rows), err)
	}
	return nil
}

// isDuplicateKey reports whether err is a unique-key violation. Write
// inserts fresh rows (no ID), so on the outbox table that can only be the
// msg_id. Recognised: gorm.ErrDuplicatedKey (a DB opened with
// TranslateError), SQLSTATE 23505 from any error carrying one (pgx's
// *pgconn.PgError, lib/pq), and whatever db's dialector translates to
// gorm.ErrDuplicatedKey (MySQL/MariaDB 1062, SQLite's unique and
// primary-key constraint codes, PostgreSQL's 23505), without importing a
// driver.
func isDuplicateKey(db *gorm.DB, err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && st.SQLState() == "23505" {
		return true
	}
	if tr, ok := db.Dialector.(gorm.ErrorTranslator); ok {
		for e := err; e != nil; e = errors.Unwrap(e) {
			if errors.Is(tr.Translate(e), gorm.ErrDuplicatedKey) {
				return true
			}
		}
	}
	return false
}

// writeChunk is the most rows one INSERT statement carries.
const writeChunk = 100

// rows validates msgs and returns fresh PENDING rows.
func (w *Writer) rows(msgs []Message) ([]Message, error) {
	now := dbTime(w.o.clock.Now())
	rows := make([]Message, len(msgs))
	for i, m := range msgs {
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("outbox: message %d: %w", i, err)
		}
		rows[i] = Message{
			MsgID:         m.MsgID,
			Topic:         m.Topic,
			Key:           m.Key,
			ReservationID: m.ReservationID,
			Payload:       m.Payload,
			Headers:       m.Headers,
			Status:        StatusPending,
			NextAttemptAt: now,
			CreatedAt:     now,
			UpdatedAt:     now,
		}
		if rows[i].MsgID == "" {
			rows[i].MsgID = NewMsgID()
		}
	}
	return rows, nil
}

// Delivery says which path [Writer.SendOrStore] took.
type Delivery int

const (
	// Undelivered: neither published nor stored (the error is non-nil).
	Undelivered Delivery = iota
	// Published: the broker acknowledged the message; no row was written.
	Published
	// Stored: publishing failed and the message was written to the outbox
	// for a [Relay] to deliver later.
	Stored
)

// String names the delivery.
func (d Delivery) String() string {
	switch d {
	case Published:
		return "published"
	case Stored:
		return "stored"
	}
	return "undelivered"
}

// SendResult reports what [Writer.SendOrStore] did.
type SendResult struct {
	// Delivery is Published, Stored or Undelivered.
	Delivery Delivery
	// MsgID is the message's deduplication ID (generated if it was empty),
	// the same whichever path delivered it.
	MsgID string
	// PublishErr is the direct publish failure when Delivery is Stored or
	// Undelivered (kept for logs and metrics).
	PublishErr error
}

// SendOrStore publishes msg directly through pub and, only if that fails,
// writes it to the outbox in its own short transaction on db, for a relay
// to deliver later ("send first, store on failure": the fast path costs no
// database write).
//
// The store runs on context.WithoutCancel(ctx) bounded by
// [WithStoreTimeout], so a caller whose context expired during the publish
// still gets its compensation. If both fail, the error wraps
// [ErrUndelivered] joined with both causes, and the caller must undo what
// the message announced (seckill: release the reservation) and tell its
// client to retry.
//
// A publish that failed after the broker stored the message, then stored
// and relayed, is delivered twice with the same MsgID: consumers dedup.
func (w *Writer) SendOrStore(ctx context.Context, db *gorm.DB, pub Publisher, msg Message) (SendResult, error) {
	if w.o.observer == nil {
		return w.sendOrStore(ctx, db, pub, msg)
	}
	start := time.Now()
	res, err := w.sendOrStore(ctx, db, pub, msg)
	w.o.report(ctx, observe.Event{Stage: StageSend, Outcome: sendOutcome(res, err), Err: err}, start)
	return res, err
}

func (w *Writer) sendOrStore(ctx context.Context, db *gorm.DB, pub Publisher, msg Message) (SendResult, error) {
	if db == nil {
		return SendResult{}, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	if isNil(pub) {
		return SendResult{}, fmt.Errorf("%w: nil publisher", ErrInvalidArgument)
	}
	if err := msg.validate(); err != nil {
		return SendResult{}, fmt.Errorf("outbox: send: %w", err)
	}
	if msg.MsgID == "" {
		msg.MsgID = NewMsgID()
	}
	res := SendResult{MsgID: msg.MsgID}
	pubErr := pub.Publish(ctx, msg)
	if pubErr == nil {
		res.Delivery = Published
		return res, nil
	}
	res.PublishErr = pubErr
	w.o.logger.LogAttrs(ctx, slog.LevelWarn, "outbox: publish failed, storing",
		slog.String("topic", msg.Topic), slog.String("msg_id", msg.MsgID), slog.Any("error", pubErr))

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.o.storeTimeout)
	defer cancel()
	storeErr := db.WithContext(sctx).Transaction(func(tx *gorm.DB) error {
		return w.Write(sctx, tx, msg)
	})
	if storeErr == nil {
		res.Delivery = Stored
		return res, nil
	}
	res.Delivery = Undelivered
	w.o.logger.LogAttrs(ctx, slog.LevelError, "outbox: message neither published nor stored",
		slog.String("topic", msg.Topic), slog.String("msg_id", msg.MsgID), slog.Any("error", storeErr))
	return res, errors.Join(ErrUndelivered,
		fmt.Errorf("outbox: publish: %w", pubErr),
		fmt.Errorf("outbox: store: %w", storeErr))
}
