package app

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is everything the service can be told. Each field has a flag and an
// environment variable (the flag wins); RegisterFlags lists them.
type Config struct {
	Addr string // listen address
	// Role decides what this process runs: "all" (HTTP and the workers),
	// "api" (HTTP: the buy path, results, pay; no consumer, relay,
	// canceller loop or reconciler) or "worker" (those workers, no HTTP).
	// Several api processes and several worker processes can share one
	// Redis, database and broker.
	Role string

	RedisAddr    string   // standalone Redis; empty + no cluster = embedded miniredis
	RedisCluster []string // Redis Cluster seed nodes
	// StockRedisAddr puts the sale's stock on its own standalone Redis
	// (the hot keys apart from sessions, captchas and tokens). Empty: the
	// main Redis.
	StockRedisAddr string
	// DBFallbackQuota sets this many units of the sale aside in a database
	// pool (stock/dbfallback): they are sold when Redis cannot be reached,
	// and when Redis's share is sold out, so none is stranded. 0: off.
	DBFallbackQuota int64
	RedisPoolSize   int
	KeyPrefix       string // Redis key prefix of every package

	MySQLDSN            string // go-sql-driver DSN; empty = embedded SQLite
	MySQLDatabase       string // database created when the DSN names none
	DropDatabaseOnClose bool   // tests only
	SQLitePath          string // embedded SQLite file; empty = temp dir

	KafkaBrokers []string // empty = embedded kfake
	// KafkaDataDir keeps the embedded kfake's log and group offsets on disk,
	// fsynced on every produce, so a kill -9 loses no accepted buy. Empty
	// with a SQLitePath: SQLitePath + ".kafka". Empty without one: in
	// memory (the quick start; a crash loses what was queued).
	KafkaDataDir string
	Topic        string
	Partitions   int

	// Demo activity.
	ActivityID  int64
	ProductName string
	Stock       int64
	Price       string // activity price, decimal
	Original    string // original price, decimal
	StartIn     time.Duration
	Duration    time.Duration
	PathLead    time.Duration // signed path released this long before start
	PayTimeout  time.Duration // unpaid orders are cancelled after this
	DemoUsers   int           // demo users seeded (user IDs 1..N)

	ReconcileEvery time.Duration // reconciler period
	ReconcileGrace time.Duration // a reservation without order older than this is released

	// Limits.
	UserRate    int           // buy attempts per user per UserWindow
	UserWindow  time.Duration //
	GlobalRate  int           // buy requests per second admitted by the node-local global bucket
	GlobalBurst int

	// Demo enables the demo-only helpers: /api/demo/captcha exposes the
	// answer of a captcha to a logged-in demo user so scripts, the load
	// generator and the browser test can pass the captcha. NEVER enable it
	// in production: it disables the captcha's purpose.
	Demo bool

	TrustedProxies []string // CIDRs of reverse proxies whose X-Forwarded-For is believed

	Secret string // HMAC key of tokens and signed paths; random when empty

	LogLevel string
	Quiet    bool // only warnings and errors
}

// DefaultConfig is the embedded demo.
func DefaultConfig() Config {
	return Config{
		Addr:           "127.0.0.1:8080",
		RedisPoolSize:  128,
		KeyPrefix:      "seckill:",
		MySQLDatabase:  "seckill",
		Topic:          "seckill.orders",
		Partitions:     3,
		Role:           RoleAll,
		ActivityID:     1,
		ProductName:    "Mechanical keyboard, limited edition",
		Stock:          100,
		Price:          "9.90",
		Original:       "199.00",
		StartIn:        10 * time.Second,
		Duration:       time.Hour,
		PathLead:       5 * time.Second,
		PayTimeout:     15 * time.Minute,
		DemoUsers:      10000,
		ReconcileEvery: 30 * time.Second,
		ReconcileGrace: 2 * time.Minute,
		UserRate:       5,
		UserWindow:     time.Second,
		GlobalRate:     100000,
		GlobalBurst:    20000,
		LogLevel:       "info",
	}
}

// RegisterFlags binds every field of c to a flag of fs, with defaults taken
// from c and then from the environment variable named in the usage text.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	str := func(p *string, name, env, usage string) {
		if v := os.Getenv(env); v != "" {
			*p = v
		}
		fs.StringVar(p, name, *p, usage+" (env "+env+")")
	}
	list := func(p *[]string, name, env, usage string) {
		if v := os.Getenv(env); v != "" {
			*p = splitList(v)
		}
		fs.Func(name, usage+", comma separated (env "+env+")", func(s string) error { *p = splitList(s); return nil })
	}
	intv := func(p *int, name, env, usage string) {
		if v, err := strconv.Atoi(os.Getenv(env)); err == nil {
			*p = v
		}
		fs.IntVar(p, name, *p, usage+" (env "+env+")")
	}
	i64 := func(p *int64, name, env, usage string) {
		if v, err := strconv.ParseInt(os.Getenv(env), 10, 64); err == nil {
			*p = v
		}
		fs.Int64Var(p, name, *p, usage+" (env "+env+")")
	}
	dur := func(p *time.Duration, name, env, usage string) {
		if v, err := time.ParseDuration(os.Getenv(env)); err == nil {
			*p = v
		}
		fs.DurationVar(p, name, *p, usage+" (env "+env+")")
	}
	boolv := func(p *bool, name, env, usage string) {
		if v, err := strconv.ParseBool(os.Getenv(env)); err == nil {
			*p = v
		}
		fs.BoolVar(p, name, *p, usage+" (env "+env+")")
	}
	str(&c.Addr, "addr", "SECKILL_ADDR", "HTTP listen address")
	str(&c.Role, "role", "SECKILL_ROLE", "what this process runs: all (HTTP + workers), api (HTTP only) or worker (consumer, relay, canceller, reconciler; no HTTP)")
	str(&c.RedisAddr, "redis", "SECKILL_REDIS_ADDR", "standalone Redis host:port (default: embedded miniredis)")
	list(&c.RedisCluster, "redis-cluster", "SECKILL_REDIS_CLUSTER_ADDRS", "Redis Cluster seed nodes host:port")
	intv(&c.RedisPoolSize, "redis-pool", "SECKILL_REDIS_POOL", "Redis connection pool size")
	str(&c.StockRedisAddr, "stock-redis", "SECKILL_STOCK_REDIS_ADDR", "standalone Redis host:port for the sale's stock alone (default: the main Redis)")
	i64(&c.DBFallbackQuota, "db-fallback-quota", "SECKILL_DB_FALLBACK_QUOTA", "units set aside in a DB pool, sold while Redis is unreachable or sold out (0: off)")
	str(&c.KeyPrefix, "prefix", "SECKILL_PREFIX", "Redis key prefix")
	str(&c.MySQLDSN, "mysql", "SECKILL_MYSQL_DSN", "MySQL/MariaDB DSN, e.g. 'root@tcp(127.0.0.1:3306)/?parseTime=true' (default: embedded SQLite)")
	str(&c.MySQLDatabase, "mysql-db", "SECKILL_MYSQL_DB", "database created and used when the DSN names none")
	str(&c.SQLitePath, "sqlite", "SECKILL_SQLITE", "embedded SQLite file (default: a temp file)")
	list(&c.KafkaBrokers, "kafka", "SECKILL_KAFKA_BROKERS", "Kafka brokers host:port (default: embedded kfake)")
	str(&c.KafkaDataDir, "kafka-data", "SECKILL_KAFKA_DATA", "directory of the embedded Kafka's log, fsynced per produce (default: -sqlite FILE + \".kafka\", else in memory)")
	str(&c.Topic, "topic", "SECKILL_TOPIC", "Kafka topic of order messages")
	intv(&c.Partitions, "partitions", "SECKILL_PARTITIONS", "partitions of the embedded Kafka topic")
	i64(&c.ActivityID, "activity", "SECKILL_ACTIVITY", "demo activity ID")
	str(&c.ProductName, "product", "SECKILL_PRODUCT", "demo product name")
	i64(&c.Stock, "stock", "SECKILL_STOCK", "units for sale")
	str(&c.Price, "price", "SECKILL_PRICE", "activity price")
	str(&c.Original, "original-price", "SECKILL_ORIGINAL_PRICE", "original price")
	dur(&c.StartIn, "start-in", "SECKILL_START_IN", "sale starts this long after startup")
	dur(&c.Duration, "duration", "SECKILL_DURATION", "sale length")
	dur(&c.PathLead, "path-lead", "SECKILL_PATH_LEAD", "signed buy path released this long before the start")
	dur(&c.PayTimeout, "pay-timeout", "SECKILL_PAY_TIMEOUT", "unpaid orders are cancelled after this")
	intv(&c.DemoUsers, "users", "SECKILL_USERS", "demo users seeded (IDs 1..N, names user1..userN)")
	dur(&c.ReconcileEvery, "reconcile-every", "SECKILL_RECONCILE_EVERY", "how often the reconciler compares the Redis ledger with the DB")
	dur(&c.ReconcileGrace, "reconcile-grace", "SECKILL_RECONCILE_GRACE", "age after which a reservation without order and without pending message is released")
	intv(&c.UserRate, "user-rate", "SECKILL_USER_RATE", "buy attempts allowed per user per -user-window")
	dur(&c.UserWindow, "user-window", "SECKILL_USER_WINDOW", "per-user sliding window")
	intv(&c.GlobalRate, "global-rate", "SECKILL_GLOBAL_RATE", "buy requests per second admitted by this node")
	intv(&c.GlobalBurst, "global-burst", "SECKILL_GLOBAL_BURST", "burst of the node-local global bucket")
	boolv(&c.Demo, "demo", "SECKILL_DEMO", "DEMO ONLY: expose captcha answers to demo users (load generator, browser test); never in production")
	list(&c.TrustedProxies, "trusted-proxies", "SECKILL_TRUSTED_PROXIES", "reverse proxies (CIDR or address) whose X-Forwarded-For is believed")
	str(&c.Secret, "secret", "SECKILL_SECRET", "HMAC secret of tokens and signed paths; share it between instances (default: random)")
	str(&c.LogLevel, "log-level", "SECKILL_LOG_LEVEL", "debug, info, warn or error")
}

// Resolve settles settings given twice after fs was parsed: an explicit
// -redis or -redis-cluster flag overrides the other's environment variable;
// when both come from the environment the Cluster wins (as in the tests).
func (c *Config) Resolve(fs *flag.FlagSet) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["redis"] && !set["redis-cluster"]:
		c.RedisCluster = nil
	case set["redis-cluster"] && !set["redis"]:
		c.RedisAddr = ""
	case !set["redis"] && !set["redis-cluster"] && len(c.RedisCluster) > 0:
		c.RedisAddr = ""
	}
}

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	switch {
	case c.Stock < 0:
		return fmt.Errorf("stock must be >= 0, got %d", c.Stock)
	case c.ActivityID <= 0:
		return fmt.Errorf("activity must be > 0, got %d", c.ActivityID)
	case c.DemoUsers < 1:
		return fmt.Errorf("users must be >= 1, got %d", c.DemoUsers)
	case c.RedisAddr != "" && len(c.RedisCluster) > 0:
		return fmt.Errorf("set -redis or -redis-cluster, not both")
	case c.Role != RoleAll && c.Role != RoleAPI && c.Role != RoleWorker:
		return fmt.Errorf("role must be all, api or worker, got %q", c.Role)
	case c.Role != RoleAll && (len(c.KafkaBrokers) == 0 || c.MySQLDSN == "" || (c.RedisAddr == "" && len(c.RedisCluster) == 0)):
		return fmt.Errorf("role %s shares Redis, the database and the broker with other processes: set -redis (or -redis-cluster), -mysql and -kafka (embedded ones live in one process)", c.Role)
	case c.Partitions < 1:
		return fmt.Errorf("partitions must be >= 1")
	case c.DBFallbackQuota < 0 || c.DBFallbackQuota > c.Stock:
		return fmt.Errorf("db-fallback-quota must be between 0 and the stock (%d), got %d", c.Stock, c.DBFallbackQuota)
	case c.ReconcileEvery <= 0 || c.ReconcileGrace <= 0:
		return fmt.Errorf("reconcile-every and reconcile-grace must be positive")
	case c.UserRate < 1 || c.UserWindow <= 0 || c.GlobalRate < 1 || c.GlobalBurst < 1:
		return fmt.Errorf("limits must be positive")
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Roles of a process (Config.Role).
const (
	RoleAll    = "all"
	RoleAPI    = "api"
	RoleWorker = "worker"
)

// serves reports whether the process answers HTTP.
func (c Config) serves() bool { return c.Role != RoleWorker }

// works reports whether the process runs the order workers.
func (c Config) works() bool { return c.Role != RoleAPI }
