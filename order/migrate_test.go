package order

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// Processes that start together migrate together (an api and a worker of
// the reference deployment): every concurrent AutoMigrate on a fresh
// database succeeds, and the tables come out whole. Before the migration
// lock, one of them failed with "Can't DROP INDEX uk_reservation" on
// MariaDB.
func TestConcurrentAutoMigrate(t *testing.T) {
	t.Parallel()
	for kind, db := range testenv.AllDB(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			const n = 6
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { errs[i] = AutoMigrate(context.Background(), db) })
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "migration %d", i)
			}
			addActivity(t, db, "1", 10, 1)
			p := newProc(t, db)
			o, err := p.Handle(context.Background(), msg(1, "1", "7"))
			require.NoError(t, err)
			require.Equal(t, StatusSuccess, o.Status)
		})
	}
}
