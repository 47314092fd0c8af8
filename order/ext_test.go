package order

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/seckillkit/seckill/order/internal/dbx"
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
	assert.Equal(t, "1", m.ActivityID)
	assert.Equal(t, "77", m.UserID)

	// Encode writes the current version, with or without Ext.
	plain := msg(1, "1", "7")
	plain.Version = 0
	b, err := plain.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"v":3,`)
	assert.NotContains(t, string(b), `"ext"`)
	withExt := plain
	withExt.Ext = json.RawMessage(`{"coupon": "X1", "n": [1, 2]}`)
	b, err = withExt.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"v":3,`)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.JSONEq(t, `{"coupon":"X1","n":[1,2]}`, string(got.Ext))
	assert.Equal(t, 3, got.Version, "a message without lines is written as version 3")

	for name, tc := range map[string]struct {
		v   int
		ext string
	}{
		"too large":      {3, `"` + strings.Repeat("x", maxExtSize-1) + `"`},
		"not json":       {3, `{coupon}`},
		"not utf-8":      {3, "\"\xff\xfe\""},
		"too large v2":   {2, `"` + strings.Repeat("x", maxExtSize-1) + `"`},
		"version 1":      {1, `{"a":1}`},
		"future version": {MessageVersion + 1, `{"a":1}`},
	} {
		m := msg(1, "1", "7")
		m.Version, m.Ext = tc.v, json.RawMessage(tc.ext)
		require.Error(t, m.Validate(), name)
		if tc.v != 1 { // Encode writes a version 1 message as version 3, which carries Ext
			_, err := m.Encode()
			require.Error(t, err, name)
		}
		ids := `"activity_id":"1","user_id":"7"`
		if tc.v < 3 {
			ids = `"activity_id":1,"user_id":7` // the shape of versions 1 and 2
		}
		raw := fmt.Sprintf(`{"v":%d,"msg_id":"m-1","reservation_id":"r-1",%s,"qty":1,"created_at":"2026-11-29T08:00:00Z","ext":%s}`,
			tc.v, ids, tc.ext)
		_, err := Decode([]byte(raw))
		require.Error(t, err, name)
		assert.True(t, isPermanent(err), name)
	}
	// the largest payload passes; JSON null is no payload
	m = msg(1, "1", "7")
	m.Ext = json.RawMessage(`"` + strings.Repeat("x", maxExtSize-2) + `"`)
	require.NoError(t, m.Validate())
	m.Version = 2
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
	require.NoError(t, db.Raw("SELECT product_id, product_name, price, ext FROM "+dbx.QuoteIdent(db, tabs.Order)+
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
		tabs := defaultTables()
		addActivity(t, db, "1", 100, 1)
		p := newProc(t, db)

		old, err := Decode([]byte(oldMessage))
		require.NoError(t, err)
		var batch []Message
		for i := 0; i < 4; i++ {
			m := msg(i, "1", num(100+i))
			if i%2 == 1 {
				m.Ext = json.RawMessage(`{"coupon":"C` + string(rune('0'+i)) + `","note":"ünïcode"}`)
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
		require.NoError(t, db.Exec("UPDATE seckill_activity SET product_name = ?, product_id = ?, activity_price = ? WHERE id = ?",
			"renamed", 4242, "5.55", "1").Error)
		single := msg(10, "1", "110")
		single.Ext = json.RawMessage(`[1,{"a":null}]`)
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
		var ids []struct{ UserID, ActivityID string }
		require.NoError(t, db.Raw("SELECT user_id, activity_id FROM seckill_order WHERE reservation_id = ?", old.ReservationID).Scan(&ids).Error)
		assert.Equal(t, []struct{ UserID, ActivityID string }{{"77", "1"}}, ids, "the old message's numeric IDs, as decimal strings")
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
		byGorm := Order{ID: 1, OrderNo: "g-1", ReservationID: "g-1", UserID: "1", ActivityID: "2", Qty: 1, Status: OrderCreated,
			ExpireTime: p.o.clock.Now(), Ext: RawJSON(`{"by":"gorm"}`)}
		require.NoError(t, db.Create(&byGorm).Error)
		byGorm = Order{ID: 2, OrderNo: "g-2", ReservationID: "g-2", UserID: "2", ActivityID: "2", Qty: 1, Status: OrderCreated,
			ExpireTime: p.o.clock.Now()}
		require.NoError(t, db.Create(&byGorm).Error)
		r = orderRowOf(t, db, tabs, "g-1")
		require.NotNil(t, r.Ext)
		assert.JSONEq(t, `{"by":"gorm"}`, *r.Ext)
		assert.Nil(t, orderRowOf(t, db, tabs, "g-2").Ext)
		checkConservation(t, db, "1", 100)
	})
}
