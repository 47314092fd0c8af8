package stock

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}

// TestPreloaderLogSaysLoadedOnAFirstStart: a sale's first load is logged as
// a load, at Info, not as a rebuild "from recovery" (which an operator
// reads as a crash recovery); Redis losing a running sale (absent with live
// reservations) and a frozen activity are logged as recoveries, at Warn.
func TestPreloaderLogSaysLoadedOnAFirstStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	d := newTestDeductor(t, rdb, prefix)
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	a := Activity{ID: "1", Stock: 5, PerUserLimit: 1}

	var live []Reservation
	p, err := NewPreloader(d, (&table{acts: []Activity{a}}).Upcoming, WithLogger(logger),
		WithRecovery(func(context.Context, Activity) ([]Reservation, bool, error) {
			return live, true, nil
		}))
	require.NoError(t, err)

	n, err := p.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	out := buf.take()
	assert.Contains(t, out, `level=INFO msg="stock: activity loaded into redis"`)
	assert.NotContains(t, out, "recovery")

	// Redis loses the sale while one reservation is live in the database.
	res, err := d.Reserve(ctx, Request{Activity: "1", User: "u1", ReservationID: "r1", Qty: 1})
	require.NoError(t, err)
	require.Equal(t, Reserved, res.Status)
	live = []Reservation{{ID: "r1", User: "u1", Qty: 1, State: Held, ReservedAt: testenv.Epoch()}}
	require.NoError(t, rdb.Del(ctx, activityKeys(prefix, "1").list()...).Err())
	_, err = p.Tick(ctx)
	require.NoError(t, err)
	out = buf.take()
	assert.Contains(t, out, `level=WARN msg="stock: activity missing from redis with live reservations; rebuilt from recovery"`)

	// A frozen activity.
	require.NoError(t, d.Freeze(ctx, "1"))
	_, err = p.Tick(ctx)
	require.NoError(t, err)
	assert.Contains(t, buf.take(), `level=WARN msg="stock: frozen activity rebuilt from recovery"`)
}
