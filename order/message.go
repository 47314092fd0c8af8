package order

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// MessageVersion is the newest version of the "v" field of an encoded
// [Message]; decoders accept versions 1..MessageVersion and ignore unknown
// fields. Version 2 adds [Message.Ext]: a message with an extension payload
// is version 2, so that a consumer that knows only version 1 refuses it (a
// [PermanentError], dead-lettered) instead of dropping the payload
// silently; a message without one is still written as version 1, readable
// by every consumer. Upgrade consumers before producers send Ext.
const MessageVersion = 2

// MaxExtSize is the largest [Message.Ext] accepted, in bytes.
const MaxExtSize = 4096

// Message asks the consumer to turn one reservation into one order. It
// travels as versioned JSON:
//
//	{"v":1,"msg_id":"…","reservation_id":"…","activity_id":42,"user_id":7,
//	 "qty":1,"price":990,"created_at":"2026-11-29T08:00:00Z"}
//	{"v":2, …, "ext":{"coupon":"X1","channel":"app"}}
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
	// Ext is an optional extension payload: any JSON value of at most
	// [MaxExtSize] bytes (UTF-8), opaque to this package, stored in the
	// order's ext column (JSON null counts as absent). It needs Version ≥ 2;
	// Encode picks 2 for a zero Version when Ext is set.
	Ext json.RawMessage `json:"ext,omitempty"`
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
	if ext := m.ext(); ext != nil {
		switch {
		case m.Version < 2:
			return invalid("ext needs message version 2 or later, got %d", m.Version)
		case len(ext) > MaxExtSize:
			return invalid("ext is %d bytes, more than %d", len(ext), MaxExtSize)
		case !utf8.Valid(ext) || !json.Valid(ext):
			return invalid("ext is not valid UTF-8 JSON")
		}
	}
	return nil
}

// ext returns the extension payload, nil when absent or JSON null.
func (m Message) ext() json.RawMessage {
	if len(m.Ext) == 0 || string(bytes.TrimSpace(m.Ext)) == "null" {
		return nil
	}
	return m.Ext
}

// defaultVersion is the version a zero Version becomes: 1, or 2 with Ext.
func (m Message) defaultVersion() int {
	if m.ext() != nil {
		return 2
	}
	return 1
}

// Key is the Kafka message key: the user ID, so one user's messages keep
// their order on one partition.
func (m Message) Key() string { return strconv.FormatInt(m.UserID, 10) }

// Encode validates m and returns its JSON form. A zero Version is set to
// 1, or to 2 when Ext is set (see [MessageVersion]).
func (m Message) Encode() ([]byte, error) {
	if m.Version == 0 {
		m.Version = m.defaultVersion()
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
	m.Ext = m.ext()
	return m, nil
}
