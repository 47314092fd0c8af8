package order

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// Tables of the previous release (BIGINT user and activity IDs, the
// activity's id auto-incremented; testdata/*_numeric_ids.sql) are
// upgraded by AutoMigrate in place: the IDs become their decimal strings,
// the indexes stay, and old rows are found under the string IDs.
func TestAutoMigrateUpgradesNumericIDs(t *testing.T) {
	t.Parallel()
	for kind, file := range map[testenv.DBKind]string{testenv.KindMySQL: "testdata/schema_v2_numeric_ids.sql",
		testenv.KindPostgres: "testdata/schema_postgres_v2_numeric_ids.sql"} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			db := openDB(t, kind)
			ctx := context.Background()
			ddl, err := os.ReadFile(file)
			require.NoError(t, err)
			for _, stmt := range strings.Split(stripSQLComments(string(ddl)), ";") {
				if strings.TrimSpace(stmt) != "" {
					require.NoError(t, db.Exec(stmt).Error, stmt)
				}
			}
			now := testenv.EpochDay(0)
			require.NoError(t, db.Exec("INSERT INTO seckill_activity (name, total_stock, stock, user_limit, start_time, end_time) VALUES (?, 10, 9, 1, ?, ?)",
				"old", now, now.Add(24*time.Hour)).Error)
			require.NoError(t, db.Exec("INSERT INTO seckill_order (id, order_no, reservation_id, user_id, activity_id, live_slot, qty, status, expire_time) "+
				"VALUES (1, '1', 'r-old', 7, 1, 1, 1, 'CREATED', ?)", now).Error)
			require.NoError(t, db.Exec("INSERT INTO message_dedup (msg_id, reservation_id, activity_id, user_id, outcome, order_no, created_at) "+
				"VALUES ('m-old', 'r-old', 1, 7, 'SUCCESS', '1', ?)", now).Error)

			require.NoError(t, AutoMigrate(ctx, db))
			require.NoError(t, AutoMigrate(ctx, db), "again: nothing left to change")

			var live []Order
			require.NoError(t, db.Where("activity_id = ? AND status IN ?", "1", []string{OrderCreated, OrderPaid}).Find(&live).Error)
			require.Len(t, live, 1)
			assert.Equal(t, [3]any{"r-old", "7", int64(1)}, [3]any{live[0].ReservationID, live[0].UserID, live[0].Qty})
			assert.EqualValues(t, 1, rowCount(t, db, defaultDedupTable, "user_id = ? AND activity_id = ?", "7", "1"))
			// the same buyer again: the unique key still holds (cap 1)
			p := newProc(t, db)
			out, err := p.Handle(ctx, msg(2, "1", "7"))
			require.NoError(t, err)
			assert.Equal(t, StatusFailed, out.Status)
			assert.Equal(t, ReasonDuplicate, out.Reason)
			// a new activity under a string ID, a UUID buyer
			addActivity(t, db, "sale-2", 5, 1)
			out, err = p.Handle(ctx, msg(3, "sale-2", uuidUser(3)))
			require.NoError(t, err)
			assert.Equal(t, StatusSuccess, out.Status, out.Reason)
			checkConservation(t, db, "1", 10)
			checkConservation(t, db, "sale-2", 5)
			for _, sp := range defaultTables().specs() {
				assert.Equal(t, wantIndexes(defaultTables())[sp.name], indexesOf(t, db, sp.name, sp.model), sp.name)
				for _, c := range columnsOf(t, db, sp.name, sp.model) {
					for _, col := range sp.idColumns {
						if strings.HasPrefix(c, col+" ") {
							assert.True(t, strings.HasPrefix(c, col+" varchar "), c)
						}
					}
				}
			}
		})
	}
}
