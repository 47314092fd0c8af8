package order

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// oldMessage is a message as version 1 producers wrote it, before Ext.
const oldMessage = `{"v":1,"msg_id":"old-1","reservation_id":"r-old-1","activity_id":1,"user_id":77,"qty":1,"price":1234,"created_at":"2026-11-29T08:00:00Z"}`

func TestMessageExtValidation(t *testing.T) {
	t.Parallel()
	m, err := Decode([]byte(oldMessage))
	require.NoError(t, err, "a version 1 message still decodes")
	assert.Equal(t, 1, m.Version)
	assert.Nil(t, m.Ext)
	assert.EqualValues(t, 1234, m.Price)

	// Encode picks the lowest version that carries the message.
	plain := msg(1, 1, 7)
	plain.Version = 0
	b, err := plain.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"v":1,`)
	assert.NotContains(t, string(b), `"ext"`)
	withExt := plain
	withExt.Ext = json.RawMessage(`{"coupon": "X1", "n": [1, 2]}`)
	b, err = withExt.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"v":2,`)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.JSONEq(t, `{"coupon":"X1","n":[1,2]}`, string(got.Ext))
	assert.Equal(t, 2, got.Version)

	for name, tc := range map[string]struct {
		v   int
		ext string
	}{
		"too large":      {2, `"` + strings.Repeat("x", MaxExtSize-1) + `"`},
		"not json":       {2, `{coupon}`},
		"not utf-8":      {2, "\"\xff\xfe\""},
		"version 1":      {1, `{"a":1}`},
		"future version": {MessageVersion + 1, `{"a":1}`},
	} {
		m := msg(1, 1, 7)
		m.Version, m.Ext = tc.v, json.RawMessage(tc.ext)
		_, err := m.Encode()
		require.Error(t, err, name)
		b, _ := json.Marshal(struct {
			Message
			Ext json.RawMessage `json:"ext"`
		}{m, nil})
		raw := strings.TrimSuffix(string(b), `,"ext":null}`) + `,"ext":` + tc.ext + `}`
		_, err = Decode([]byte(raw))
		require.Error(t, err, name)
		assert.True(t, IsPermanent(err), name)
	}
	// the largest payload passes; JSON null is no payload
	m = msg(1, 1, 7)
	m.Version, m.Ext = 2, json.RawMessage(`"`+strings.Repeat("x", MaxExtSize-2)+`"`)
	require.NoError(t, m.Validate())
	m.Version, m.Ext = 1, json.RawMessage(`null`)
	require.NoError(t, m.Validate())
	b, err = m.Encode()
	require.NoError(t, err)
	got, err = Decode(b)
	require.NoError(t, err)
	assert.Nil(t, got.Ext)
	got, err = Decode([]byte(strings.TrimSuffix(oldMessage, "}") + `,"ext":null}`))
	require.NoError(t, err)
	assert.Nil(t, got.Ext)
}

// orderRow is an order as raw SQL reads it.
type orderRow struct {
	ProductID   int64
	ProductName string
	Price       Cents
	Ext         *string
}

func orderRowOf(t testing.TB, db *gorm.DB, tabs Tables, resv string) orderRow {
	t.Helper()
	var rows []orderRow
	require.NoError(t, db.Raw("SELECT product_id, product_name, price, ext FROM "+quoteIdent(db, tabs.Order)+
		" WHERE reservation_id = ?", resv).Scan(&rows).Error)
	require.Len(t, rows, 1, resv)
	return rows[0]
}

// The product snapshot and the extension payload reach the order row, on
// the batch path and one by one; an old (version 1) message still becomes
// an order, with a NULL ext; the snapshot does not follow later changes of
// the activity row.
func TestOrderSnapshotAndExt(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		tabs := DefaultTables()
		addActivity(t, db, 1, 100, 1)
		p := newProc(t, db)

		old, err := Decode([]byte(oldMessage))
		require.NoError(t, err)
		var batch []Message
		for i := 0; i < 4; i++ {
			m := msg(i, 1, int64(100+i))
			if i%2 == 1 {
				m.Version, m.Ext = 2, json.RawMessage(`{"coupon":"C`+string(rune('0'+i))+`","note":"ünïcode"}`)
			}
			batch = append(batch, m)
		}
		batch = append(batch, old)
		outs, err := p.Process(ctx, batch)
		require.NoError(t, err)
		for _, o := range outs {
			require.Equal(t, StatusSuccess, o.Status)
		}

		// one by one, after the product was renamed and repriced
		require.NoError(t, db.Exec("UPDATE seckill_activity SET product_name = ?, product_id = ?, activity_price = ? WHERE id = 1",
			"renamed", 4242, "5.55").Error)
		single := msg(10, 1, 110)
		single.Version, single.Ext = 2, json.RawMessage(`[1,{"a":null}]`)
		out, err := p.Handle(ctx, single)
		require.NoError(t, err)
		require.Equal(t, StatusSuccess, out.Status)

		for i, m := range batch[:4] {
			r := orderRowOf(t, db, tabs, m.ReservationID)
			assert.Equal(t, orderRow{ProductID: 9001, ProductName: "product 1", Price: 990, Ext: r.Ext}, r, i)
			if m.Ext == nil {
				assert.Nil(t, r.Ext, i)
			} else {
				require.NotNil(t, r.Ext, i)
				assert.JSONEq(t, string(m.Ext), *r.Ext, i)
			}
		}
		r := orderRowOf(t, db, tabs, old.ReservationID)
		assert.Equal(t, orderRow{ProductID: 9001, ProductName: "product 1", Price: 1234}, r, "the old message's price, no ext")
		r = orderRowOf(t, db, tabs, single.ReservationID)
		require.NotNil(t, r.Ext)
		assert.JSONEq(t, `[1,{"a":null}]`, *r.Ext)
		assert.Equal(t, orderRow{ProductID: 4242, ProductName: "renamed", Price: 555, Ext: r.Ext}, r)

		// gorm reads the columns into Order
		var o Order
		require.NoError(t, db.Where("reservation_id = ?", batch[1].ReservationID).First(&o).Error)
		assert.JSONEq(t, string(batch[1].Ext), string(o.Ext))
		assert.Equal(t, "product 1", o.ProductName)
		assert.EqualValues(t, 9001, o.ProductID)
		b, err := json.Marshal(o)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"Ext":{"coupon":"C1","note":"ünïcode"}`)

		// gorm writes it too: text, NULL when empty
		byGorm := Order{ID: 1, OrderNo: "g-1", ReservationID: "g-1", UserID: 1, ActivityID: 2, Qty: 1, Status: OrderCreated,
			ExpireTime: p.o.clock.Now(), Ext: RawJSON(`{"by":"gorm"}`)}
		require.NoError(t, db.Create(&byGorm).Error)
		byGorm = Order{ID: 2, OrderNo: "g-2", ReservationID: "g-2", UserID: 2, ActivityID: 2, Qty: 1, Status: OrderCreated,
			ExpireTime: p.o.clock.Now()}
		require.NoError(t, db.Create(&byGorm).Error)
		r = orderRowOf(t, db, tabs, "g-1")
		require.NotNil(t, r.Ext)
		assert.JSONEq(t, `{"by":"gorm"}`, *r.Ext)
		assert.Nil(t, orderRowOf(t, db, tabs, "g-2").Ext)
		checkConservation(t, db, 1, 100)
	})
}
