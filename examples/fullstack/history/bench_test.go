package history

import (
	"strconv"
	"testing"
)

// BenchmarkRecord is the recording's cost per answer on a client's hot
// path: two clock reads and an append to the client's own slice (a client
// records a few dozen answers; a fresh one every 32, as in a run).
func BenchmarkRecord(b *testing.B) {
	rec := NewRecorder()
	c := rec.NewClient("1")
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n++; n%32 == 0 {
			c = &Client{rec: rec, user: "1"} // unregistered: the recorder would keep every op
		}
		s := c.Now()
		c.Add(Op{Kind: Result, Reservation: "r1", Code: 200, Status: Queued, Start: s, End: c.Now()})
	}
}

// BenchmarkRecordAnchor is the anchor beside BenchmarkRecord: the bare
// append of the same op to a slice, no clock, no client.
func BenchmarkRecordAnchor(b *testing.B) {
	var ops []Op
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n++; n%32 == 0 {
			ops = nil
		}
		ops = append(ops, Op{Kind: Result, Reservation: "r1", Code: 200, Status: Queued, Start: 1, End: 2})
	}
	_ = ops
}

// BenchmarkCheck checks 1,000 reservation histories of six answers each
// (buy, two polls, a push overlapping them, the payment, a final read)
// against the model and SQL: the cost at the end of a run.
func BenchmarkCheck(b *testing.B) {
	var ops []Op
	truth := Truth{}
	for i := range 1000 {
		resv, no, user := "r"+strconv.Itoa(i), "o"+strconv.Itoa(i), strconv.Itoa(i)
		t := int64(i) * 1000
		add := func(start, end int64, op Op) {
			op.Client, op.User, op.Start, op.End = i, user, t+start, t+end
			ops = append(ops, op)
		}
		add(0, 10, Op{Kind: Buy, Attempt: "a" + user, Reservation: resv, Code: 202, Status: Queued})
		add(20, 30, Op{Kind: Result, Reservation: resv, Named: resv, Code: 200, Status: Queued})
		add(25, 90, Op{Kind: Push, Reservation: resv, Named: resv, Code: 200, Status: Created, OrderNo: no})
		add(40, 50, Op{Kind: Result, Reservation: resv, Named: resv, Code: 200, Status: Created, OrderNo: no})
		add(100, 110, Op{Kind: Pay, Reservation: resv, Code: 200, Status: Paid, OrderNo: no})
		add(120, 130, Op{Kind: Result, Reservation: resv, Named: resv, Code: 200, Status: Paid, OrderNo: no})
		truth[resv] = Fact{User: user, OrderNo: no, Status: Paid}
	}
	b.ReportAllocs()
	for b.Loop() {
		if v := Check(ops, truth); len(v.Violations) != 0 || v.Reservations != 1000 {
			b.Fatalf("%+v", v)
		}
	}
}
