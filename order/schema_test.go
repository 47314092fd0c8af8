package order

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
)

var (
	schemaTableRe = regexp.MustCompile(`(?s)CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\) ENGINE`)
	schemaKeyRe   = regexp.MustCompile(`(?m)^\s*(UNIQUE )?KEY (\w+) \(([^)]*)\)`)
)

// schemaKeys parses schema.sql into table → sorted "name unique cols" rows.
func schemaKeys(t *testing.T) (string, map[string][]string) {
	t.Helper()
	b, err := os.ReadFile("schema.sql")
	require.NoError(t, err)
	out := map[string][]string{}
	for _, m := range schemaTableRe.FindAllStringSubmatch(string(b), -1) {
		var keys []string
		for _, k := range schemaKeyRe.FindAllStringSubmatch(m[2], -1) {
			unique := 0
			if k[1] != "" {
				unique = 1
			}
			cols := strings.ReplaceAll(strings.ReplaceAll(k[3], " ", ""), "`", "")
			keys = append(keys, fmt.Sprintf("%s %d %s", k[2], unique, cols))
		}
		sort.Strings(keys)
		out[m[1]] = keys
	}
	require.Len(t, out, 3, "schema.sql: three tables")
	return string(b), out
}

// indexesOf lists the secondary indexes the DB has for model's table.
func indexesOf(t *testing.T, db *gorm.DB, model any) []string {
	t.Helper()
	idx, err := db.Migrator().GetIndexes(model)
	require.NoError(t, err)
	var out []string
	for _, x := range idx {
		if pk, _ := x.PrimaryKey(); pk || x.Name() == "PRIMARY" || strings.HasPrefix(x.Name(), "sqlite_autoindex") {
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

// schema.sql and AutoMigrate must build the same indexes; on MySQL/MariaDB
// the DDL itself is run and compared with AutoMigrate's tables.
func TestSchemaSQLMatchesAutoMigrate(t *testing.T) {
	t.Parallel()
	ddl, keys := schemaKeys(t)
	byGorm := newDB(t)
	for _, m := range []schemaTabler{&Activity{}, &Order{}, &Dedup{}} {
		assert.Equal(t, keys[m.TableName()], indexesOf(t, byGorm, m), "indexes of %s: schema.sql vs AutoMigrate", m.TableName())
	}
	if testenv.DBKindInUse() != testenv.KindMySQL {
		return
	}
	byDDL := testenv.MySQL(t)
	for _, stmt := range strings.Split(stripSQLComments(ddl), ";") {
		if strings.TrimSpace(stmt) != "" {
			require.NoError(t, byDDL.Exec(stmt).Error)
		}
	}
	for _, m := range []schemaTabler{&Activity{}, &Order{}, &Dedup{}} {
		assert.Equal(t, indexesOf(t, byGorm, m), indexesOf(t, byDDL, m), "indexes of %s: DDL vs AutoMigrate", m.TableName())
	}
	// AutoMigrate over the DDL-made tables adds nothing.
	require.NoError(t, AutoMigrate(context.Background(), byDDL))
	for _, m := range []schemaTabler{&Activity{}, &Order{}, &Dedup{}} {
		assert.Equal(t, keys[m.TableName()], indexesOf(t, byDDL, m), "indexes of %s after AutoMigrate on the DDL", m.TableName())
	}
}

type schemaTabler interface{ TableName() string }

func stripSQLComments(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "--"); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}
