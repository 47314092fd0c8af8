package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The states of a reservation as the buyer API reports them.
const (
	Queued    = "queued"
	Created   = "created"
	Paid      = "paid"
	Refunded  = "refunded" // after paid: the payment was refunded (#28)
	Cancelled = "cancelled"
	Failed    = "failed"
	Unknown   = "unknown"
)

// Fact is what the stores hold for one reservation, read from SQL after
// the run settled.
type Fact struct {
	User    string // the order's user ID ("" without an order)
	OrderNo string
	Status  string // the order's status, lower case (created, paid, refunded, cancelled); "" = no order
	Failed  bool   // a FAILED outcome is recorded (message_dedup)
}

// Truth is the stores' facts by reservation ID. A nil Truth skips the
// cross-check with the stores.
type Truth map[string]Fact

// The kinds of violation.
const (
	Contradiction = "contradiction"  // no real-time order of the answers is a legal life of a buy
	AttemptMoved  = "attempt moved"  // the retries of one attempt named different reservations
	TwoOwners     = "two owners"     // two buyers were told one reservation is theirs
	NoOutcome     = "no outcome"     // a 202 that no answer ever settled
	NotTheirs     = "not theirs"     // the reservation a buyer was told is theirs is an order of someone else
	Untruthful    = "untruthful"     // the buyer's last word disagrees with SQL
	OthersData    = "others' data"   // a buyer read another buyer's reservation
	WrongSubject  = "wrong subject"  // an answer about a reservation other than the one asked
	Undecided     = "undecided"      // the checker ran out of time on a history (not a verdict)
	checkTimeout  = 10 * time.Second // per reservation; histories are a few dozen answers
)

// Violation is one broken rule of the buyer's history.
type Violation struct {
	Kind        string
	Reservation string
	User        string // the buyer concerned
	Detail      string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: reservation %s (user %s): %s", v.Kind, v.Reservation, v.User, v.Detail)
}

// Verdict is the outcome of Check.
type Verdict struct {
	Clients      int  // clients whose ops were checked
	Ops          int  // ops checked
	Reservations int  // reservations with an accepted answer: each one history checked
	Undecided    int  // histories the linearizability check could not decide in time
	Truth        bool // cross-checked with the stores
	Violations   []Violation
}

// String is one line: what was checked and the violations' count.
func (v Verdict) String() string {
	how := "answers in real-time order against the model of a buy (porcupine)"
	if v.Truth {
		how += ", last word against SQL"
	} else {
		how += ", no SQL cross-check"
	}
	s := fmt.Sprintf("%d reservation histories of %d clients, %d answers checked (%s): %d violations",
		v.Reservations, v.Clients, v.Ops, how, len(v.Violations))
	if v.Undecided > 0 {
		s += fmt.Sprintf(", %d undecided", v.Undecided)
	}
	return s
}

// obs is what one answer says of a reservation's state.
type obs struct {
	Status  string
	OrderNo string
	Reason  string
}

func (o obs) String() string {
	s := o.Status
	if o.Reason != "" {
		s += " (" + o.Reason + ")"
	}
	if o.OrderNo != "" {
		s += " order " + o.OrderNo
	}
	return s
}

// final reports whether status is an outcome (the end of a buy's life,
// or created, which only goes on to paid or cancelled, and paid, which
// only goes on to refunded).
func final(status string) bool {
	switch status {
	case Created, Paid, Refunded, Cancelled, Failed:
		return true
	}
	return false
}

// view reads the result view's status; "failed" with reason "cancelled"
// is the cancelled order's other spelling.
func view(status, orderNo, reason string) obs {
	if status == Failed && reason == "cancelled" {
		return obs{Status: Cancelled, OrderNo: orderNo}
	}
	return obs{Status: status, OrderNo: orderNo, Reason: reason}
}

// observe returns what op says of its reservation's state, and false when
// it says nothing (no answer, a 5xx, a refusal naming no reservation).
func observe(op Op) (obs, bool) {
	if op.Code == 0 || op.Code >= 500 || op.Reservation == "" {
		return obs{}, false
	}
	switch op.Kind {
	case Buy:
		switch {
		case op.Code == 202:
			return obs{Status: Queued}, true
		case op.Code == 200:
			return view(op.Status, op.OrderNo, op.Reason), true
		case op.Code == 409 && op.Status == Failed:
			return obs{Status: Failed, Reason: op.Reason}, true
		}
	case Result, Push:
		if op.Code == 200 {
			return view(op.Status, op.OrderNo, op.Reason), true
		}
	case Pay:
		switch {
		case op.Code == 200 && (op.Status == Paid || op.Status == Refunded):
			return obs{Status: op.Status, OrderNo: op.OrderNo}, true
		case op.Code == 409 && op.Status == Cancelled:
			return obs{Status: Cancelled, OrderNo: op.OrderNo}, true
		case op.Code == 404:
			return obs{Status: Unknown}, true // the buyer's own order not found
		}
	}
	return obs{}, false
}

// accepted reports whether a buy's answer gave the buyer the reservation.
func accepted(op Op) bool {
	return op.Kind == Buy && op.Reservation != "" && (op.Code == 202 || op.Code == 200 || (op.Code == 409 && op.Status == Failed))
}

// legal reports whether a reservation in state from may next be reported
// as to.
func legal(from, to obs) bool {
	if from.OrderNo != "" && to.OrderNo != "" && from.OrderNo != to.OrderNo {
		return false
	}
	switch to.Status {
	case Queued, Created, Paid, Refunded, Cancelled, Failed, Unknown:
	default:
		return false // not a state of the API
	}
	switch from.Status {
	case "", Queued:
		return true
	case Created: // refunded: paid, then refunded, between two answers
		return to.Status == Created || to.Status == Paid || to.Status == Refunded || to.Status == Cancelled
	case Paid:
		return to.Status == Paid || to.Status == Refunded
	case Refunded, Cancelled, Failed:
		return to.Status == from.Status
	}
	return false
}

// step is the model's step: the state after an answer (unknown carries no
// state; an order number, once named, stays).
func step(from, to obs) obs {
	if to.Status == Unknown {
		return from
	}
	next := to
	if next.OrderNo == "" {
		next.OrderNo = from.OrderNo
	}
	return next
}

// model is the per-reservation model of a buy for porcupine.
var model = porcupine.Model{
	Init: func() interface{} { return obs{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		from, to := state.(obs), output.(obs)
		if !legal(from, to) {
			return false, state
		}
		return true, step(from, to)
	},
	Equal: func(a, b interface{}) bool { return a.(obs) == b.(obs) },
	DescribeOperation: func(input, output interface{}) string {
		return fmt.Sprintf("%v → %v", input, output)
	},
	DescribeState: func(state interface{}) string { return state.(obs).String() },
}

// Check checks the histories in ops (see the package doc); truth, when not
// nil, holds the stores' facts read after the run settled, every 202 of
// ops having had its final answer.
func Check(ops []Op, truth Truth) Verdict {
	v := Verdict{Ops: len(ops), Truth: truth != nil}
	add := func(kind, resv, user, f string, a ...any) {
		v.Violations = append(v.Violations, Violation{Kind: kind, Reservation: resv, User: user, Detail: fmt.Sprintf(f, a...)})
	}
	clients := map[int]bool{}
	byResv := map[string][]Op{}
	owner := map[string]Op{} // the first accepted answer of each reservation
	attempts := map[[2]string]Op{}
	promised := map[string]bool{} // answered 202 or a replay's 200, not only 409 failed
	sorted := slices.Clone(ops)
	slices.SortStableFunc(sorted, func(a, b Op) int { return cmp.Compare(a.Start, b.Start) })
	for _, op := range sorted {
		clients[op.Client] = true
		if op.Reservation != "" {
			byResv[op.Reservation] = append(byResv[op.Reservation], op)
		}
		if !accepted(op) {
			continue
		}
		promised[op.Reservation] = promised[op.Reservation] || op.Code != 409
		if o, ok := owner[op.Reservation]; !ok {
			owner[op.Reservation] = op
		} else if o.User != op.User {
			add(TwoOwners, op.Reservation, op.User, "user %s was told it is theirs at %v, user %s at %v", o.User, at(o.End), op.User, at(op.End))
		}
		if op.Attempt != "" {
			k := [2]string{fmt.Sprint(op.Client), op.Attempt}
			if first, ok := attempts[k]; !ok {
				attempts[k] = op
			} else if first.Reservation != op.Reservation {
				add(AttemptMoved, op.Reservation, op.User, "attempt %s was answered reservation %s at %v, then %s at %v",
					op.Attempt, first.Reservation, at(first.End), op.Reservation, at(op.End))
			}
		}
	}
	v.Clients = len(clients)
	resvs := make([]string, 0, len(byResv))
	for r := range byResv {
		resvs = append(resvs, r)
	}
	slices.Sort(resvs)
	for _, resv := range resvs {
		all := byResv[resv]
		first, isAccepted := owner[resv]
		ownerUser := first.User
		if !isAccepted {
			if f, ok := truth[resv]; ok && f.User != "" {
				ownerUser = f.User
			}
		}
		var mine []Op
		for _, op := range all {
			if op.Named != "" && op.Named != resv {
				add(WrongSubject, resv, op.User, "%s asked about %s, the answer at %v is about %s", op.Kind, resv, at(op.End), op.Named)
			}
			if ownerUser != "" && op.User != ownerUser {
				if o, ok := observe(op); ok && o.Status != Unknown {
					add(OthersData, resv, op.User, "user %s's %s at %v was answered %v about user %s's reservation", op.User, op.Kind, at(op.End), o, ownerUser)
				}
				continue
			}
			mine = append(mine, op)
		}
		if !isAccepted {
			continue // never given to a recorded buyer: nothing promised
		}
		v.Reservations++
		v.checkOne(resv, ownerUser, promised[resv], mine, truth, add)
	}
	return v
}

// checkOne checks the owner's answers about one accepted reservation.
// A reservation only ever answered 409 failed (a retry of an attempt whose
// first answer was lost) need not have a FAILED outcome in SQL, only no
// order.
func (v *Verdict) checkOne(resv, user string, promised bool, mine []Op, truth Truth, add func(kind, resv, user, f string, a ...any)) {
	var pops []porcupine.Operation
	var seen []Op
	var last *Op
	var lastObs obs
	for i, op := range mine {
		o, ok := observe(op)
		if !ok {
			continue
		}
		seen = append(seen, op)
		pops = append(pops, porcupine.Operation{ClientId: op.Client, Input: op.Kind, Call: op.Start, Output: o, Return: max(op.End, op.Start)})
		if final(o.Status) && (last == nil || op.End >= last.End) {
			last, lastObs = &mine[i], o
		}
	}
	switch porcupine.CheckOperationsTimeout(model, pops, checkTimeout) {
	case porcupine.Illegal:
		add(Contradiction, resv, user, "%s", explain(seen))
	case porcupine.Unknown:
		v.Undecided++
	}
	if last == nil {
		add(NoOutcome, resv, user, "accepted, and no answer of %d settled it (%s)", len(mine), summary(seen))
		return
	}
	if truth == nil {
		return
	}
	f, ok := truth[resv]
	if f.Status != "" && f.User != user {
		add(NotTheirs, resv, user, "user %s was told %v; SQL: the order %s is user %s's", user, lastObs, f.OrderNo, f.User)
		return
	}
	told := fmt.Sprintf("told %v at %v", lastObs, at(last.End))
	switch {
	case (!ok || (f.Status == "" && !f.Failed)) && (promised || lastObs.Status != Failed):
		add(Untruthful, resv, user, "%s; SQL has neither an order nor a FAILED outcome", told)
	case lastObs.Status == Failed && f.Status != "":
		add(Untruthful, resv, user, "%s; SQL has the order %s, %s", told, f.OrderNo, f.Status)
	case lastObs.Status != Failed && f.Status == "":
		add(Untruthful, resv, user, "%s; SQL has no order", told)
	case lastObs.OrderNo != "" && lastObs.OrderNo != f.OrderNo:
		add(Untruthful, resv, user, "%s; SQL's order is %s", told, f.OrderNo)
	case (lastObs.Status == Paid || lastObs.Status == Refunded || lastObs.Status == Cancelled) && f.Status != lastObs.Status:
		add(Untruthful, resv, user, "%s; SQL says %s", told, f.Status)
	}
}

// explain names the contradiction porcupine found: the first answer that
// is not a legal successor of one that ended before it started, else the
// overlapping answers that no order reconciles.
func explain(ops []Op) string {
	for j, b := range ops {
		ob, _ := observe(b)
		for _, a := range ops[:j] {
			oa, _ := observe(a)
			if a.End < b.Start && !legal(step(obs{}, oa), ob) {
				return fmt.Sprintf("%s answered %v at %v, then %s answered %v at %v", a.Kind, oa, at(a.End), b.Kind, ob, at(b.End))
			}
		}
	}
	return "no order of the overlapping answers is a legal life of a buy: " + summary(ops)
}

// summary lists ops' answers: "buy 202 queued [0.1ms–0.3ms], result …".
func summary(ops []Op) string {
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		o, ok := observe(op)
		s := fmt.Sprintf("%s %d", op.Kind, op.Code)
		if ok {
			s += " " + o.String()
		}
		parts = append(parts, fmt.Sprintf("%s [%v–%v]", s, at(op.Start), at(op.End)))
	}
	if len(parts) == 0 {
		return "no answer"
	}
	return strings.Join(parts, ", ")
}

// at renders a recorder time.
func at(ns int64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }
