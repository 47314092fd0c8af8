package outbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// defaultTable is the default name of the outbox table, the one in
// schema.sql and schema_postgres.sql ([Message.TableName]). [WithTable]
// names another; [AutoMigrate], [Schema] and every query follow it.
const defaultTable = "outbox_message"

// Limits enforced before a row reaches the database (the field docs of
// [Message] state them).
const (
	maxTopicLen         = 255 // bytes in Message.Topic (its column)
	maxKeyLen           = 255 // bytes in Message.Key (its column)
	maxReservationIDLen = 128 // bytes in Message.ReservationID: the reservation ID's limit in stock and order
	maxMsgIDLen         = 64  // bytes in Message.MsgID (its column)
	maxErrLen           = 1000
)

// Status is the delivery state of an outbox row.
type Status string

// Row states. A row is written PENDING and ends SENT, or FAILED after the
// relay's attempt budget is spent. FAILED rows stay until an operator
// requeues them ([Relay.Requeue]) or deletes them.
const (
	StatusPending Status = "PENDING"
	StatusSent    Status = "SENT"
	StatusFailed  Status = "FAILED"
)

// Message is one outbox row and the unit handed to a [Publisher].
//
// Callers fill Topic (required), Key, ReservationID, Payload, Headers and
// optionally MsgID;
// the package fills the rest. MsgID is the deduplication ID consumers must
// use: it is generated when empty (32 hex characters), kept across every
// redelivery of the row and shared by [Writer.SendOrStore]'s direct publish
// and its stored fallback, so one logical message has one MsgID however
// many times it is delivered. It is unique in the table: writing the same
// MsgID twice fails with [ErrDuplicateMsgID].
//
// The key column is named msg_key because KEY is reserved in MySQL. The
// struct tags describe the columns only: the secondary indexes, whose
// names follow the table's, are created by [AutoMigrate] (so migrate with
// it, not with gorm's AutoMigrate on Message).
type Message struct {
	// ID is the row's auto-increment primary key (0 before it is stored).
	ID int64 `gorm:"column:id;primaryKey;autoIncrement"`
	// MsgID is the stable deduplication ID (see the type doc), at most 64
	// bytes.
	MsgID string `gorm:"column:msg_id;type:varchar(64);not null"`
	// Topic is the destination topic; required, at most 255 bytes.
	Topic string `gorm:"column:topic;type:varchar(255);not null"`
	// Key is the partitioning key (free-form, at most 255 bytes; for
	// seckill orders the user ID).
	Key string `gorm:"column:msg_key;type:varchar(255);not null;default:''"`
	// ReservationID is the reservation the message announces, optional,
	// at most 128 bytes (the reservation ID's limit in stock and order).
	// It is kept with the row but not sent to the broker, and indexed for
	// [HasPendingReservation], so a reconciler can ask whether a
	// reservation still has a message on its way. Its column is named ref
	// (VARCHAR(255)), as in every earlier release.
	ReservationID string `gorm:"column:ref;type:varchar(255);not null;default:''"`
	// Payload is the message body, opaque to the outbox.
	Payload []byte `gorm:"column:payload"`
	// Headers are optional message headers, stored as JSON.
	Headers map[string]string `gorm:"column:headers;type:text;serializer:json"`
	// Status is PENDING, SENT or FAILED.
	Status Status `gorm:"column:status;type:varchar(16);not null;default:'PENDING'"`
	// Attempts counts the publish attempts started by relays. Inside a
	// Publisher it is the number of the current attempt (1 for the first).
	Attempts int `gorm:"column:attempts;size:32;not null;default:0"`
	// NextAttemptAt is when the row may next be claimed. While a relay
	// holds the row it is the end of that relay's lease.
	NextAttemptAt time.Time `gorm:"column:next_attempt_at;precision:6;not null"`
	// LeaseOwner is the claim token of the relay batch holding the row; on
	// a SENT row, the token of the batch that marked it; empty otherwise.
	// It guards state changes: a batch records outcomes only for rows it
	// still holds.
	LeaseOwner string `gorm:"column:lease_owner;type:varchar(64);not null;default:''"`
	// LastError is the last publish error, truncated to 1000 bytes.
	LastError string `gorm:"column:last_error;type:varchar(1024);not null;default:''"`
	// CreatedAt is when the row was written (Writer's clock).
	CreatedAt time.Time `gorm:"column:created_at;precision:6;not null"`
	// UpdatedAt is the last state change (relay's clock).
	UpdatedAt time.Time `gorm:"column:updated_at;precision:6;not null"`
	// SentAt is when a relay marked the row SENT; nil otherwise.
	SentAt *time.Time `gorm:"column:sent_at;precision:6"`
}

// TableName tells gorm the default table name, "outbox_message" (the one
// in schema.sql and schema_postgres.sql); the package itself names the
// table explicitly in every statement, [WithTable]'s name or this one.
func (Message) TableName() string { return defaultTable }

// validate checks the caller-supplied fields.
func (m *Message) validate() error {
	switch {
	case m.Topic == "":
		return fmt.Errorf("%w: empty topic", ErrInvalidArgument)
	case len(m.Topic) > maxTopicLen:
		return fmt.Errorf("%w: topic longer than %d bytes", ErrInvalidArgument, maxTopicLen)
	case len(m.Key) > maxKeyLen:
		return fmt.Errorf("%w: key longer than %d bytes", ErrInvalidArgument, maxKeyLen)
	case len(m.ReservationID) > maxReservationIDLen:
		return fmt.Errorf("%w: reservation ID longer than %d bytes", ErrInvalidArgument, maxReservationIDLen)
	case len(m.MsgID) > maxMsgIDLen:
		return fmt.Errorf("%w: msg ID longer than %d bytes", ErrInvalidArgument, maxMsgIDLen)
	}
	return nil
}

// NewMsgID returns a random 128-bit message ID as 32 hex characters, the
// form generated for messages written without one.
func NewMsgID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// dbTime normalises a time for storage: UTC, microseconds (DATETIME(6)),
// so that SQLite's text timestamps compare in time order and MySQL stores
// exactly what was compared.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// truncErr shortens an error text to fit last_error.
func truncErr(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > maxErrLen {
		s = s[:maxErrLen]
		// drop a cut multi-byte rune
		for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 {
			s = s[:len(s)-1]
		}
		if len(s) > 0 && s[len(s)-1] >= 0xC0 {
			s = s[:len(s)-1]
		}
	}
	return s
}
