package order

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order/internal/dbx"
)

// wantIndexes is the index set of every table of t, as indexesOf reports
// it: table → sorted "name unique cols".
func wantIndexes(t Tables) map[string][]string {
	out := map[string][]string{}
	for _, sp := range t.specs() {
		keys := []string{}
		for _, ix := range sp.indexes {
			unique := 0
			if ix.unique {
				unique = 1
			}
			keys = append(keys, fmt.Sprintf("%s %d %s", ix.name(sp.name, sp.def), unique, strings.Join(ix.columns, ",")))
		}
		sort.Strings(keys)
		out[sp.name] = keys
	}
	return out
}

var pgIndexDefRe = regexp.MustCompile(`^CREATE (UNIQUE )?INDEX \S+ ON \S+ USING btree \((.*)\)$`)

// indexesOf lists the secondary indexes the DB has for table.
func indexesOf(t *testing.T, db *gorm.DB, table string, model any) []string {
	t.Helper()
	out := []string{}
	if db.Dialector.Name() == "postgres" {
		// gorm's postgres migrator lists an index's columns in table
		// order; pg_indexes has them in index order.
		var rows []struct{ Indexname, Indexdef string }
		require.NoError(t, db.Raw("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ?", table).
			Scan(&rows).Error)
		for _, r := range rows {
			if strings.HasSuffix(r.Indexname, "_pkey") {
				continue
			}
			m := pgIndexDefRe.FindStringSubmatch(r.Indexdef)
			require.NotNil(t, m, r.Indexdef)
			unique := 0
			if m[1] != "" {
				unique = 1
			}
			out = append(out, fmt.Sprintf("%s %d %s", r.Indexname, unique, strings.NewReplacer(" ", "", `"`, "").Replace(m[2])))
		}
		sort.Strings(out)
		return out
	}
	idx, err := db.Table(table).Migrator().GetIndexes(model)
	require.NoError(t, err)
	for _, x := range idx {
		if pk, _ := x.PrimaryKey(); pk || x.Name() == "PRIMARY" || strings.HasPrefix(x.Name(), "sqlite_autoindex") ||
			strings.HasSuffix(x.Name(), "_pkey") {
			continue
		}
		unique := 0
		if u, _ := x.Unique(); u {
			unique = 1
		}
		out = append(out, fmt.Sprintf("%s %d %s", x.Name(), unique, strings.Join(x.Columns(), ",")))
	}
	sort.Strings(out)
	return out
}

// columnsOf lists table's columns as "name type null".
func columnsOf(t *testing.T, db *gorm.DB, table string, model any) []string {
	t.Helper()
	cols, err := db.Table(table).Migrator().ColumnTypes(model)
	require.NoError(t, err)
	var out []string
	for _, c := range cols {
		null, _ := c.Nullable()
		out = append(out, fmt.Sprintf("%s %s %v", c.Name(), strings.ToLower(c.DatabaseTypeName()), null))
	}
	sort.Strings(out)
	return out
}

var (
	ddlIndexRe = regexp.MustCompile("(?m)(UNIQUE )?(?:KEY|INDEX(?: IF NOT EXISTS)?) [`\"](\\w+)[`\"](?: ON [`\"](\\w+)[`\"])? \\(([^)]*)\\)")
	ddlTableRe = regexp.MustCompile("CREATE TABLE IF NOT EXISTS [`\"](\\w+)[`\"]")
)

// ddlIndexes parses a DDL text into table → sorted "name unique cols".
func ddlIndexes(t *testing.T, ddl string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	table := ""
	for _, stmt := range strings.Split(stripSQLComments(ddl), ";") {
		if m := ddlTableRe.FindStringSubmatch(stmt); m != nil {
			table = m[1]
			if out[table] == nil {
				out[table] = []string{}
			}
		}
		for _, k := range ddlIndexRe.FindAllStringSubmatch(stmt, -1) {
			unique := 0
			if k[1] != "" {
				unique = 1
			}
			on := table
			if k[3] != "" {
				on = k[3]
			}
			cols := strings.NewReplacer(" ", "", "`", "", `"`, "").Replace(k[4])
			out[on] = append(out[on], fmt.Sprintf("%s %d %s", k[2], unique, cols))
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

var otherTables = Tables{Activity: "shop_activity", Order: "order", Dedup: "shop_dedup", Adjust: "shop_adjust", Payment: "shop_payment", Line: "shop_line"}

// The DDL files are the templates of Schema: the default names give them
// back unchanged, other names replace every table, index and constraint
// name; both files declare the indexes AutoMigrate creates.
func TestSchemaText(t *testing.T) {
	t.Parallel()
	for dialect, file := range map[string]string{"mysql": schemaMySQL, "postgres": schemaPostgres} {
		ddl, err := Schema(dialect)
		require.NoError(t, err)
		assert.Equal(t, file, ddl, dialect)
		assert.Equal(t, wantIndexes(defaultTables()), ddlIndexes(t, ddl), dialect)
		assert.Contains(t, ddl, "chk_stock_nonneg")

		other, err := Schema(dialect, WithTables(otherTables))
		require.NoError(t, err)
		assert.Equal(t, wantIndexes(otherTables), ddlIndexes(t, other), dialect)
		assert.NotRegexp(t, `\b(seckill_activity|seckill_order|message_dedup|uk_order_no|uk_reservation|uk_user_activity_live|idx_status_expire|uk_dedup_reservation|idx_dedup_user|chk_stock_nonneg|seckill_activity_adjust|idx_adjust_activity)\b`,
			stripSQLComments(other), dialect)
		assert.Contains(t, other, "chk_shop_activity_stock_nonneg")
	}
	_, err := Schema("sqlite")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	for _, bad := range []Tables{{Order: "Order"}, {Order: "1x"}, {Dedup: "a-b"}, {Order: strings.Repeat("x", maxTableLen+1)},
		{Order: "message_dedup"}, {Activity: "same", Order: "same"}, {Adjust: "seckill_order"}, {Dedup: "x", Adjust: "x"},
		{Payment: "seckill_order"}, {Payment: "Pay"}} {
		_, err := Schema("mysql", WithTables(bad))
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", bad)
		assert.ErrorIs(t, AutoMigrate(context.Background(), testenv.SQLite(t), WithTables(bad)), ErrInvalidConfig, "%+v", bad)
		_, err = NewProcessor(testenv.SQLite(t), newGen(t, 1), WithTables(bad))
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", bad)
	}
	longest := Tables{Activity: strings.Repeat("a", maxTableLen), Order: strings.Repeat("o", maxTableLen), Dedup: strings.Repeat("d", maxTableLen),
		Adjust: strings.Repeat("j", maxTableLen), Payment: strings.Repeat("p", maxTableLen), Line: strings.Repeat("l", maxTableLen)}
	_, err = Schema("postgres", WithTables(longest))
	require.NoError(t, err)
	for _, sp := range longest.specs() {
		for _, ix := range append(append([]index(nil), sp.indexes...), sp.checks...) {
			assert.LessOrEqual(t, len(ix.name(sp.name, sp.def)), 63, "PostgreSQL's identifier limit")
		}
	}
}

// AutoMigrate builds the indexes of the spec under both configurations;
// on MySQL/MariaDB and PostgreSQL the DDL of Schema builds the same tables
// (columns, types, nullability, indexes), AutoMigrate over them adds
// nothing, and the CHECK constraint refuses a negative stock.
func TestSchemaMatchesAutoMigrate(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, byGorm *gorm.DB) {
		ctx := context.Background()
		dialect := byGorm.Dialector.Name()
		require.NoError(t, AutoMigrate(ctx, byGorm, WithTables(otherTables)))
		for _, tabs := range []Tables{defaultTables(), otherTables} {
			want := wantIndexes(tabs)
			for _, sp := range tabs.specs() {
				assert.Equal(t, want[sp.name], indexesOf(t, byGorm, sp.name, sp.model), "indexes of %s: AutoMigrate", sp.name)
			}
		}
		if dialect == "sqlite" {
			return
		}
		byDDL := openDB(t, testenv.DBKind(dialect))
		for _, tabs := range []Tables{defaultTables(), otherTables} {
			ddl, err := Schema(dialect, WithTables(tabs))
			require.NoError(t, err)
			for _, stmt := range strings.Split(stripSQLComments(ddl), ";") {
				if strings.TrimSpace(stmt) != "" {
					require.NoError(t, byDDL.Exec(stmt).Error, stmt)
				}
			}
		}
		for _, tabs := range []Tables{defaultTables(), otherTables} {
			for _, sp := range tabs.specs() {
				assert.Equal(t, indexesOf(t, byGorm, sp.name, sp.model), indexesOf(t, byDDL, sp.name, sp.model), "indexes of %s: DDL vs AutoMigrate", sp.name)
				assert.Equal(t, columnsOf(t, byGorm, sp.name, sp.model), columnsOf(t, byDDL, sp.name, sp.model), "columns of %s: DDL vs AutoMigrate", sp.name)
			}
			// AutoMigrate over the DDL-made tables adds nothing.
			require.NoError(t, AutoMigrate(ctx, byDDL, WithTables(tabs)))
			for _, sp := range tabs.specs() {
				assert.Equal(t, wantIndexes(tabs)[sp.name], indexesOf(t, byDDL, sp.name, sp.model), "indexes of %s after AutoMigrate on the DDL", sp.name)
			}
		}
		// The CHECK holds on both, under both names.
		for _, db := range []*gorm.DB{byGorm, byDDL} {
			for _, tabs := range []Tables{defaultTables(), otherTables} {
				addActivityIn(t, db, tabs, "1", 5, 1)
				err := db.Exec("UPDATE " + dbx.QuoteIdent(db, tabs.Activity) + " SET stock = stock - 6 WHERE id = '1'").Error
				require.Error(t, err, "CHECK (stock >= 0) on %s", tabs.Activity)
				var stock int64
				require.NoError(t, db.Raw("SELECT stock FROM "+dbx.QuoteIdent(db, tabs.Activity)+" WHERE id = '1'").Scan(&stock).Error)
				assert.EqualValues(t, 5, stock)
			}
		}
	})
}

func stripSQLComments(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "--"); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}

// ddlLog records the statements a gorm session runs.
type ddlLog struct {
	logger.Interface
	mu    sync.Mutex
	stmts []string
}

func (l *ddlLog) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	sql, _ := fc()
	l.mu.Lock()
	l.stmts = append(l.stmts, sql)
	l.mu.Unlock()
}

// TestAutoMigrateAgainChangesNothing: AutoMigrate over an up-to-date schema
// runs no DDL. gorm's own AutoMigrate dropped every single-column unique
// index the model's tags do not declare (message_dedup's
// uk_dedup_reservation — the fence —, the orders' uk_reservation and
// uk_order_no, the lines' uk_line_reservation) and AutoMigrate made them
// again: every process start left the fence without its unique key for a
// moment while other processes wrote, and for good when the process or the
// database died in between (the soak found message_dedup with two rows
// for one reservation). It also rebuilt columns (MODIFY COLUMN price) on
// every start, a table lock in the middle of a sale.
func TestAutoMigrateAgainChangesNothing(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		for _, tabs := range []Tables{defaultTables(), otherTables} {
			require.NoError(t, AutoMigrate(ctx, db, WithTables(tabs)))
			log := &ddlLog{Interface: logger.Discard}
			require.NoError(t, AutoMigrate(ctx, db.Session(&gorm.Session{Logger: log}), WithTables(tabs)))
			ddl := regexp.MustCompile(`(?i)^\s*(DROP|ALTER|CREATE)\b`)
			for _, s := range log.stmts {
				assert.False(t, ddl.MatchString(s), "AutoMigrate over an up-to-date schema ran %q", s)
			}
			for _, sp := range tabs.specs() {
				assert.Equal(t, wantIndexes(tabs)[sp.name], indexesOf(t, db, sp.name, sp.model), "indexes of %s after AutoMigrate again", sp.name)
			}
		}
	})
}
