package order

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// MessageVersion is the version written into the "v" field of every encoded
// [Message]. Decoders accept versions 1..MessageVersion and ignore unknown
// fields, so fields can be added without a version bump.
const MessageVersion = 1

// Message asks the consumer to turn one reservation into one order. It
// travels as versioned JSON:
//
//	{"v":1,"msg_id":"…","reservation_id":"…","activity_id":42,"user_id":7,
//	 "qty":1,"price":990,"created_at":"2026-11-29T08:00:00Z"}
//
// MsgID is unique per message and keys the dedup row; ReservationID is the
// ID the stock reservation was made under (one order per reservation).
type Message struct {
	Version       int    `json:"v"`
	MsgID         string `json:"msg_id"`
	ReservationID string `json:"reservation_id"`
	ActivityID    int64  `json:"activity_id"`
	UserID        int64  `json:"user_id"`
	Qty           int64  `json:"qty"`
	// Price is the unit price in cents; 0 means "the activity price in the DB".
	Price     int64     `json:"price,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// NewMsgID returns a random 128-bit hex message ID.
func NewMsgID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Validate checks the fields; the error wraps [ErrInvalidMessage].
func (m Message) Validate() error {
	switch {
	case m.Version < 1 || m.Version > MessageVersion:
		return fmt.Errorf("%w: %d", ErrUnsupportedVersion, m.Version)
	case m.MsgID == "" || len(m.MsgID) > 64:
		return invalid("msg_id must be 1..64 bytes")
	case m.ReservationID == "" || len(m.ReservationID) > 64:
		return invalid("reservation_id must be 1..64 bytes")
	case m.ActivityID <= 0:
		return invalid("activity_id must be positive")
	case m.UserID <= 0:
		return invalid("user_id must be positive")
	case m.Qty <= 0:
		return invalid("qty must be positive")
	case m.Price < 0:
		return invalid("price must not be negative")
	}
	return nil
}

// Key is the Kafka message key: the user ID, so one user's messages keep
// their order on one partition.
func (m Message) Key() string { return strconv.FormatInt(m.UserID, 10) }

// Encode validates m and returns its JSON form. A zero Version is set to
// [MessageVersion].
func (m Message) Encode() ([]byte, error) {
	if m.Version == 0 {
		m.Version = MessageVersion
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Decode parses and validates an encoded message. Every failure is a
// [PermanentError]: retrying cannot fix the bytes.
func Decode(b []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, Permanent(fmt.Errorf("%w: decode: %v", ErrInvalidMessage, err))
	}
	if err := m.Validate(); err != nil {
		return Message{}, Permanent(err)
	}
	return m, nil
}
