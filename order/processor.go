package order

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// Processor writes orders: per message, or per batch with one stock update
// per activity. It is the database half of the [Consumer] and can be used
// without Kafka (from an outbox relay, a test, an embedded deployment). It is
// safe for concurrent use; several processors (consumers) may share a
// database, the unique keys settle every race.
//
// Each message is written in ONE transaction: the dedup row (message_dedup,
// primary key msg_id), UPDATE seckill_activity SET stock = stock - n WHERE
// id = ? AND stock >= n, and the order row (snowflake ID, unique order_no,
// unique reservation_id, UNIQUE(user_id, activity_id, live_slot) when the cap is 1).
// A message already in message_dedup is answered from there (Duplicate).
// A business refusal (sold out in the DB, duplicate user, unknown activity)
// rolls back and writes a FAILED dedup row alone: the result is an
// [Outcome], not an error. Errors are infrastructure failures (or a
// [TxHook]'s): nothing was committed for that message and retrying is safe.
// The order row carries the product snapshot of the activity row and the
// message's [Message.Ext]; with [WithTxHook] the shop's own rows are
// written in the same transaction; [WithTables] names the tables.
type Processor struct {
	db     *gorm.DB
	ids    IDSource
	o      options
	sql    *sqlText
	stmts  *stmtCache
	txOpts []*sql.TxOptions
}

// NewProcessor returns a processor writing to db with IDs from ids (an
// orderid.Generator whose machine ID is unique among running processors).
// Options: [WithClock], [WithPayTimeout], [WithTables], [WithTxHook].
func NewProcessor(db *gorm.DB, ids IDSource, opts ...ProcessorOption) (*Processor, error) {
	if db == nil || ids == nil {
		return nil, fmt.Errorf("%w: NewProcessor needs a db and an id source", ErrInvalidConfig)
	}
	o, err := buildOptions(opts, ProcessorOption.applyProcessor)
	if err != nil {
		return nil, err
	}
	if o.payTimeout <= 0 {
		return nil, fmt.Errorf("%w: pay timeout must be positive", ErrInvalidConfig)
	}
	if err := o.tables.validate(); err != nil {
		return nil, err
	}
	text := newSQLText(db, o.tables)
	p := &Processor{db: db, ids: ids, o: o, sql: &text, stmts: newStmtCache(db, &text)}
	if text.dialect == "postgres" {
		// The caps check reads what committed before its locks were
		// granted: READ COMMITTED, whatever the server's default.
		p.txOpts = []*sql.TxOptions{{Isolation: sql.LevelReadCommitted}}
	}
	return p, nil
}

// Close closes the processor's prepared statements (the batch path prepares
// a few multi-row INSERTs per connection). The database stays open; a
// processor used after Close prepares them again. Closing the *sql.DB closes
// them too, so Close is needed only when the DB outlives the processor.
func (p *Processor) Close() error { return p.stmts.close() }

type businessError struct{ reason string }

func (e *businessError) Error() string { return "order: business: " + e.reason }

var (
	errDuplicateMsg = errors.New("order: duplicate message")
	errConflict     = errors.New("order: batch conflict")
)

// execer is the *sql.Tx under a gorm transaction: the batch inserts bypass
// gorm's reflection (the hot path of the consumer).
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func rawExec(ctx context.Context, tx *gorm.DB, query string, args []any) error {
	if ex, ok := tx.Statement.ConnPool.(execer); ok {
		_, err := ex.ExecContext(ctx, query, args...)
		return err
	}
	return tx.Exec(query, args...).Error
}

func orderArgs(orders []Order) []any {
	args := make([]any, 0, columns(tableOrder)*len(orders))
	for i := range orders {
		o := &orders[i]
		var slot any
		if o.LiveSlot != nil {
			slot = *o.LiveSlot
		}
		var ext any
		if len(o.Ext) > 0 {
			ext = string(o.Ext)
		}
		args = append(args, o.ID, o.OrderNo, o.ReservationID, o.UserID, o.ActivityID, slot, o.Qty,
			o.Price.String(), o.ProductID, o.ProductName, ext, o.Status, o.ExpireTime, o.CreatedAt, o.UpdatedAt)
	}
	return args
}

func dedupArgs(ds []Dedup) []any {
	args := make([]any, 0, columns(tableDedup)*len(ds))
	for i := range ds {
		d := &ds[i]
		args = append(args, d.MsgID, d.ReservationID, d.ActivityID, d.UserID, d.Outcome, d.OrderNo, d.Reason, d.CreatedAt)
	}
	return args
}

type activityInfo struct {
	ID            string
	ActivityPrice Cents
	UserLimit     int64
	ProductID     int64
	ProductName   string
}

func (p *Processor) loadActivities(tx *gorm.DB, ids []string) (map[string]activityInfo, error) {
	var rows []activityInfo
	if err := tx.Table(p.o.tables.Activity).Select("id", "activity_price", "user_limit", "product_id", "product_name").
		Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, err
	}
	m := make(map[string]activityInfo, len(rows))
	for _, r := range rows {
		m[r.ID] = r
	}
	return m, nil
}

func (p *Processor) newOrder(m Message, a activityInfo, id int64, now time.Time) Order {
	price := Cents(m.Price)
	if m.Price == 0 {
		price = a.ActivityPrice
	}
	o := Order{ID: id, OrderNo: strconv.FormatInt(id, 10), ReservationID: m.ReservationID,
		UserID: m.UserID, ActivityID: m.ActivityID, Qty: m.Qty, Price: price,
		ProductID: a.ProductID, ProductName: a.ProductName, Ext: RawJSON(m.ext()), Status: OrderCreated,
		ExpireTime: now.Add(p.o.payTimeout), CreatedAt: now, UpdatedAt: now, Headers: m.Headers}
	if a.UserLimit == 1 {
		one := int8(1)
		o.LiveSlot = &one
	}
	return o
}

// Handle writes one message in one transaction. With [WithTxHook] the
// hook runs inside it for the new order; a hook error rolls the
// transaction back and is returned (wrapped; nothing was committed).
func (p *Processor) Handle(ctx context.Context, m Message) (Outcome, error) {
	if err := m.Validate(); err != nil {
		return Outcome{}, Permanent(err)
	}
	id, err := p.ids.NextID()
	if err != nil {
		return Outcome{}, fmt.Errorf("order: next id: %w", err)
	}
	p.stmts.prepare(ctx, chunkSize(p.db)) // before the transaction holds a connection
	now := p.o.clock.Now()
	var ord Order
	err = p.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		ord, err = p.handleTx(ctx, tx, m, id, now)
		return err
	}, p.txOpts...)
	var biz *businessError
	switch {
	case err == nil:
		return Outcome{Message: m, Status: StatusSuccess, OrderID: id, OrderNo: ord.OrderNo, ExpireTime: ord.ExpireTime}, nil
	case errors.Is(err, errDuplicateMsg):
		return lookupReservation(ctx, p.db, p.o.tables, m)
	case errors.As(err, &biz):
		return p.fail(ctx, m, biz.reason, now)
	default:
		return Outcome{}, fmt.Errorf("order: handle %s: %w", m.MsgID, err)
	}
}

// handleTx is the transaction of [Processor.Handle]: the dedup row, the
// buyer's cap, the order row, the [TxHook], then the activity's stock row.
// A business refusal is a *businessError; a message already written is
// errDuplicateMsg.
func (p *Processor) handleTx(ctx context.Context, tx *gorm.DB, m Message, id int64, now time.Time) (Order, error) {
	if len(m.Lines) > 0 {
		return p.cartTx(ctx, tx, m, id, now)
	}
	d := dedupOf(m, StatusSuccess, strconv.FormatInt(id, 10), "", now)
	if err := p.insertRows(ctx, tx, tableDedup, dedupArgs([]Dedup{d})); err != nil {
		if dbx.IsDuplicate(err) {
			return Order{}, errDuplicateMsg
		}
		return Order{}, err
	}
	acts, err := p.loadActivities(tx, []string{m.ActivityID})
	if err != nil {
		return Order{}, err
	}
	a, ok := acts[m.ActivityID]
	if !ok {
		return Order{}, &businessError{ReasonUnknownActivity}
	}
	if a.UserLimit > 1 {
		held, err := p.liveUnits(ctx, tx, m.ActivityID, []string{m.UserID})
		if err != nil {
			return Order{}, err
		}
		if held[m.UserID]+m.Qty > a.UserLimit {
			return Order{}, &businessError{ReasonLimit}
		}
	}
	ord := p.newOrder(m, a, id, now)
	if err := p.insertRows(ctx, tx, tableOrder, orderArgs([]Order{ord})); err != nil {
		if dbx.IsDuplicate(err) {
			return Order{}, &businessError{ReasonDuplicate}
		}
		return Order{}, err
	}
	if err := p.runHook(ctx, tx, []Order{ord}); err != nil {
		return Order{}, err
	}
	// The hot row last: its lock is held only until the commit.
	res := tx.Exec(p.sql.takeStock, m.Qty, m.ActivityID, m.Qty)
	if res.Error != nil {
		return Order{}, res.Error
	}
	if res.RowsAffected == 0 {
		return Order{}, &businessError{ReasonSoldOut}
	}
	return ord, nil
}

// reasonReleased is the Reason of a cart refused because one of its
// lines' reservations was fenced as released (handoff.ReasonReleased).
const reasonReleased = "released"

// lineReservation is the stock reservation ID of line i of the order of
// reservation id: "<id>#<i>" (stock.Deductor.ReserveLines).
func lineReservation(id string, i int) string { return id + "#" + strconv.Itoa(i) }

// cartTx is the transaction of [Processor.Handle] for a message with lines:
// the dedup row of the message and one per line (the line's reservation
// "<id>#<i>" with a SUCCESS outcome: the fence handoff.Fence meets when it
// would release a line of a consumed cart, and a line fenced first refuses
// the cart, reasonReleased), the caps per line's activity, the order row
// (Qty 0), its line rows, the [TxHook], then the stock row of each line's
// activity, in ID order. All or nothing: any refusal or error rolls every
// row back.
func (p *Processor) cartTx(ctx context.Context, tx *gorm.DB, m Message, id int64, now time.Time) (Order, error) {
	no := strconv.FormatInt(id, 10)
	if err := p.insertRows(ctx, tx, tableDedup, dedupArgs([]Dedup{dedupOf(m, StatusSuccess, no, "", now)})); err != nil {
		if dbx.IsDuplicate(err) {
			return Order{}, errDuplicateMsg
		}
		return Order{}, err
	}
	fences := make([]Dedup, len(m.Lines))
	units := map[string]int64{m.ActivityID: 0}
	for i, l := range m.Lines {
		fences[i] = Dedup{MsgID: "line:" + no + "#" + strconv.Itoa(i), ReservationID: lineReservation(m.ReservationID, i),
			ActivityID: l.ActivityID, UserID: m.UserID, Outcome: string(StatusSuccess), OrderNo: no, CreatedAt: now}
		units[l.ActivityID] += l.Qty
	}
	if err := p.insertRows(ctx, tx, tableDedup, dedupArgs(fences)); err != nil {
		if dbx.IsDuplicate(err) {
			return Order{}, &businessError{reasonReleased}
		}
		return Order{}, err
	}
	actIDs := make([]string, 0, len(units))
	for a := range units {
		actIDs = append(actIDs, a)
	}
	slices.Sort(actIDs) // one lock order for every consumer
	acts, err := p.loadActivities(tx, actIDs)
	if err != nil {
		return Order{}, err
	}
	for _, a := range actIDs {
		if _, ok := acts[a]; !ok {
			return Order{}, &businessError{ReasonUnknownActivity}
		}
	}
	for _, a := range actIDs {
		if units[a] == 0 {
			continue // the order's own activity, without a line
		}
		// Every cap, 1 included: the live_slot key covers orders, not lines.
		held, err := p.liveUnits(ctx, tx, a, []string{m.UserID})
		if err != nil {
			return Order{}, err
		}
		if held[m.UserID]+units[a] > acts[a].UserLimit {
			return Order{}, &businessError{ReasonLimit}
		}
	}
	// The sale's cap over its variants: a variant line "<sale>/<v>" counts
	// against the sale row's cap too (with the buyer's live lines of every
	// variant of the sale), as Redis counts it; a sale without a row has
	// no such cap here.
	sales := map[string]int64{}
	for _, l := range m.Lines {
		if i := strings.IndexByte(l.ActivityID, '/'); i > 0 {
			sales[l.ActivityID[:i]] += l.Qty
		}
	}
	if len(sales) > 0 {
		ids := make([]string, 0, len(sales))
		for sale := range sales {
			ids = append(ids, sale)
		}
		slices.Sort(ids)
		rows, err := p.loadActivities(tx, ids)
		if err != nil {
			return Order{}, err
		}
		for _, sale := range ids {
			row, ok := rows[sale]
			if !ok {
				continue
			}
			held, err := p.saleUnits(ctx, tx, sale, m.UserID)
			if err != nil {
				return Order{}, err
			}
			if held+sales[sale] > row.UserLimit {
				return Order{}, &businessError{ReasonLimit}
			}
		}
	}
	ord := p.newOrder(m, acts[m.ActivityID], id, now)
	ord.Price, ord.LiveSlot = 0, nil
	if err := p.insertRows(ctx, tx, tableOrder, orderArgs([]Order{ord})); err != nil {
		if dbx.IsDuplicate(err) {
			return Order{}, &businessError{ReasonDuplicate}
		}
		return Order{}, err
	}
	ord.Lines = make([]Line, len(m.Lines))
	for i, l := range m.Lines {
		price := l.Price
		if price == 0 {
			price = acts[l.ActivityID].ActivityPrice
		}
		ord.Lines[i] = Line{OrderNo: no, LineNo: i, ReservationID: fences[i].ReservationID, UserID: m.UserID,
			ActivityID: l.ActivityID, Qty: l.Qty, Price: price, UpdatedAt: now}
	}
	if err := tx.Table(p.o.tables.Line).Create(&ord.Lines).Error; err != nil {
		return Order{}, err
	}
	if err := p.runHook(ctx, tx, []Order{ord}); err != nil {
		return Order{}, err
	}
	// The hot rows last, in ID order: their locks are held only until the commit.
	for _, a := range actIDs {
		if units[a] == 0 {
			continue
		}
		res := tx.Exec(p.sql.takeStock, units[a], a, units[a])
		if res.Error != nil {
			return Order{}, res.Error
		}
		if res.RowsAffected == 0 {
			return Order{}, &businessError{ReasonSoldOut}
		}
	}
	return ord, nil
}

// hookError is a [TxHook]'s error: never taken for a conflict or a
// business refusal, whatever it wraps.
type hookError struct{ err error }

func (e *hookError) Error() string { return "order: tx hook: " + e.err.Error() }

func (e *hookError) Unwrap() error { return e.err }

// runHook calls the [TxHook] with the transaction's new orders.
func (p *Processor) runHook(ctx context.Context, tx *gorm.DB, orders []Order) error {
	if p.o.txHook == nil || len(orders) == 0 {
		return nil
	}
	if err := p.o.txHook(ctx, tx, orders); err != nil {
		return &hookError{err}
	}
	return nil
}

// fail records a business refusal. If the reservation already has an order
// (the same reservation sent twice under two message IDs) the message is a
// duplicate of that order, not a failure: its reservation must not be released.
func (p *Processor) fail(ctx context.Context, m Message, reason string, now time.Time) (Outcome, error) {
	var existing []Order
	if err := p.db.WithContext(ctx).Table(p.o.tables.Order).Select("order_no").Where("reservation_id = ?", m.ReservationID).
		Limit(1).Find(&existing).Error; err != nil {
		return Outcome{}, fmt.Errorf("order: check reservation %s: %w", m.ReservationID, err)
	}
	out := Outcome{Message: m, Status: StatusFailed, Reason: reason}
	if len(existing) == 1 {
		out = Outcome{Message: m, Status: StatusSuccess, OrderNo: existing[0].OrderNo, Duplicate: true}
	}
	d := dedupOf(m, out.Status, out.OrderNo, out.Reason, now)
	if err := p.db.WithContext(ctx).Table(p.o.tables.Dedup).Create(&d).Error; err != nil {
		if dbx.IsDuplicate(err) {
			return lookupReservation(ctx, p.db, p.o.tables, m)
		}
		return Outcome{}, fmt.Errorf("order: record failure %s: %w", m.MsgID, err)
	}
	return out, nil
}

// Process writes many messages in ONE transaction with one stock update per
// activity. Messages already processed are answered from message_dedup; the
// same message twice in msgs is answered once. When the batch cannot commit
// as a whole — an activity without enough DB stock, a duplicate reservation
// or user, an unknown activity — it is rolled back and every message is
// written on its own with [Processor.Handle], so one bad message never fails
// its neighbours. A message with lines (a cart) is always written on its
// own. outs[i] belongs to msgs[i].
//
// On error nothing is lost: what was committed is found again as
// duplicates when the same messages are processed again. A [TxHook] error
// is returned like a database error (the batch is not retried one by one
// here; the [Consumer] does that).
func (p *Processor) Process(ctx context.Context, msgs []Message) ([]Outcome, error) {
	outs := make([]Outcome, len(msgs))
	first := make(map[string]int, len(msgs))
	resv := make(map[string]bool, len(msgs))
	users := make(map[[2]string]bool, len(msgs))
	uniq := make([]int, 0, len(msgs))
	dupOf := map[int]int{}
	var carts []int
	conflict := false
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return nil, Permanent(fmt.Errorf("message %d: %w", i, err))
		}
		if j, ok := first[m.MsgID]; ok {
			dupOf[i] = j
			continue
		}
		first[m.MsgID] = i
		if len(m.Lines) > 0 {
			carts = append(carts, i) // a cart is written on its own (Handle)
			continue
		}
		uniq = append(uniq, i)
		u := [2]string{m.UserID, m.ActivityID}
		if resv[m.ReservationID] || users[u] {
			conflict = true // settle these one by one
		}
		resv[m.ReservationID], users[u] = true, true
	}
	done := false
	if !conflict && len(uniq) > 1 {
		err := p.batch(ctx, msgs, uniq, outs)
		switch {
		case err == nil:
			done = true
		case !errors.Is(err, errConflict):
			return nil, err
		}
	}
	one := carts // each written on its own: the carts, and the rest unless batched
	if !done {
		one = append(uniq, carts...)
	}
	for _, i := range one {
		o, err := p.Handle(ctx, msgs[i])
		if err != nil {
			return nil, err
		}
		outs[i] = o
	}
	for i, j := range dupOf {
		outs[i] = outs[j]
		outs[i].Message = msgs[i]
		outs[i].Duplicate = true
	}
	return outs, nil
}

// batchTx is one batch transaction of [Processor.Process]: the unique
// messages msgs[uniq[k]] get the order IDs ids[k] and their outcomes in
// outs.
type batchTx struct {
	msgs []Message
	uniq []int
	outs []Outcome
	ids  []int64
	now  time.Time
}

// batch writes the unique messages of msgs in one transaction. It returns
// errConflict when the batch cannot commit as a whole (the caller then
// writes each message on its own).
func (p *Processor) batch(ctx context.Context, msgs []Message, uniq []int, outs []Outcome) error {
	ids := make([]int64, len(uniq))
	for k := range uniq {
		id, err := p.ids.NextID()
		if err != nil {
			return fmt.Errorf("order: next id: %w", err)
		}
		ids[k] = id
	}
	p.stmts.prepare(ctx, chunkSize(p.db)) // before the transaction holds a connection
	b := &batchTx{msgs: msgs, uniq: uniq, outs: outs, ids: ids, now: p.o.clock.Now()}
	err := p.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return p.writeBatch(ctx, tx, b)
	}, p.txOpts...)
	if err != nil && !errors.Is(err, errConflict) {
		return fmt.Errorf("order: batch of %d: %w", len(uniq), err)
	}
	return err
}

// writeBatch is the batch's transaction: the steps below, in this order.
func (p *Processor) writeBatch(ctx context.Context, tx *gorm.DB, b *batchTx) error {
	if err := p.planPerExecution(tx); err != nil {
		return err
	}
	totals, err := p.answerSeen(tx, b)
	if err != nil || len(totals) == 0 {
		return err
	}
	actIDs := make([]string, 0, len(totals))
	for a := range totals {
		actIDs = append(actIDs, a)
	}
	slices.Sort(actIDs) // one lock order for every consumer
	acts, err := p.loadActivities(tx, actIDs)
	if err != nil {
		return err
	}
	for _, a := range actIDs {
		if _, ok := acts[a]; !ok {
			return errConflict
		}
	}
	if err := p.checkCaps(ctx, tx, b.msgs, b.uniq, b.outs, acts); err != nil {
		return err
	}
	orders, err := p.insertBatch(ctx, tx, b, acts)
	if err != nil {
		return err
	}
	if err := p.runHook(ctx, tx, orders); err != nil {
		return err
	}
	return p.takeStock(tx, actIDs, totals)
}

// planPerExecution makes PostgreSQL plan the batch's statements per
// execution. pgx prepares and caches every statement; after five runs
// PostgreSQL may switch a statement to a generic plan made for the table
// as it was then. Planned on an empty table, the 500-value IN lists of a
// batch become sequential scans that stay until an ANALYZE: a batch then
// costs O(table). Plans made per execution follow the table's actual size.
func (p *Processor) planPerExecution(tx *gorm.DB) error {
	if p.sql.dialect != "postgres" {
		return nil
	}
	return tx.Exec("SET LOCAL plan_cache_mode = force_custom_plan").Error
}

// answerSeen answers the messages already in message_dedup from there
// (Duplicate outcomes) and returns the units the others take, per activity.
func (p *Processor) answerSeen(tx *gorm.DB, b *batchTx) (map[string]int64, error) {
	msgIDs := make([]string, len(b.uniq))
	for k, i := range b.uniq {
		msgIDs[k] = b.msgs[i].MsgID
	}
	var seen []Dedup
	if err := tx.Table(p.o.tables.Dedup).Where("msg_id IN ?", msgIDs).Find(&seen).Error; err != nil {
		return nil, err
	}
	old := make(map[string]Dedup, len(seen))
	for _, d := range seen {
		old[d.MsgID] = d
	}
	totals := map[string]int64{}
	for k, i := range b.uniq {
		m := b.msgs[i]
		if d, ok := old[m.MsgID]; ok {
			b.outs[i] = outcomeOf(m, d)
			continue
		}
		b.outs[i] = Outcome{Message: m, OrderID: b.ids[k]}
		totals[m.ActivityID] += m.Qty
	}
	return totals, nil
}

// insertBatch inserts the dedup and order rows of the batch's new
// messages, marks their outcomes SUCCESS and returns the new orders. A
// duplicate key (a reservation or buyer already ordered) is a conflict.
func (p *Processor) insertBatch(ctx context.Context, tx *gorm.DB, b *batchTx, acts map[string]activityInfo) ([]Order, error) {
	dedups := make([]Dedup, 0, len(b.uniq))
	orders := make([]Order, 0, len(b.uniq))
	for _, i := range b.uniq {
		if b.outs[i].Duplicate {
			continue
		}
		m := b.msgs[i]
		o := p.newOrder(m, acts[m.ActivityID], b.outs[i].OrderID, b.now)
		orders = append(orders, o)
		dedups = append(dedups, dedupOf(m, StatusSuccess, o.OrderNo, "", b.now))
		b.outs[i].Status, b.outs[i].OrderNo, b.outs[i].ExpireTime = StatusSuccess, o.OrderNo, o.ExpireTime
	}
	for _, rows := range []struct {
		t    table
		args []any
	}{{tableDedup, dedupArgs(dedups)}, {tableOrder, orderArgs(orders)}} {
		if err := p.insertRows(ctx, tx, rows.t, rows.args); err != nil {
			if dbx.IsDuplicate(err) {
				return nil, errConflict
			}
			return nil, err
		}
	}
	return orders, nil
}

// takeStock takes each activity's units from its stock row, the hot rows
// last and in one order (actIDs sorted): their locks are held only until
// the commit, and consumers never deadlock on them. An activity without
// enough stock is a conflict.
func (p *Processor) takeStock(tx *gorm.DB, actIDs []string, totals map[string]int64) error {
	for _, a := range actIDs {
		res := tx.Exec(p.sql.takeStock, totals[a], a, totals[a])
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errConflict
		}
	}
	return nil
}

// liveUnits returns the units of the live (CREATED or PAID, or REFUNDED
// without a restock to the sale: the buyer keeps those units, as Redis
// does) orders of users in activity, read so that a concurrent transaction for the same buyer
// cannot pass the same check: MySQL/MariaDB's FOR UPDATE takes next-key
// locks on the (user_id, activity_id, live_slot) index range, so the other
// transaction waits, or — gap locks do not exclude each other — deadlocks
// with this one when it inserts, and InnoDB rolls one of them back (an
// error: the caller retries). PostgreSQL has no range locks, so there the
// buyers are first locked with advisory transaction locks (lockBuyers) and
// FOR UPDATE locks the rows that exist. SQLite serialises writers.
func (p *Processor) liveUnits(ctx context.Context, tx *gorm.DB, activity string, users []string) (map[string]int64, error) {
	if err := p.lockBuyers(ctx, tx, activity, users); err != nil {
		return nil, err
	}
	type row struct {
		UserID string
		Qty    int64
	}
	var rows []row
	if err := tx.WithContext(ctx).Raw(p.sql.liveUnits, users, activity, []string{OrderCreated, OrderPaid}, OrderRefunded, "sale").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("order: live units: %w", err)
	}
	var lines []row
	if err := tx.WithContext(ctx).Raw(p.sql.liveLineUnits, users, activity, OrderRefunded, "sale").Scan(&lines).Error; err != nil {
		return nil, fmt.Errorf("order: live line units: %w", err)
	}
	held := make(map[string]int64, len(users))
	for _, r := range append(rows, lines...) {
		held[r.UserID] += r.Qty
	}
	return held, nil
}

// saleUnits returns the units of user's live lines over every variant of
// sale (activity "<sale>/<variant>"), read as liveUnits reads (the buyer
// locked under the sale's key on PostgreSQL; FOR UPDATE over the buyer's
// (user_id, activity_id) range of the sale's variants on MySQL/MariaDB).
func (p *Processor) saleUnits(ctx context.Context, tx *gorm.DB, sale, user string) (int64, error) {
	if err := p.lockBuyers(ctx, tx, sale, []string{user}); err != nil {
		return 0, err
	}
	pattern := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(sale) + "/%"
	var rows []struct {
		UserID string
		Qty    int64
	}
	if err := tx.WithContext(ctx).Raw(p.sql.saleLineUnits, []string{user}, pattern, OrderRefunded, "sale").Scan(&rows).Error; err != nil {
		return 0, fmt.Errorf("order: live units of the sale's variants: %w", err)
	}
	var n int64
	for _, r := range rows {
		n += r.Qty
	}
	return n, nil
}

// lockBuyers serialises, on PostgreSQL, the transactions that check the
// caps of the same buyers of activity: one advisory transaction lock per
// buyer, pg_advisory_xact_lock(space, key), taken in key order and held
// until the transaction ends. space is derived from the order table's name
// (two configurations do not wait for each other), key from (activity,
// user); two buyers whose keys collide merely wait for each other.
// Elsewhere it does nothing (see liveUnits).
func (p *Processor) lockBuyers(ctx context.Context, tx *gorm.DB, activity string, users []string) error {
	if p.sql.dialect != "postgres" || len(users) == 0 {
		return nil
	}
	keys := make([]int32, len(users))
	for i, u := range users {
		keys[i] = buyerKey(activity, u)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(k), 10))
	}
	b.WriteByte('}')
	if err := tx.WithContext(ctx).Exec("SELECT pg_advisory_xact_lock(?, k) FROM unnest(CAST(? AS int4[])) AS u(k)",
		p.sql.lockSpace, b.String()).Error; err != nil {
		return fmt.Errorf("order: lock buyers: %w", err)
	}
	return nil
}

// buyerKey is the advisory lock key of (activity, user): 32 bits of
// FNV-1a over both, separated by a NUL (no ID contains one).
func buyerKey(activity, user string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(activity))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(user))
	return int32(h.Sum32())
}

// checkCaps enforces caps above 1 in the database for a batch (a cap of 1
// is the live_slot unique key). A buyer over the cap sends the batch to the
// one-by-one path, where [Processor.Handle] refuses that message alone.
// The batch holds at most one message per (user, activity).
func (p *Processor) checkCaps(ctx context.Context, tx *gorm.DB, msgs []Message, uniq []int, outs []Outcome, acts map[string]activityInfo) error {
	users := map[string][]string{}
	for _, i := range uniq {
		m := msgs[i]
		if outs[i].Duplicate || acts[m.ActivityID].UserLimit <= 1 {
			continue
		}
		users[m.ActivityID] = append(users[m.ActivityID], m.UserID)
	}
	if len(users) == 0 {
		return nil
	}
	actIDs := make([]string, 0, len(users))
	for act := range users {
		actIDs = append(actIDs, act)
	}
	slices.Sort(actIDs) // one lock order for every consumer
	for _, act := range actIDs {
		us := users[act]
		held, err := p.liveUnits(ctx, tx, act, us)
		if err != nil {
			return err
		}
		for _, i := range uniq {
			m := msgs[i]
			if m.ActivityID == act && !outs[i].Duplicate && held[m.UserID]+m.Qty > acts[act].UserLimit {
				return errConflict
			}
		}
	}
	return nil
}

// insertRows writes rows of table t inside tx. args holds columns(t)
// parameters per row. A chunk uses its prepared statement when the gorm
// transaction runs on a plain *sql.Tx of the cached *sql.DB and the
// statement is prepared, and a text INSERT otherwise (a gorm PrepareStmt
// session, a resolver plugin, a failed prepare).
func (p *Processor) insertRows(ctx context.Context, tx *gorm.DB, t table, args []any) error {
	cols := columns(t)
	rows := len(args) / cols
	stx, isTx := tx.Statement.ConnPool.(*sql.Tx)
	lo := 0
	for _, n := range chunks(rows, chunkSize(tx)) {
		part := args[lo*cols : (lo+n)*cols]
		lo += n
		if s := p.stmts.get(stmtKey{t, n}); isTx && s != nil {
			_, err := stx.StmtContext(ctx, s).ExecContext(ctx, part...)
			if err == nil {
				p.stmts.used.Add(1)
				continue
			}
			if !strings.Contains(err.Error(), "statement from different database") {
				return err
			}
			// The transaction is not on the DB the statements were
			// prepared on: text from now on.
			p.stmts.off.Store(true)
		}
		if err := rawExec(ctx, tx, p.sql.insertSQL(t, n), part); err != nil {
			return err
		}
	}
	return nil
}
