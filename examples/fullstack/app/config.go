package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/observe"
	"github.com/seckillkit/seckill/stock"
)

// maxPerUserLimit bounds Config.PerUserLimit (the admin API's largest
// quantity, admin.MaxQuantity: exact in a JSON number).
const maxPerUserLimit int64 = 1<<53 - 1

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

	RedisAddr     string   // standalone Redis; empty + no cluster = embedded miniredis
	RedisCluster  []string // Redis Cluster seed nodes
	RedisSentinel string   // MASTER@host:port,...: a Sentinel-managed master
	// StockRedisAddr puts the sale's stock on its own standalone Redis
	// (the hot keys apart from sessions, captchas and tokens). Empty: the
	// main Redis.
	StockRedisAddr string
	// DBFallbackQuota sets this many units of the sale aside in a database
	// pool (stock/dbfallback): they are sold when Redis cannot be reached,
	// and when Redis's share is sold out, so none is stranded. With
	// Variants, each size gets a pool of min(DBFallbackQuota, its stock).
	// 0: off.
	DBFallbackQuota int64
	// CoalesceWindow and CoalesceBatch gather concurrent Reserve calls of
	// the sale into one script call (stock.WithCoalescing): a batch leaves
	// when it holds CoalesceBatch requests or CoalesceWindow after its first
	// arrived. A window of 0 turns coalescing off (one script call per
	// Reserve). On by default: at the peak a script call per buyer is what
	// bounds one Redis core (BENCHMARKS.md: ≈ 46k/s one by one, ≈ 220k/s
	// coalesced), and the price is at most the window of added latency.
	CoalesceWindow time.Duration
	CoalesceBatch  int
	// SequentialAdmission turns the fused admission off
	// (checkout.Config.Sequential): the per-user window, the replay lookup,
	// the captcha and the access token each cost their own Redis round
	// trip, as before the fusion. Off by default; on a Redis Cluster the
	// admission is never fused.
	SequentialAdmission bool
	// Shards splits the sale's stock over this many Redis keys, each in
	// its own Cluster slot (stock.Activity.Shards): one hot sale on several
	// Redis masters. 1 (the default) on a standalone Redis, where shards
	// only add calls; on a Cluster, one per master the sale should use.
	// Every process of a deployment must be given the same value.
	Shards        int
	RedisPoolSize int
	KeyPrefix     string // Redis key prefix of every package

	MySQLDSN            string // go-sql-driver DSN; empty = embedded SQLite
	PostgresDSN         string // pgx DSN (keyword/value or URL): PostgreSQL instead of MySQL
	MySQLDatabase       string // database created when the DSN names none
	DropDatabaseOnClose bool   // tests only
	SQLitePath          string // embedded SQLite file; empty = temp dir

	KafkaBrokers []string // empty = embedded kfake
	// KafkaAddrMap maps a broker address (as the brokers advertise it in
	// their metadata) to the address this process dials instead, e.g. a
	// proxy of its own in front of each broker. Empty: dial as advertised.
	KafkaAddrMap map[string]string
	// KafkaDataDir keeps the embedded kfake's log and group offsets on disk,
	// fsynced on every produce, so a kill -9 loses no accepted buy. Empty
	// with a SQLitePath: SQLitePath + ".kafka". Empty without one: in
	// memory (the quick start; a crash loses what was queued).
	KafkaDataDir string
	Topic        string
	Partitions   int
	// ProduceBatch > 0 gathers up to this many concurrent buys' messages
	// into one produce call (orderkafka.WithBatching), sent after
	// ProduceLinger or when full; each buyer still waits for its own
	// message's acknowledgement. 0 (the default): one produce call per buy
	// — sarama already packs concurrent ones into one request per broker,
	// and batching measured slower (BENCHMARKS.md, "Batched hand-off").
	ProduceBatch  int
	ProduceLinger time.Duration

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
	// PerUserLimit is how many units one buyer may buy in the sale: the
	// activity row's user_limit when the sale is seeded (a restart or a
	// second instance joins the row as it is), which the stock ledger, the
	// DB pool and the consumer's transaction each enforce. At least 1. The
	// access token is still one per buyer: a buyer who holds a unit is
	// refused a new attempt with a spent token (already_bought), so more
	// than one unit is reached only by attempts in flight at once.
	PerUserLimit int64
	// Variants sells the sale in keyed sub-stocks (sizes, colours;
	// variants.go): each its own counter in Redis and activity row
	// "<activity>/<variant>" in the database. Empty (the default): one
	// counter, as before. With variants Stock is their sum, Shards 1, no DB
	// fallback pool and the fcfs sale mode.
	Variants []stock.Variant

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
	// DemoWithRealServers lets Demo run against real servers. Demo mode
	// hands captcha answers to every signed-in demo user and lets anyone
	// sign in as any seeded user, so Validate refuses it outside the
	// embedded quick start unless this is set (the load and fault tests,
	// which need the captcha answers); New logs a warning when it is.
	DemoWithRealServers bool
	// SignIn authenticates buyers outside demo mode (code, not a flag: a
	// service that copies this one plugs its identity provider in here).
	// Nil outside demo mode: /api/login answers 503 "sign-in is not
	// configured". In demo mode the demo users sign in (user1…userN, no
	// password) and SignIn is not used.
	SignIn SignInFunc

	// Observer, when set, is told about every operation of every library
	// part (every package takes the one observer interface,
	// observe.Observer), in addition to the service's
	// own Prometheus observer (contrib/prometheus, on /metrics). Code, not
	// a flag: e.g. contrib/otel's observer for metrics and spans.
	Observer observe.Observer
	// Trace carries a trace through the service: a span per HTTP request
	// and the trace context through Kafka into the consumer's transaction
	// (code, not flags; contrib/otel provides Inject and Extract). Each
	// function may be nil.
	Trace Tracing

	TrustedProxies []string // CIDRs of reverse proxies whose X-Forwarded-For is believed
	BotDefence     []string // #29: pow, risk, priority (botdefence.go); none by default
	PoWCost        int      // -bot-defence=pow: the challenges' maxnumber
	NetChallengeAt int      // -bot-defence=risk: requests of one network (IPv6 /64, IPv4 address) in 10 s before they are challenged
	NetBanAt       int      // … before the network is banned

	// Secret is the HMAC key of signed paths and stream tickets, shared by
	// every instance: at least 32 bytes (of random: 24 random bytes in
	// base64 are 32), from SECKILL_SECRET or -secret-file, never a flag
	// (argv is visible to every user of the machine). Empty: random per
	// process (one instance only).
	Secret string

	// PaySecret is the payment provider's callback secret (fakepay.go),
	// >= 32 bytes, from SECKILL_PAY_SECRET or -pay-secret-file; empty:
	// random per process (the fake provider runs in the process).
	PaySecret string

	// AdminAddr is where the admin API (pause, top-up, inspect, repair;
	// package admin of the library) listens, never the public address; it is
	// off unless AdminToken is set too. host:port, or the URL the service
	// logs and seckillctl takes (http://host:port/admin/): one variable,
	// SECKILL_ADMIN_ADDR, serves both (SECKILL_ADMIN_LISTEN is its
	// deprecated old name).
	AdminAddr string
	// AdminToken is the admin API's bearer token (≥ AdminMinTokenLen = 32
	// bytes; from the environment only, never a flag: argv is visible to
	// every user).
	AdminToken string
	// MetricsToken is the bearer token of /metrics and of /healthz's
	// details (≥ 16 bytes; SECKILL_METRICS_TOKEN, environment only). Without
	// it /metrics is served only in demo mode (the embedded quick start) and
	// answers 404 otherwise, and /healthz says only ok or degraded.
	MetricsToken string

	// ClockSkew offsets this process's own clock (tests only: the fault
	// battery runs two api processes skewed against each other). It moves
	// the buy handler's sale-window check and the signer's clock (signing
	// and checking the signed paths, the access-token window). Not moved:
	// the stock's sale window (Redis TIME), the activity's seeded start,
	// the token pool, sessions, captchas and every TTL.
	ClockSkew time.Duration

	addrMapErr  error // a bad SECKILL_KAFKA_ADDR_MAP, reported by Validate
	variantsErr error // a bad SECKILL_VARIANTS, reported by Validate
	// adminAddrOld: AdminAddr came from SECKILL_ADMIN_LISTEN, the
	// deprecated name of SECKILL_ADMIN_ADDR (startAdmin warns).
	adminAddrOld bool
	// dbHook, set by tests only, is called with the database before any
	// worker starts.
	dbHook func(*gorm.DB) error
	// redisHook, set by tests only, is added to the Redis clients before
	// any worker starts.
	redisHook redis.Hook
	// checkoutSteps, set by tests only, edits the checkout's steps after
	// the app's own edit (shapeAfterGlobal): the conformance kit's faults.
	checkoutSteps func([]checkout.Step) []checkout.Step
	// preloadEvery, set by tests only, replaces the preloader's 5 s poll
	// (the conformance kit's frozen scenario must not be rebuilt under it).
	preloadEvery time.Duration
	// reconcileClock, set by tests only, is the reconcilers' clock (the
	// grace), so a test moves time past it without waiting.
	reconcileClock interface{ Now() time.Time }
	// beforeOrphanFreeze, set by tests only, runs once the reconciler has
	// confirmed an orphan and before it freezes the activity.
	beforeOrphanFreeze func()

	// SaleMode, QueueRate, QueueCap, DrawDeadline: the fair sale modes
	// (fairsale.go): fcfs (the default), queue or draw.
	SaleMode     string
	QueueRate    float64
	QueueCap     int64
	DrawDeadline time.Duration

	LogLevel string
	Quiet    bool // only warnings and errors
}

// DefaultConfig is the embedded demo.
func DefaultConfig() Config {
	return Config{
		Addr:           "127.0.0.1:8080",
		RedisPoolSize:  128,
		KeyPrefix:      "seckill:",
		PoWCost:        50000,
		NetChallengeAt: 20,
		NetBanAt:       100,
		MySQLDatabase:  "seckill",
		Topic:          "seckill.orders",
		Partitions:     3,
		ProduceLinger:  200 * time.Microsecond,
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
		CoalesceWindow: 500 * time.Microsecond,
		CoalesceBatch:  64,
		Shards:         1,
		PerUserLimit:   1,
		ReconcileEvery: 30 * time.Second,
		ReconcileGrace: 2 * time.Minute,
		UserRate:       5,
		UserWindow:     time.Second,
		GlobalRate:     100000,
		GlobalBurst:    20000,
		LogLevel:       "info",
		SaleMode:       SaleFCFS,
		QueueRate:      50,
		DrawDeadline:   15 * time.Minute,
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
	str(&c.RedisSentinel, "redis-sentinel", "SECKILL_REDIS_SENTINEL", "a Sentinel-managed Redis master instead of -redis: MASTER@host:port,host:port,... (the master's name, the Sentinels)")
	intv(&c.RedisPoolSize, "redis-pool", "SECKILL_REDIS_POOL", "Redis connection pool size")
	str(&c.StockRedisAddr, "stock-redis", "SECKILL_STOCK_REDIS_ADDR", "standalone Redis host:port for the sale's stock alone (default: the main Redis)")
	i64(&c.DBFallbackQuota, "db-fallback-quota", "SECKILL_DB_FALLBACK_QUOTA", "units set aside in a DB pool, sold while Redis is unreachable or sold out (0: off; with -variants: per size, at most its stock)")
	dur(&c.CoalesceWindow, "coalesce-window", "SECKILL_COALESCE_WINDOW", "gather concurrent reservations of the sale for this long into one Redis script call (0: off, one call per reservation)")
	boolv(&c.SequentialAdmission, "sequential-admission", "SECKILL_SEQUENTIAL_ADMISSION", "run the Redis checks before the reservation one call each instead of in one script (the fused admission)")
	intv(&c.CoalesceBatch, "coalesce-batch", "SECKILL_COALESCE_BATCH", "most reservations per coalesced script call (1..1024)")
	intv(&c.Shards, "shards", "SECKILL_SHARDS", "split the sale's stock over this many Redis keys, each in its own Cluster slot (1..64; 1 on a standalone Redis; the same in every process)")
	str(&c.KeyPrefix, "prefix", "SECKILL_PREFIX", "Redis key prefix")
	str(&c.PostgresDSN, "postgres", "SECKILL_PG_DSN", "PostgreSQL DSN instead of -mysql, e.g. 'host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable'; -mysql-db, if set, is the database created and used on that server")
	str(&c.MySQLDSN, "mysql", "SECKILL_MYSQL_DSN", "MySQL/MariaDB DSN, e.g. 'root@tcp(127.0.0.1:3306)/?parseTime=true' (default: embedded SQLite)")
	str(&c.MySQLDatabase, "mysql-db", "SECKILL_MYSQL_DB", "database created and used when the DSN names none")
	str(&c.SQLitePath, "sqlite", "SECKILL_SQLITE", "embedded SQLite file (default: a temp file)")
	list(&c.KafkaBrokers, "kafka", "SECKILL_KAFKA_BROKERS", "Kafka brokers host:port (default: embedded kfake)")
	fs.Func("kafka-addr-map", "BROKER=DIAL pairs, comma separated: dial DIAL whenever the brokers' metadata names BROKER (a proxy or NAT in front of the brokers) (env SECKILL_KAFKA_ADDR_MAP)",
		func(s string) error { m, err := parseAddrMap(s); c.KafkaAddrMap = m; return err })
	if v := os.Getenv("SECKILL_KAFKA_ADDR_MAP"); v != "" {
		c.KafkaAddrMap, c.addrMapErr = parseAddrMap(v) // reported by Validate
	}
	str(&c.KafkaDataDir, "kafka-data", "SECKILL_KAFKA_DATA", "directory of the embedded Kafka's log, fsynced per produce (default: -sqlite FILE + \".kafka\", else in memory)")
	str(&c.Topic, "topic", "SECKILL_TOPIC", "Kafka topic of order messages")
	intv(&c.Partitions, "partitions", "SECKILL_PARTITIONS", "partitions of the embedded Kafka topic")
	intv(&c.ProduceBatch, "produce-batch", "SECKILL_PRODUCE_BATCH", "gather up to N concurrent buys' messages into one produce call, each buyer still answered by its own ack (0: one call per buy)")
	dur(&c.ProduceLinger, "produce-linger", "SECKILL_PRODUCE_LINGER", "with -produce-batch: how long a batch gathers before it is sent")
	i64(&c.ActivityID, "activity", "SECKILL_ACTIVITY", "demo activity ID")
	str(&c.ProductName, "product", "SECKILL_PRODUCT", "demo product name")
	i64(&c.Stock, "stock", "SECKILL_STOCK", "units for sale")
	str(&c.Price, "price", "SECKILL_PRICE", "activity price")
	str(&c.Original, "original-price", "SECKILL_ORIGINAL_PRICE", "original price")
	dur(&c.StartIn, "start-in", "SECKILL_START_IN", "sale starts this long after startup")
	dur(&c.Duration, "duration", "SECKILL_DURATION", "sale length")
	dur(&c.PathLead, "path-lead", "SECKILL_PATH_LEAD", "signed buy path released this long before the start")
	dur(&c.PayTimeout, "pay-timeout", "SECKILL_PAY_TIMEOUT", "unpaid orders are cancelled after this")
	i64(&c.PerUserLimit, "per-user-limit", "SECKILL_PER_USER_LIMIT", "units one buyer may buy in the sale (seeds the activity's per-user limit; >= 1)")
	c.registerVariantFlags(fs)
	intv(&c.DemoUsers, "users", "SECKILL_USERS", "demo users seeded (IDs 1..N, names user1..userN)")
	dur(&c.ReconcileEvery, "reconcile-every", "SECKILL_RECONCILE_EVERY", "how often the reconciler compares the Redis ledger with the DB")
	dur(&c.ReconcileGrace, "reconcile-grace", "SECKILL_RECONCILE_GRACE", "age after which a reservation without order and without pending message is released")
	intv(&c.UserRate, "user-rate", "SECKILL_USER_RATE", "buy attempts allowed per user per -user-window")
	dur(&c.UserWindow, "user-window", "SECKILL_USER_WINDOW", "per-user sliding window")
	intv(&c.GlobalRate, "global-rate", "SECKILL_GLOBAL_RATE", "buy requests per second admitted by this node")
	intv(&c.GlobalBurst, "global-burst", "SECKILL_GLOBAL_BURST", "burst of the node-local global bucket")
	boolv(&c.Demo, "demo", "SECKILL_DEMO", "DEMO ONLY: expose captcha answers to demo users (load generator, browser test); never in production")
	list(&c.BotDefence, "bot-defence", "SECKILL_BOT_DEFENCE", "bot defences on, comma separated: pow (proof of work on every buy, image captcha only when risk challenges), risk (device and network bans), priority (global bucket shared by risk classes)")
	intv(&c.PoWCost, "pow-cost", "SECKILL_POW_COST", "with -bot-defence=pow: the challenge's maxnumber (a solver hashes half of it on average)")
	intv(&c.NetChallengeAt, "net-challenge-at", "SECKILL_NET_CHALLENGE_AT", "with -bot-defence=risk: requests of one client network (IPv6 /64, IPv4 address) in 10 s above which its buys are challenged")
	intv(&c.NetBanAt, "net-ban-at", "SECKILL_NET_BAN_AT", "with -bot-defence=risk: requests of one client network in 10 s above which the network is banned")
	list(&c.TrustedProxies, "trusted-proxies", "SECKILL_TRUSTED_PROXIES", "reverse proxies (CIDR or address) whose X-Forwarded-For is believed")
	if v := os.Getenv("SECKILL_SECRET"); v != "" {
		c.Secret = v
	}
	fs.Func("secret-file", "file holding the HMAC secret of signed paths and stream tickets (>= 32 bytes; share it between instances); or env SECKILL_SECRET (default: random per process)",
		func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			c.Secret = strings.TrimRight(string(b), "\r\n")
			return nil
		})
	secretFile(&c.PaySecret, fs, "pay-secret-file", "SECKILL_PAY_SECRET", "file holding the payment provider's callback secret (>= 32 bytes); or env SECKILL_PAY_SECRET (default: random per process)")
	boolv(&c.DemoWithRealServers, "demo-with-real-servers", "SECKILL_DEMO_WITH_REAL_SERVERS", "TESTS ONLY: allow -demo against real servers (load and fault tests); never in production")
	dur(&c.ClockSkew, "clock-skew", "SECKILL_CLOCK_SKEW", "TESTS ONLY: offset this process's clock by this much (the buy handler's sale-window check, signed paths, the access-token window); Redis TIME is not moved")
	c.registerFairFlags(fs)
	str(&c.LogLevel, "log-level", "SECKILL_LOG_LEVEL", "debug, info, warn or error")
	if v := os.Getenv("SECKILL_ADMIN_LISTEN"); v != "" && os.Getenv("SECKILL_ADMIN_ADDR") == "" {
		c.AdminAddr, c.adminAddrOld = v, true // the deprecated name
	}
	str(&c.AdminAddr, "admin-addr", "SECKILL_ADMIN_ADDR", "admin API address, host:port or the URL seckillctl takes (http://host:port/admin/); a private address; needs SECKILL_ADMIN_TOKEN; off when empty")
	c.AdminToken = os.Getenv("SECKILL_ADMIN_TOKEN")
	c.MetricsToken = os.Getenv("SECKILL_METRICS_TOKEN")
}

// Resolve settles settings given twice after fs was parsed: an explicit
// -redis or -redis-cluster flag overrides the other's environment variable;
// when both come from the environment the Cluster wins (as in the tests).
func (c *Config) Resolve(fs *flag.FlagSet) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.resolveVariants(set)
	if set["redis-sentinel"] {
		c.RedisAddr, c.RedisCluster = "", nil
	}
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
	if err := validBotDefence(c.BotDefence, c.PoWCost, c.NetChallengeAt, c.NetBanAt); err != nil {
		return err
	}
	switch {
	case c.Stock < 0:
		return fmt.Errorf("stock must be >= 0, got %d", c.Stock)
	case c.PerUserLimit < 1 || c.PerUserLimit > maxPerUserLimit:
		return fmt.Errorf("per-user-limit must be between 1 and %d, got %d", maxPerUserLimit, c.PerUserLimit)
	case c.ActivityID <= 0:
		return fmt.Errorf("activity must be > 0, got %d", c.ActivityID)
	case c.DemoUsers < 1:
		return fmt.Errorf("users must be >= 1, got %d", c.DemoUsers)
	case c.RedisAddr != "" && len(c.RedisCluster) > 0:
		return fmt.Errorf("set -redis or -redis-cluster, not both")
	case c.Role != RoleAll && c.Role != RoleAPI && c.Role != RoleWorker:
		return fmt.Errorf("role must be all, api or worker, got %q", c.Role)
	case c.MySQLDSN != "" && c.PostgresDSN != "":
		return fmt.Errorf("set -mysql or -postgres, not both")
	case sentinelErr(c.RedisSentinel) != nil:
		return sentinelErr(c.RedisSentinel)
	case c.RedisSentinel != "" && (c.RedisAddr != "" || len(c.RedisCluster) > 0):
		return fmt.Errorf("set -redis-sentinel or -redis / -redis-cluster, not both")
	case c.Role != RoleAll && (len(c.KafkaBrokers) == 0 || (c.MySQLDSN == "" && c.PostgresDSN == "") || (c.RedisAddr == "" && len(c.RedisCluster) == 0 && c.RedisSentinel == "")):
		return fmt.Errorf("role %s shares Redis, the database and the broker with other processes: set -redis (or -redis-cluster), -mysql (or -postgres) and -kafka (embedded ones live in one process)", c.Role)
	case c.addrMapErr != nil:
		return fmt.Errorf("SECKILL_KAFKA_ADDR_MAP: %w", c.addrMapErr)
	case c.ClockSkew < -time.Hour || c.ClockSkew > time.Hour:
		return fmt.Errorf("clock-skew must be within ±1h, got %v", c.ClockSkew)
	case c.Secret != "" && len(c.Secret) < MinSecretLen:
		return fmt.Errorf("the secret has %d bytes, want at least %d (24 random bytes in base64)", len(c.Secret), MinSecretLen)
	case c.PaySecret != "" && len(c.PaySecret) < MinSecretLen:
		return fmt.Errorf("the payment secret has %d bytes, want at least %d", len(c.PaySecret), MinSecretLen)
	case c.Demo && !c.Embedded() && !c.DemoWithRealServers:
		return fmt.Errorf("demo mode hands out captcha answers and lets anyone sign in as a seeded user: it runs only in the embedded quick start; with real servers pass -demo=false (or, for load and fault tests only, -demo-with-real-servers)")
	case c.AdminToken != "" && len(c.AdminToken) < AdminMinTokenLen:
		return fmt.Errorf("SECKILL_ADMIN_TOKEN has %d bytes, want at least %d (24 random bytes in base64: head -c 24 /dev/urandom | base64)", len(c.AdminToken), AdminMinTokenLen)
	case c.AdminAddr != "" && adminListenErr(c.AdminAddr) != nil:
		return fmt.Errorf("SECKILL_ADMIN_ADDR (-admin-addr): %w", adminListenErr(c.AdminAddr))
	case c.MetricsToken != "" && len(c.MetricsToken) < 16:
		return fmt.Errorf("SECKILL_METRICS_TOKEN has %d bytes, want at least 16", len(c.MetricsToken))
	case c.CoalesceWindow < 0 || c.CoalesceWindow > time.Second:
		return fmt.Errorf("coalesce-window must be between 0 (off) and 1s, got %v", c.CoalesceWindow)
	case c.CoalesceBatch < 1 || c.CoalesceBatch > 1024:
		return fmt.Errorf("coalesce-batch must be between 1 and 1024, got %d", c.CoalesceBatch)
	case c.Shards < 1 || c.Shards > 64:
		return fmt.Errorf("shards must be between 1 and 64, got %d", c.Shards)
	case c.Partitions < 1:
		return fmt.Errorf("partitions must be >= 1")
	case c.ProduceBatch < 0 || c.ProduceBatch > 4096 || c.ProduceLinger < 0:
		return fmt.Errorf("produce-batch must be between 0 and 4096 and produce-linger >= 0, got %d and %v", c.ProduceBatch, c.ProduceLinger)
	case c.DBFallbackQuota < 0 || c.DBFallbackQuota > c.Stock:
		return fmt.Errorf("db-fallback-quota must be between 0 and the stock (%d), got %d", c.Stock, c.DBFallbackQuota)
	case c.ReconcileEvery <= 0 || c.ReconcileGrace <= 0:
		return fmt.Errorf("reconcile-every and reconcile-grace must be positive")
	case c.fairErr() != nil:
		return c.fairErr()
	case c.variantsErrOf() != nil:
		return c.variantsErrOf()
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

// DefaultDemo turns demo mode on for the embedded quick start when neither
// -demo nor SECKILL_DEMO chose: `go run ./examples/fullstack` gives a
// click-through sale, a run against real servers gets no demo helpers
// unless it asks (and Validate then wants -demo-with-real-servers too).
// Call it after fs is parsed.
func (c *Config) DefaultDemo(fs *flag.FlagSet) {
	set := os.Getenv("SECKILL_DEMO") != ""
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "demo" })
	if !set {
		c.Demo = c.Embedded()
	}
}

// Tracing is Config.Trace.
type Tracing struct {
	// Start opens a span for an HTTP request (name: the route) and
	// returns the context carrying it and the function that ends it.
	Start func(ctx context.Context, name string) (context.Context, func())
	// Inject turns the trace in ctx into Kafka message headers (the
	// producer's orderkafka.WithHeaders); Extract continues it from a message's
	// headers (the consumer's order.WithContextFrom).
	Inject  func(ctx context.Context) map[string]string
	Extract func(ctx context.Context, headers map[string]string) context.Context
}

// SignInFunc authenticates a buyer outside demo mode: it returns the
// buyer's ID (a stock.ValidID string) or an error wrapping
// ErrBadCredentials. The service calls it for POST /api/login.
type SignInFunc func(ctx context.Context, username, password string) (userID string, err error)

// ErrBadCredentials is what a SignInFunc wraps for an unknown user or a
// wrong password (401); any other error is a failure of the identity
// store (503).
var ErrBadCredentials = errors.New("bad credentials")

// AdminMinTokenLen is the shortest Config.AdminToken accepted
// (admin.MinTokenLen).
const AdminMinTokenLen = 32

// AdminPath is the path the admin API is served under on its listener.
const AdminPath = "/admin/"

// adminListen returns the host:port to listen on of an AdminAddr: itself,
// or the host of the URL form (http://host:port, with or without the
// /admin/ path).
func adminListen(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		return addr, nil
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "http":
		return "", fmt.Errorf("%q: the admin listener serves plain http on a private address (put TLS in front of it and give seckillctl the https URL with --addr)", addr)
	case u.Host == "" || u.Port() == "":
		return "", fmt.Errorf("%q: want host:port or http://host:port%s", addr, AdminPath)
	case u.Path != "" && u.Path != "/" && u.Path != strings.TrimSuffix(AdminPath, "/") && u.Path != AdminPath:
		return "", fmt.Errorf("%q: the admin API is served under %s", addr, AdminPath)
	}
	return u.Host, nil
}

func adminListenErr(addr string) error { _, err := adminListen(addr); return err }

// MinSecretLen is the shortest Config.Secret accepted.
const MinSecretLen = 32

// Embedded reports whether c runs on embedded servers only (the quick
// start): no Redis, database or Kafka address is set.
func (c Config) Embedded() bool {
	return c.RedisAddr == "" && len(c.RedisCluster) == 0 && c.RedisSentinel == "" && c.StockRedisAddr == "" && c.MySQLDSN == "" && c.PostgresDSN == "" && len(c.KafkaBrokers) == 0
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
