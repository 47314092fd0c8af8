package workspace

import (
	"reflect"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// TestOneActivityVocabulary: a sale's settings carry the same field names
// in stock.Activity and order.Activity (#23 item 2), with the same types,
// so a shop maps one onto the other field by field.
func TestOneActivityVocabulary(t *testing.T) {
	st, ot := reflect.TypeFor[stock.Activity](), reflect.TypeFor[order.Activity]()
	for _, name := range []string{"ID", "Stock", "PerUserLimit", "Start", "End"} {
		sf, ok := st.FieldByName(name)
		if !ok {
			t.Fatalf("stock.Activity has no field %s", name)
		}
		of, ok := ot.FieldByName(name)
		if !ok {
			t.Errorf("order.Activity has no field %s (stock.Activity's name)", name)
			continue
		}
		if sf.Type != of.Type {
			t.Errorf("%s: stock.Activity has %s, order.Activity %s", name, sf.Type, of.Type)
		}
	}
}
