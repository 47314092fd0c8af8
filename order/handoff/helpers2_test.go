package handoff

import (
	"context"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func newProc(t testing.TB, db *gorm.DB, opts ...order.ProcessorOption) *order.Processor {
	t.Helper()
	p, err := order.NewProcessor(db, newGen(t, 1), opts...)
	require.NoError(t, err)
	return p
}

func mustProcess(t testing.TB, p *order.Processor, msgs []order.Message) []order.Outcome {
	t.Helper()
	outs, err := p.Process(context.Background(), msgs)
	require.NoError(t, err)
	return outs
}

// defaultTables is the default table names.
func defaultTables() order.Tables {
	t, err := order.TablesOf()
	if err != nil {
		panic(err)
	}
	return t
}

// otherTables are table names other than the defaults.
var otherTables = order.Tables{Activity: "shop_activity", Order: "order", Dedup: "shop_dedup", Adjust: "shop_adjust", Payment: "shop_payment"}
