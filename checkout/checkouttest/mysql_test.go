package checkouttest

import (
	"testing"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
)

// TestKitOnMySQL runs every scenario against the embedded composition over
// the MySQL/MariaDB server named by SECKILL_MYSQL_DSN (skipped without
// it): the orders, their lines, the caps, the fence and the outbox on the
// database CI runs, counted from it.
func TestKitOnMySQL(t *testing.T) {
	if testenv.DBKindInUse() != testenv.KindMySQL {
		t.Skipf("%s not set: no MySQL/MariaDB", testenv.EnvMySQLDSN)
	}
	Run(t, func(t testing.TB, c Config) *Sale {
		return embeddedOn(t, c, func(t testing.TB) *gorm.DB { return testenv.MySQL(t) })
	})
}
