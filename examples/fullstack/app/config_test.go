package app_test

import (
	"strings"
	"testing"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// A process of one role shares Redis, the database and the broker with the
// others, so embedded ones (per process) are refused with a clear error;
// the DB pool cannot be larger than the sale.
func TestConfigValidateRolesAndFallback(t *testing.T) {
	t.Parallel()
	shared := func(c *app.Config) {
		c.RedisAddr, c.MySQLDSN, c.KafkaBrokers = "127.0.0.1:6379", "root@tcp(127.0.0.1:3306)/", []string{"127.0.0.1:9092"}
	}
	for _, tc := range []struct {
		name string
		edit func(c *app.Config)
		want string // "" = valid
	}{
		{"default is all", func(c *app.Config) {}, ""},
		{"api on shared servers", func(c *app.Config) { shared(c); c.Role = app.RoleAPI }, ""},
		{"worker on shared servers", func(c *app.Config) { shared(c); c.Role = app.RoleWorker }, ""},
		{"api on embedded servers", func(c *app.Config) { c.Role = app.RoleAPI }, "shares Redis"},
		{"worker without a broker", func(c *app.Config) { shared(c); c.KafkaBrokers = nil; c.Role = app.RoleWorker }, "-kafka"},
		{"unknown role", func(c *app.Config) { c.Role = "both" }, "role must be"},
		{"pool larger than the sale", func(c *app.Config) { c.DBFallbackQuota = c.Stock + 1 }, "db-fallback-quota"},
		{"negative pool", func(c *app.Config) { c.DBFallbackQuota = -1 }, "db-fallback-quota"},
	} {
		c := app.DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
