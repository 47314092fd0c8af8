package app_test

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		{"three per user", func(c *app.Config) { c.PerUserLimit = 3 }, ""},
		{"no unit per user", func(c *app.Config) { c.PerUserLimit = 0 }, "per-user-limit"},
		{"coalescing off", func(c *app.Config) { c.CoalesceWindow = 0 }, ""},
		{"negative coalescing window", func(c *app.Config) { c.CoalesceWindow = -1 }, "coalesce-window"},
		{"empty coalesced batch", func(c *app.Config) { c.CoalesceBatch = 0 }, "coalesce-batch"},
		{"batch beyond the library's", func(c *app.Config) { c.CoalesceBatch = 1025 }, "coalesce-batch"},
		{"64 shards", func(c *app.Config) { c.Shards = 64 }, ""},
		{"no shard", func(c *app.Config) { c.Shards = 0 }, "shards"},
		{"65 shards", func(c *app.Config) { c.Shards = 65 }, "shards"},
		{"network thresholds", func(c *app.Config) { c.BotDefence = []string{"risk"}; c.NetChallengeAt, c.NetBanAt = 5, 6 }, ""},
		{"network ban not above challenge", func(c *app.Config) { c.BotDefence = []string{"risk"}; c.NetBanAt = c.NetChallengeAt }, "net-ban-at"},
		{"no network challenge", func(c *app.Config) { c.BotDefence = []string{"risk"}; c.NetChallengeAt = 0 }, "net-challenge-at"},
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

// Coalesced reservations are on by default (500µs, 64 per call) and the
// sale is one key; -coalesce-window, -coalesce-batch and -shards and their
// variables set them, the flag over the variable; a window of 0 is off.
func TestConfigCoalescingAndShards(t *testing.T) {
	cleanEnv(t)
	parse := func(args ...string) app.Config {
		t.Helper()
		c := app.DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := parse(); c.CoalesceWindow != 500*time.Microsecond || c.CoalesceBatch != 64 || c.Shards != 1 {
		t.Errorf("defaults: window %v, batch %d, shards %d; want 500µs, 64, 1", c.CoalesceWindow, c.CoalesceBatch, c.Shards)
	}
	if c := parse("-coalesce-window", "0", "-coalesce-batch", "16", "-shards", "3"); c.CoalesceWindow != 0 || c.CoalesceBatch != 16 || c.Shards != 3 {
		t.Errorf("flags: window %v, batch %d, shards %d", c.CoalesceWindow, c.CoalesceBatch, c.Shards)
	}
	t.Setenv("SECKILL_COALESCE_WINDOW", "2ms")
	t.Setenv("SECKILL_COALESCE_BATCH", "128")
	t.Setenv("SECKILL_SHARDS", "6")
	if c := parse(); c.CoalesceWindow != 2*time.Millisecond || c.CoalesceBatch != 128 || c.Shards != 6 {
		t.Errorf("environment: window %v, batch %d, shards %d", c.CoalesceWindow, c.CoalesceBatch, c.Shards)
	}
	if c := parse("-shards", "2"); c.Shards != 2 {
		t.Errorf("the flag over the variable: shards %d, want 2", c.Shards)
	}
}

// -kafka-addr-map takes BROKER=DIAL pairs of host:port and refuses
// anything else with ErrAddrMap, as a flag and from the environment; the
// clock skew (tests only) is bounded.
func TestConfigKafkaAddrMapAndSkew(t *testing.T) {
	cleanEnv(t)
	parse := func(args ...string) (app.Config, error) {
		c := app.DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		return c, c.Validate()
	}
	c, err := parse("-kafka-addr-map", "10.0.0.1:9092=127.0.0.1:19092, 10.0.0.2:9092=127.0.0.1:19093")
	if err != nil || len(c.KafkaAddrMap) != 2 || c.KafkaAddrMap["10.0.0.2:9092"] != "127.0.0.1:19093" {
		t.Fatalf("two pairs: %v %v", c.KafkaAddrMap, err)
	}
	for _, bad := range []string{"10.0.0.1:9092", "10.0.0.1=127.0.0.1:1", "10.0.0.1:9092=nohostport", "=127.0.0.1:1"} {
		// The flag package reports the parse error by its text.
		if _, err := parse("-kafka-addr-map", bad); err == nil || !strings.Contains(err.Error(), app.ErrAddrMap.Error()) {
			t.Errorf("-kafka-addr-map %q: %v, want ErrAddrMap", bad, err)
		}
	}
	t.Setenv("SECKILL_KAFKA_ADDR_MAP", "broker-without-port=127.0.0.1:1")
	if _, err := parse(); !errors.Is(err, app.ErrAddrMap) {
		t.Errorf("a bad SECKILL_KAFKA_ADDR_MAP: %v, want ErrAddrMap from Validate", err)
	}
	t.Setenv("SECKILL_KAFKA_ADDR_MAP", "")
	if _, err := parse("-clock-skew", "5s"); err != nil {
		t.Errorf("-clock-skew 5s: %v", err)
	}
	if _, err := parse("-clock-skew", "2h"); err == nil || !strings.Contains(err.Error(), "clock-skew") {
		t.Errorf("-clock-skew 2h: %v, want refused", err)
	}
}

// Demo mode is the embedded quick start's default only, refused with real
// servers unless asked for by name; the secret has at least 32 bytes and
// never comes from argv.
func TestConfigDemoAndSecret(t *testing.T) {
	cleanEnv(t)
	parse := func(env map[string]string, args ...string) (app.Config, error) {
		for k, v := range env {
			t.Setenv(k, v)
		}
		c := app.DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		c.Resolve(fs)
		c.DefaultDemo(fs)
		return c, c.Validate()
	}
	if c, err := parse(nil); err != nil || !c.Demo {
		t.Errorf("embedded quick start: demo %v, %v; want demo on", c.Demo, err)
	}
	if c, err := parse(nil); err != nil || c.PerUserLimit != 1 {
		t.Errorf("per-user limit by default: %d, %v; want 1", c.PerUserLimit, err)
	}
	if c, err := parse(map[string]string{"SECKILL_PER_USER_LIMIT": "2"}); err != nil || c.PerUserLimit != 2 {
		t.Errorf("SECKILL_PER_USER_LIMIT=2: %d, %v", c.PerUserLimit, err)
	}
	if c, err := parse(nil, "-per-user-limit", "3"); err != nil || c.PerUserLimit != 3 {
		t.Errorf("-per-user-limit 3: %d, %v", c.PerUserLimit, err)
	}
	if _, err := parse(nil, "-per-user-limit", "0"); err == nil || !strings.Contains(err.Error(), "per-user-limit") {
		t.Errorf("-per-user-limit 0: %v, want refused", err)
	}
	if c, err := parse(nil, "-redis", "127.0.0.1:6379"); err != nil || c.Demo {
		t.Errorf("real Redis, no -demo: demo %v, %v; want demo off", c.Demo, err)
	}
	if _, err := parse(nil, "-redis", "127.0.0.1:6379", "-demo"); err == nil || !strings.Contains(err.Error(), "demo mode") {
		t.Errorf("-demo with real Redis: %v, want refused", err)
	}
	if c, err := parse(nil, "-redis", "127.0.0.1:6379", "-demo", "-demo-with-real-servers"); err != nil || !c.Demo {
		t.Errorf("-demo -demo-with-real-servers: demo %v, %v", c.Demo, err)
	}
	if _, err := parse(nil, "-secret", strings.Repeat("s", 40)); err == nil {
		t.Error("-secret on argv is accepted")
	}
	if _, err := parse(map[string]string{"SECKILL_SECRET": "too-short"}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a 9-byte secret: %v, want refused", err)
	}
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(strings.Repeat("k", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SECKILL_SECRET", "")
	if c, err := parse(nil, "-secret-file", f); err != nil || c.Secret != strings.Repeat("k", 32) {
		t.Errorf("-secret-file: %q %v", c.Secret, err)
	}
}

// cleanEnv clears the server variables CI sets, which RegisterFlags reads:
// these tests parse flags as a user's shell would.
func cleanEnv(t *testing.T) {
	for _, k := range []string{"SECKILL_REDIS_ADDR", "SECKILL_REDIS_CLUSTER_ADDRS", "SECKILL_STOCK_REDIS_ADDR", "SECKILL_MYSQL_DSN",
		"SECKILL_KAFKA_BROKERS", "SECKILL_KAFKA_ADDR_MAP", "SECKILL_SECRET", "SECKILL_DEMO", "SECKILL_DEMO_WITH_REAL_SERVERS", "SECKILL_CLOCK_SKEW", "SECKILL_PER_USER_LIMIT",
		"SECKILL_COALESCE_WINDOW", "SECKILL_COALESCE_BATCH", "SECKILL_SHARDS", "SECKILL_PRODUCE_BATCH", "SECKILL_PRODUCE_LINGER",
		"SECKILL_PG_DSN", "SECKILL_REDIS_SENTINEL"} {
		t.Setenv(k, "")
	}
}

// -produce-batch and -produce-linger: off by default, parsed, and checked.
func TestConfigProduceBatching(t *testing.T) {
	cleanEnv(t)
	parse := func(args ...string) (app.Config, error) {
		c := app.DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		return c, c.Validate()
	}
	c, err := parse()
	if err != nil || c.ProduceBatch != 0 || c.ProduceLinger != 200*time.Microsecond {
		t.Fatalf("defaults: batch %d linger %v (%v), want off and 200µs", c.ProduceBatch, c.ProduceLinger, err)
	}
	c, err = parse("-produce-batch", "64", "-produce-linger", "1ms")
	if err != nil || c.ProduceBatch != 64 || c.ProduceLinger != time.Millisecond {
		t.Fatalf("set: batch %d linger %v (%v)", c.ProduceBatch, c.ProduceLinger, err)
	}
	for _, bad := range [][]string{{"-produce-batch", "-1"}, {"-produce-batch", "4097"}, {"-produce-linger", "-1ms"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
