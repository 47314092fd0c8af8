package dbfallback

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

var (
	schemaTableRe = regexp.MustCompile(`(?s)CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\) ENGINE`)
	schemaKeyRe   = regexp.MustCompile(`(?m)^\s*KEY (\w+) \(([^)]*)\)`)
	schemaColRe   = regexp.MustCompile(`(?m)^\s*([a-z_]+)\s+[A-Z]`)
	schemaCheckRe = regexp.MustCompile(`(?m)^\s*CONSTRAINT (\w+) CHECK`)
)

type schemaTable struct{ cols, keys, checks []string }

// parseSchema reads schema.sql into table -> sorted columns, keys, checks.
func parseSchema(t *testing.T) map[string]schemaTable {
	t.Helper()
	out := map[string]schemaTable{}
	for _, m := range schemaTableRe.FindAllStringSubmatch(SchemaMySQL, -1) {
		var st schemaTable
		for _, c := range schemaColRe.FindAllStringSubmatch(m[2], -1) {
			if c[1] != "" {
				st.cols = append(st.cols, c[1])
			}
		}
		for _, k := range schemaKeyRe.FindAllStringSubmatch(m[2], -1) {
			st.keys = append(st.keys, k[1]+" "+strings.ReplaceAll(k[2], " ", ""))
		}
		for _, c := range schemaCheckRe.FindAllStringSubmatch(m[2], -1) {
			st.checks = append(st.checks, c[1])
		}
		sort.Strings(st.cols)
		sort.Strings(st.keys)
		sort.Strings(st.checks)
		out[m[1]] = st
	}
	require.Len(t, out, 2, "schema.sql: two tables")
	return out
}

// dbTable reads what the database has for table.
func dbTable(t *testing.T, db *gorm.DB, table string, checks []string) schemaTable {
	t.Helper()
	var st schemaTable
	cols, err := db.Migrator().ColumnTypes(table)
	require.NoError(t, err)
	for _, c := range cols {
		st.cols = append(st.cols, c.Name())
	}
	idx, err := db.Migrator().GetIndexes(table)
	require.NoError(t, err)
	for _, x := range idx {
		if pk, _ := x.PrimaryKey(); pk || x.Name() == "PRIMARY" || strings.HasPrefix(x.Name(), "sqlite_autoindex") {
			continue
		}
		st.keys = append(st.keys, fmt.Sprintf("%s %s", x.Name(), strings.Join(x.Columns(), ",")))
	}
	for _, c := range checks {
		if db.Migrator().HasConstraint(table, c) {
			st.checks = append(st.checks, c)
		}
	}
	sort.Strings(st.cols)
	sort.Strings(st.keys)
	sort.Strings(st.checks)
	return st
}

// schema.sql and AutoMigrate build the same columns, indexes and checks; on
// MySQL/MariaDB the DDL itself runs, the Store works on it, and AutoMigrate
// over it changes nothing.
func TestSchemaSQLMatchesAutoMigrate(t *testing.T) {
	t.Parallel()
	want := parseSchema(t)
	e := newEnv(t)
	for _, table := range []string{e.s.pool, e.s.resv} {
		require.Contains(t, want, table)
		assert.Equal(t, want[table], dbTable(t, e.db, table, want[table].checks), "%s: schema.sql vs AutoMigrate", table)
	}
	if testenv.DBKindInUse() != testenv.KindMySQL {
		return
	}
	byDDL := testenv.MySQL(t)
	for _, stmt := range strings.Split(stripComments(SchemaMySQL), ";") {
		if strings.TrimSpace(stmt) != "" {
			require.NoError(t, byDDL.Exec(stmt).Error)
		}
	}
	s, err := New(byDDL, WithClock(e.clock))
	require.NoError(t, err)
	for _, table := range []string{s.pool, s.resv} {
		assert.Equal(t, want[table], dbTable(t, byDDL, table, want[table].checks), "%s: DDL", table)
	}
	require.NoError(t, s.AutoMigrate(bg))
	for _, table := range []string{s.pool, s.resv} {
		assert.Equal(t, want[table], dbTable(t, byDDL, table, want[table].checks), "%s: AutoMigrate over the DDL", table)
	}
	require.NoError(t, s.Open(bg, activity("1", 4, 1), 2))
	r, err := s.Reserve(bg, req("1", "1", 1, "ddl"))
	require.NoError(t, err)
	assert.True(t, (r.Status == stock.Reserved))
}

func stripComments(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "--"); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}
