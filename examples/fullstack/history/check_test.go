package history

import (
	"strings"
	"sync"
	"testing"
)

// h builds histories by hand: each op is given its own slot of real time
// unless placed explicitly.
type h struct {
	ops []Op
	t   int64
}

// seq appends op to client c after every op so far (no overlap).
func (b *h) seq(c int, user string, op Op) *h {
	b.t += 10
	op.Client, op.User, op.Start, op.End = c, user, b.t, b.t+5
	b.ops = append(b.ops, op)
	return b
}

// at appends op to client c at [start, end].
func (b *h) at(c int, user string, start, end int64, op Op) *h {
	op.Client, op.User, op.Start, op.End = c, user, start, end
	b.ops = append(b.ops, op)
	return b
}

func queued(resv string) Op {
	return Op{Kind: Buy, Attempt: "a-" + resv, Reservation: resv, Code: 202, Status: Queued}
}

func result(resv, status, orderNo, reason string) Op {
	return Op{Kind: Result, Reservation: resv, Named: resv, Code: 200, Status: status, OrderNo: orderNo, Reason: reason}
}

func pay(resv, orderNo string, code int, status string) Op {
	return Op{Kind: Pay, Reservation: resv, Code: code, Status: status, OrderNo: orderNo}
}

// clean is a history with every legal life of a buy: paid, cancelled
// (spelled both ways), released, a refusal, a lost answer, overlapping
// polls answered either way, another buyer's read answered unknown.
func clean() (*h, Truth) {
	b := &h{}
	// r1: queued → created → paid, a lost poll answer in between.
	b.seq(0, "1", queued("r1")).seq(0, "1", result("r1", Queued, "", "")).
		seq(0, "1", Op{Kind: Result, Reservation: "r1", Code: 0}).
		seq(0, "1", result("r1", Created, "o1", "")).seq(0, "1", pay("r1", "o1", 200, Paid)).
		seq(0, "1", result("r1", Paid, "o1", ""))
	// r2: queued → created → cancelled, then "failed (cancelled)", and a
	// push answering cancelled.
	b.seq(1, "2", queued("r2")).seq(1, "2", result("r2", Created, "o2", "")).
		seq(1, "2", Op{Kind: Push, Reservation: "r2", Named: "r2", Code: 200, Status: Cancelled, OrderNo: "o2"}).
		seq(1, "2", result("r2", Failed, "o2", "cancelled")).seq(1, "2", pay("r2", "o2", 409, Cancelled))
	// r3: queued → failed (released); the buy's retry answers the same.
	b.seq(2, "3", queued("r3")).seq(2, "3", result("r3", Failed, "", "released")).
		seq(2, "3", Op{Kind: Buy, Attempt: "a-r3", Reservation: "r3", Code: 409, Status: Failed, Reason: "released"})
	// r4: a poll answered created overlapping one answered queued (the
	// queued one was read first): legal in one order.
	b.at(3, "4", 500, 510, queued("r4")).at(3, "4", 520, 600, result("r4", Created, "o4", "")).
		at(4, "4", 530, 560, result("r4", Queued, "", "")).at(3, "4", 700, 710, result("r4", Created, "o4", ""))
	// Refusals name no reservation; user 1 reads user 2's reservation
	// and is answered unknown; a buy whose answer was lost.
	b.seq(5, "5", Op{Kind: Buy, Attempt: "x", Code: 409, Status: "sold_out"}).
		seq(5, "5", Op{Kind: Buy, Attempt: "y", Code: 0}).
		seq(0, "1", result("r2", Unknown, "", ""))
	truth := Truth{
		"r1": {User: "1", OrderNo: "o1", Status: Paid},
		"r2": {User: "2", OrderNo: "o2", Status: Cancelled},
		"r3": {Failed: true},
		"r4": {User: "4", OrderNo: "o4", Status: Created},
	}
	return b, truth
}

func TestCheckCleanHistory(t *testing.T) {
	b, truth := clean()
	v := Check(b.ops, truth)
	if len(v.Violations) != 0 {
		t.Fatalf("clean history: %v", v.Violations)
	}
	if v.Reservations != 4 || v.Clients != 6 || v.Ops != len(b.ops) || !v.Truth {
		t.Fatalf("verdict %+v: want 4 reservations, 6 clients, %d ops, truth", v, len(b.ops))
	}
	if v := Check(b.ops, nil); len(v.Violations) != 0 || v.Truth {
		t.Fatalf("without truth: %+v", v)
	}
}

// TestCheckCatchesPlantedAnomalies plants each kind of anomaly into the
// clean history, one at a time: each is caught, with its kind.
func TestCheckCatchesPlantedAnomalies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(b *h, truth Truth)
		kind  string
		resv  string
	}{
		{"created then queued", func(b *h, _ Truth) { b.seq(0, "1", result("r1", Queued, "", "")) }, Contradiction, "r1"},
		{"paid then failed", func(b *h, _ Truth) { b.seq(0, "1", result("r1", Failed, "", "released")) }, Contradiction, "r1"},
		{"paid then cancelled", func(b *h, _ Truth) { b.seq(0, "1", pay("r1", "o1", 409, Cancelled)) }, Contradiction, "r1"},
		{"released then created", func(b *h, _ Truth) { b.seq(2, "3", result("r3", Created, "o9", "")) }, Contradiction, "r3"},
		{"order number changes", func(b *h, _ Truth) { b.seq(0, "1", result("r1", Paid, "o7", "")) }, Contradiction, "r1"},
		{"forgotten after created", func(b *h, _ Truth) { b.seq(0, "1", result("r1", Unknown, "", "")) }, Contradiction, "r1"},
		{"outside the model", func(b *h, _ Truth) { b.seq(0, "1", result("r1", "shipped", "o1", "")) }, Contradiction, "r1"},
		{"overlapping created and failed", func(b *h, _ Truth) {
			b.at(6, "6", 5000, 5010, queued("r6")).
				at(6, "6", 5020, 5100, result("r6", Created, "o6", "")).
				at(7, "6", 5030, 5090, result("r6", Failed, "", "released"))
		}, Contradiction, "r6"},
		{"202 without an outcome", func(b *h, truth Truth) {
			b.seq(6, "6", queued("r6")).seq(6, "6", result("r6", Queued, "", "")).seq(6, "6", Op{Kind: Result, Reservation: "r6", Code: 503})
		}, NoOutcome, "r6"},
		{"someone else's order", func(_ *h, truth Truth) { truth["r4"] = Fact{User: "9", OrderNo: "o4", Status: Created} }, NotTheirs, "r4"},
		{"told failed, SQL has the order", func(_ *h, truth Truth) { truth["r3"] = Fact{User: "3", OrderNo: "o3", Status: Created} }, Untruthful, "r3"},
		{"told paid, SQL says created", func(_ *h, truth Truth) { truth["r1"] = Fact{User: "1", OrderNo: "o1", Status: Created} }, Untruthful, "r1"},
		{"told created, SQL has no order", func(_ *h, truth Truth) { truth["r4"] = Fact{Failed: true} }, Untruthful, "r4"},
		{"told created, SQL has nothing", func(_ *h, truth Truth) { delete(truth, "r4") }, Untruthful, "r4"},
		{"another order number in SQL", func(_ *h, truth Truth) { truth["r4"] = Fact{User: "4", OrderNo: "o5", Status: Created} }, Untruthful, "r4"},
		{"another buyer's data", func(b *h, _ Truth) { b.seq(5, "5", result("r1", Paid, "o1", "")) }, OthersData, "r1"},
		{"another buyer's order paid", func(b *h, _ Truth) { b.seq(5, "5", pay("r1", "o1", 200, Paid)) }, OthersData, "r1"},
		{"answer about another reservation", func(b *h, _ Truth) {
			op := result("r1", Paid, "o1", "")
			op.Named = "r2"
			b.seq(0, "1", op)
		}, WrongSubject, "r1"},
		{"one reservation, two buyers", func(b *h, _ Truth) {
			op := queued("r1")
			op.Attempt = "z"
			b.seq(5, "5", op)
		}, TwoOwners, "r1"},
		{"an attempt's reservation moves", func(b *h, _ Truth) {
			op := queued("r8")
			op.Attempt = "a-r3"
			b.seq(2, "3", op).seq(2, "3", result("r8", Failed, "", "released"))
		}, AttemptMoved, "r8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, truth := clean()
			tc.plant(b, truth)
			v := Check(b.ops, truth)
			found := false
			for _, x := range v.Violations {
				found = found || (x.Kind == tc.kind && x.Reservation == tc.resv)
			}
			if !found {
				t.Fatalf("planted %q: want a %q violation on %s, got %v", tc.name, tc.kind, tc.resv, v.Violations)
			}
			t.Logf("caught: %v", v.Violations)
		})
	}
}

func TestVerdictString(t *testing.T) {
	b, truth := clean()
	s := Check(b.ops, truth).String()
	for _, want := range []string{"4 reservation histories", "6 clients", "porcupine", "against SQL", "0 violations"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}

// TestRecorderConcurrentClients: clients recording from their own
// goroutines (the hot path takes no lock) lose nothing.
func TestRecorderConcurrentClients(t *testing.T) {
	rec := NewRecorder()
	const clients, each = 32, 200
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c := rec.NewClient("u")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				s := c.Now()
				c.Add(Op{Kind: Result, Reservation: "r", Code: 200, Status: Queued, Start: s, End: c.Now()})
			}
		}()
	}
	wg.Wait()
	ops := rec.Ops()
	if len(ops) != clients*each || rec.Clients() != clients {
		t.Fatalf("%d ops of %d clients, want %d of %d", len(ops), rec.Clients(), clients*each, clients)
	}
	for _, op := range ops {
		if op.End < op.Start {
			t.Fatalf("op ends before it starts: %+v", op)
		}
	}
	var nilClient *Client
	nilClient.Add(Op{}) // a run that records nothing
}

// TestCheckReleasedRetryNeedsNoFailedRecord: a reservation only ever
// answered "409 failed (released)" (the retry of an attempt whose 202 was
// lost) is settled by that answer; SQL need hold no FAILED outcome for it,
// only no order.
func TestCheckReleasedRetryNeedsNoFailedRecord(t *testing.T) {
	b, truth := clean()
	b.seq(6, "6", Op{Kind: Buy, Attempt: "q", Reservation: "r9", Code: 409, Status: Failed, Reason: "released"})
	if v := Check(b.ops, truth); len(v.Violations) != 0 || v.Reservations != 5 {
		t.Fatalf("%+v", v)
	}
	truth["r9"] = Fact{User: "6", OrderNo: "o9", Status: Created}
	v := Check(b.ops, truth)
	if len(v.Violations) != 1 || v.Violations[0].Kind != Untruthful {
		t.Fatalf("told failed, SQL has the order: %v", v.Violations)
	}
}
