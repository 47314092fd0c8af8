package order

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxExtSize is the largest [Message.Ext] accepted, in bytes.
const maxExtSize = 4096

// Message asks the consumer to turn one reservation into one order. It
// travels as versioned JSON:
//
//	{"v":3,"msg_id":"…","reservation_id":"…","activity_id":"sale-42",
//	 "user_id":"4f9c2a1e-8d5b-4c1e-9a3f-2b7d6e0c1a95","qty":1,"price":990,
//	 "created_at":"2026-11-29T08:00:00Z","ext":{"coupon":"X1","channel":"app"}}
//	{"v":1,"msg_id":"…","reservation_id":"…","activity_id":42,"user_id":7, …} (still decoded)
//
// MsgID is unique per message and keys the dedup row; ReservationID is the
// ID the stock reservation was made under (one order per reservation).
// ActivityID and UserID are [ValidID] strings.
type Message struct {
	Version       int    `json:"v"`
	MsgID         string `json:"msg_id"`
	ReservationID string `json:"reservation_id"`
	ActivityID    string `json:"activity_id"`
	UserID        string `json:"user_id"`
	Qty           int64  `json:"qty"`
	// Price is the unit price in cents; 0 means "the activity price in the DB".
	Price     int64     `json:"price,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Ext is an optional extension payload: any JSON value of at most
	// [maxExtSize] bytes (UTF-8), opaque to this package, stored in the
	// order's ext column (JSON null counts as absent). It needs Version ≥ 2.
	Ext json.RawMessage `json:"ext,omitempty"`
	// Headers are the Kafka record headers the message arrived with (the
	// [Consumer] sets them; trace context from orderkafka.WithHeaders); not part of
	// the JSON, never stored. The [Processor] copies them to the
	// [Order.Headers] its [TxHook] sees.
	Headers map[string]string `json:"-"`
}

// Validate checks the fields; the error wraps [ErrInvalidMessage].
func (m Message) Validate() error {
	switch {
	case m.Version < 1 || m.Version > MessageVersion:
		return fmt.Errorf("%w: %d", ErrUnsupportedVersion, m.Version)
	case m.MsgID == "" || len(m.MsgID) > 64:
		return invalid("msg_id must be 1..64 bytes")
	case !ValidReservationID(m.ReservationID):
		return invalid("%s (got %d bytes)", reservationIDRule, len(m.ReservationID))
	case !ValidID(m.ActivityID):
		return checkID("activity_id", m.ActivityID)
	case !ValidID(m.UserID):
		return checkID("user_id", m.UserID)
	case m.Qty <= 0:
		return invalid("qty must be positive")
	case m.Price < 0:
		return invalid("price must not be negative")
	}
	if ext := m.ext(); ext != nil {
		switch {
		case m.Version < 2:
			return invalid("ext needs message version 2 or later, got %d", m.Version)
		case len(ext) > maxExtSize:
			return invalid("ext is %d bytes, more than %d", len(ext), maxExtSize)
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

// Key is the Kafka message key: the user ID, so one user's messages keep
// their order on one partition.
func (m Message) Key() string { return m.UserID }

// Encode validates m and returns its JSON form, always as version
// [MessageVersion] (string IDs): a Version of 0, 1 or 2 is written as 3.
func (m Message) Encode() ([]byte, error) {
	if m.Version >= 0 && m.Version < MessageVersion {
		m.Version = MessageVersion
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// decodeJSON decodes m in the shape of its version: user_id and
// activity_id are JSON strings from version 3 on, and JSON numbers
// (positive integers, which become their decimal strings) in versions 1
// and 2. The other shape fails with [ErrInvalidMessage]; the values are
// checked by [Message.Validate], not here. A struct that embeds Message
// inherits this method (encoding/json then fills only the Message): name
// the field instead.
func (m *Message) decodeJSON(b []byte) error {
	type plain Message // without this method
	// The current version first, in one pass: string IDs.
	*m = Message{}
	if err := json.Unmarshal(b, (*plain)(m)); err == nil && (m.Version < 1 || m.Version >= 3) {
		return nil
	}
	// Versions 1 and 2, or a malformed message: decode the IDs by shape.
	var w struct {
		plain
		ActivityID json.RawMessage `json:"activity_id"`
		UserID     json.RawMessage `json:"user_id"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Message(w.plain)
	if m.Version < 1 || m.Version > MessageVersion {
		return nil // Validate refuses the version itself
	}
	numeric := m.Version < 3
	act, err := decodeID("activity_id", w.ActivityID, numeric)
	if err != nil {
		return err
	}
	user, err := decodeID("user_id", w.UserID, numeric)
	if err != nil {
		return err
	}
	m.ActivityID, m.UserID = act, user
	return nil
}

// decodeID decodes one ID field: a JSON number when numeric (versions 1
// and 2), else a JSON string. An absent or null field is "" (Validate
// refuses it).
func decodeID(field string, raw json.RawMessage, numeric bool) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if !numeric {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return "", invalid("%s must be a JSON string in message version 3 and later", field)
		}
		return s, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n <= 0 {
		return "", invalid("%s must be a positive integer in message versions 1 and 2, got %.32s", field, raw)
	}
	return strconv.FormatInt(n, 10), nil
}

// Decode parses and validates an encoded message. Every failure is a
// [PermanentError]: retrying cannot fix the bytes.
func Decode(b []byte) (Message, error) {
	var m Message
	if err := m.decodeJSON(b); err != nil { // one pass over b, not json.Unmarshal's two
		return Message{}, Permanent(fmt.Errorf("%w: decode: %v", ErrInvalidMessage, err))
	}
	if err := m.Validate(); err != nil {
		return Message{}, Permanent(err)
	}
	m.Ext = m.ext()
	return m, nil
}
