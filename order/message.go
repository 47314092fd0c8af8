package order

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/seckillkit/seckill/order/internal/dbx"
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
	// Lines, when set, make the order an order with lines (a cart,
	// reserved with stock.Deductor.ReserveLines under ReservationID): line
	// i is Lines[i].Activity (an activity ID or a variant "a/v"),
	// Lines[i].Qty units at Lines[i].Price (0: the activity price in the
	// DB), its stock reservation ReservationID+"#i"; the other fields of a
	// Line must be empty. Qty and Price must then be 0, ActivityID names
	// the activity the order is filed under (its product snapshot; for
	// variants of one activity, that activity): it needs Version ≥ 4, and
	// at most [maxLines] lines. Without Lines (today's single-line order)
	// nothing changes: no line row is written.
	Lines []Line `json:"lines,omitempty"`
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
	case len(m.Lines) > 0:
		if err := m.validateLines(); err != nil {
			return err
		}
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

// maxLines is the most lines one message (one order) may have.
const maxLines = 64

// validateLines checks the lines of a message with lines.
func (m Message) validateLines() error {
	switch {
	case m.Version < 4:
		return invalid("lines need message version 4 or later, got %d", m.Version)
	case len(m.Lines) > maxLines:
		return invalid("%d lines, more than %d", len(m.Lines), maxLines)
	case m.Qty != 0 || m.Price != 0:
		return invalid("a message with lines has qty and price 0 (its lines carry them)")
	case len(m.ReservationID)+len("#")+len(strconv.Itoa(len(m.Lines)-1)) > MaxReservationIDLen:
		return invalid("reservation_id leaves no room for the lines' \"#<i>\" within %d bytes", MaxReservationIDLen)
	}
	for i, l := range m.Lines {
		switch {
		case !validLineActivity(l.ActivityID):
			return invalid("line %d: activity must be an activity ID or a variant \"a/v\" of at most %d bytes, got %s",
				i, MaxIDLen, dbx.DescribeID(l.ActivityID, MaxIDLen))
		case l.Qty <= 0:
			return invalid("line %d: qty must be positive", i)
		case l.Price < 0:
			return invalid("line %d: price must not be negative", i)
		case l.OrderNo != "" || l.LineNo != 0 || l.ReservationID != "" || l.UserID != "" || l.Status != "" ||
			l.Restock != "" || !l.UpdatedAt.IsZero():
			return invalid("line %d: only activity, qty and price are set in a message", i)
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

// Encode validates m and returns its JSON form (string IDs): a message
// without lines as version 3 (a Version of 0, 1, 2 or 4 is written as 3,
// so consumers of the releases before lines read it), one with lines as
// version 4 ([MessageVersion]).
func (m Message) Encode() ([]byte, error) {
	switch {
	case len(m.Lines) > 0 && m.Version >= 0 && m.Version <= MessageVersion:
		m.Version = MessageVersion
	case m.Version >= 0 && m.Version <= MessageVersion:
		m.Version = 3
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
