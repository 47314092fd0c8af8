package checkouttest

import (
	"testing"

	"github.com/redis/go-redis/v9"
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
		return embeddedOn(t, c, func(t testing.TB) *gorm.DB { return testenv.MySQL(t) }, nil)
	})
}

// TestKitOnRealRedis runs every scenario against the embedded composition
// over the real Redis server (SECKILL_REDIS_ADDR) and the real Cluster
// (SECKILL_REDIS_CLUSTER_ADDRS), each skipped without its variable, with
// the database of testenv.DB (MySQL/MariaDB when SECKILL_MYSQL_DSN is
// set, else SQLite).
func TestKitOnRealRedis(t *testing.T) {
	for _, kind := range []testenv.RedisKind{testenv.KindStandalone, testenv.KindCluster} {
		t.Run(string(kind), func(t *testing.T) {
			var rdb redis.UniversalClient
			if kind == testenv.KindCluster {
				rdb = testenv.RealCluster(t)
			} else {
				rdb = testenv.RealRedis(t)
			}
			Run(t, func(t testing.TB, c Config) *Sale { return embeddedOn(t, c, testenv.DB, rdb) })
		})
	}
}
