package order

import (
	"testing"
	"time"
)

func TestDbgCommit(t *testing.T) {
	db := newDB(t)
	addActivity(t, db, 1, 100000, 1)
	st := time.Now()
	for i := 0; i < 50; i++ {
		db.Exec(updateStockSQL, 1, 1, 1)
	}
	t.Logf("50 autocommit updates: %v", time.Since(st))
}
