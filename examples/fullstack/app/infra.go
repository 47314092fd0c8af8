package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/alicebob/miniredis/v2"
	"github.com/glebarez/sqlite"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/order/orderkafka"
	"github.com/twmb/franz-go/pkg/kfake"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Infra is the set of collaborators the service borrows: one Redis client,
// one gorm database and the Kafka broker list. In embedded mode it owns
// a miniredis server, a pure-Go SQLite file and an in-process kfake cluster,
// and closes them in Close.
type Infra struct {
	Redis redis.UniversalClient
	// StockRedis holds the sale's stock: Redis unless -stock-redis names
	// another server.
	StockRedis redis.UniversalClient
	DB         *gorm.DB
	Brokers    []string

	// Kafka clients of the node (ConnectKafka): the order producer (also
	// the outbox relay's and the dead-letter topic's), and a client with its
	// cluster admin for the consumer group's lag.
	Producer    sarama.SyncProducer
	KafkaClient sarama.Client
	KafkaAdmin  sarama.ClusterAdmin
	kafkaCfg    *sarama.Config // the producer's config, also the consumer group's

	// kafkaAddrMap: broker address as advertised → address dialed
	// (-kafka-addr-map).
	kafkaAddrMap map[string]string

	// Describe the kinds in use, for logs and /healthz.
	RedisKind, DBKind, KafkaKind string

	mini    *miniredis.Miniredis
	kafka   *kfake.Cluster
	tmpDir  string
	dropDB  func() error
	closers []func() error
}

// StartInfra connects to the servers named in cfg or starts embedded ones.
func StartInfra(ctx context.Context, cfg Config, log *slog.Logger) (*Infra, error) {
	in := &Infra{}
	for _, connect := range []func(context.Context, Config) error{in.connectRedis, in.connectStockRedis, in.openDB, in.startKafka} {
		if err := connect(ctx, cfg); err != nil {
			_ = in.Close()
			return nil, err
		}
	}
	log.Info("infrastructure ready", "redis", in.RedisKind, "db", in.DBKind, "kafka", in.KafkaKind, "brokers", strings.Join(in.Brokers, ","))
	return in, nil
}

// redisOptions are the options of every client to a Redis server. A script
// may have run although the reply timed out; stock and order calls are
// idempotent by ID, others are settled by the reconciler
// (docs/ARCHITECTURE.md, "Failure policy"). No blind retries.
func redisOptions(addr string, pool int) *redis.Options {
	return &redis.Options{Addr: addr, PoolSize: pool, MaxRetries: -1, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second}
}

// connectRedis connects to the Cluster, the server, or an embedded
// miniredis, and pings it.
func (in *Infra) connectRedis(ctx context.Context, cfg Config) error {
	switch {
	case len(cfg.RedisCluster) > 0:
		o := redisOptions("", cfg.RedisPoolSize)
		in.Redis = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.RedisCluster, PoolSize: o.PoolSize,
			MaxRetries: o.MaxRetries, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout})
		in.RedisKind = "cluster"
	case cfg.RedisSentinel != "":
		c, err := sentinelClient(cfg.RedisSentinel, cfg.RedisPoolSize)
		if err != nil {
			return err
		}
		in.Redis, in.RedisKind = c, "sentinel"
	case cfg.RedisAddr != "":
		in.Redis, in.RedisKind = redis.NewClient(redisOptions(cfg.RedisAddr, cfg.RedisPoolSize)), "standalone"
	default:
		m, err := miniredis.Run()
		if err != nil {
			return fmt.Errorf("start miniredis: %w", err)
		}
		in.mini = m
		in.closers = append(in.closers, func() error { m.Close(); return nil })
		in.Redis = redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: cfg.RedisPoolSize, MaxRetries: -1})
		in.RedisKind = "miniredis"
	}
	in.StockRedis = in.Redis
	return ping(ctx, in.Redis, "redis ("+in.RedisKind+")")
}

// connectStockRedis connects to -stock-redis, when it names its own server.
func (in *Infra) connectStockRedis(ctx context.Context, cfg Config) error {
	if cfg.StockRedisAddr == "" {
		return nil
	}
	c := redis.NewClient(redisOptions(cfg.StockRedisAddr, cfg.RedisPoolSize))
	in.closers = append(in.closers, c.Close)
	in.StockRedis = c
	return ping(ctx, c, "stock redis")
}

func ping(ctx context.Context, c redis.UniversalClient, what string) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("ping %s: %w", what, err)
	}
	return nil
}

// openDB opens MariaDB/MySQL, or a pure-Go SQLite file (a temporary one
// unless -sqlite names it).
func (in *Infra) openDB(ctx context.Context, cfg Config) error {
	if cfg.PostgresDSN != "" {
		db, drop, err := openPostgres(ctx, cfg.PostgresDSN, cfg.MySQLDatabase, cfg.DropDatabaseOnClose)
		if err != nil {
			return err
		}
		in.DB, in.DBKind, in.dropDB = db, "postgres", drop
		return nil
	}
	if cfg.MySQLDSN != "" {
		db, drop, err := openMySQL(ctx, cfg.MySQLDSN, cfg.MySQLDatabase, cfg.DropDatabaseOnClose)
		if err != nil {
			return err
		}
		in.DB, in.DBKind, in.dropDB = db, "mysql", drop
		return nil
	}
	path := cfg.SQLitePath
	if path == "" {
		dir, err := os.MkdirTemp("", "seckill-fullstack-")
		if err != nil {
			return err
		}
		in.tmpDir = dir
		path = filepath.Join(dir, "seckill.db")
	}
	db, err := openSQLite(path)
	if err != nil {
		return err
	}
	in.DB, in.DBKind = db, "sqlite:"+path
	return nil
}

// startKafka takes the brokers of -kafka, or starts an embedded 3-broker
// kfake cluster: its log on disk (fsynced per produce, so a 202 is answered
// only after its message is durable) with -kafka-data or -sqlite, else in
// memory.
func (in *Infra) startKafka(_ context.Context, cfg Config) error {
	if len(cfg.KafkaBrokers) > 0 {
		in.Brokers, in.KafkaKind = cfg.KafkaBrokers, "kafka"
		in.kafkaAddrMap = cfg.KafkaAddrMap
		return nil
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(3),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.SeedTopics(int32(cfg.Partitions), cfg.Topic, cfg.Topic+".dlq"),
	}
	dir := cfg.KafkaDataDir
	if dir == "" && cfg.SQLitePath != "" && cfg.MySQLDSN == "" && cfg.PostgresDSN == "" {
		dir = cfg.SQLitePath + ".kafka"
	}
	kind := "kfake (in memory: a crash loses queued buys)"
	if dir != "" {
		opts = append(opts, kfake.DataDir(dir), kfake.SyncWrites())
		kind = "kfake (log in " + dir + ")"
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	in.kafka = c
	in.Brokers, in.KafkaKind = c.ListenAddrs(), kind
	return nil
}

// Close closes what StartInfra opened or started, in reverse order.
func (in *Infra) Close() error {
	var errs []error
	if in.Producer != nil {
		errs = append(errs, in.Producer.Close())
		in.Producer = nil
	}
	if in.KafkaAdmin != nil {
		errs = append(errs, in.KafkaAdmin.Close()) // closes KafkaClient too
		in.KafkaAdmin, in.KafkaClient = nil, nil
	}
	if in.kafka != nil {
		in.kafka.Close()
		in.kafka = nil
	}
	if in.DB != nil {
		if sqlDB, err := in.DB.DB(); err == nil {
			errs = append(errs, sqlDB.Close())
		}
		in.DB = nil
	}
	if in.dropDB != nil {
		errs = append(errs, in.dropDB())
		in.dropDB = nil
	}
	if in.Redis != nil {
		errs = append(errs, in.Redis.Close())
		in.Redis = nil
	}
	for i := len(in.closers) - 1; i >= 0; i-- {
		errs = append(errs, in.closers[i]())
	}
	in.closers = nil
	if in.tmpDir != "" {
		errs = append(errs, os.RemoveAll(in.tmpDir))
		in.tmpDir = ""
	}
	return errors.Join(errs...)
}

// openSQLite opens a pure-Go SQLite file in WAL mode with a busy timeout and
// one connection, so writers in this process queue instead of failing.
func openSQLite(path string) (*gorm.DB, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(1)
	return db, nil
}

// openMySQL opens the database named in the DSN, or creates dbName when the
// DSN names none. When drop is true the database is dropped on close (tests).
func openMySQL(ctx context.Context, dsn, dbName string, drop bool) (*gorm.DB, func() error, error) {
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	cfg.ParseTime = true
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	var dropFn func() error
	if cfg.DBName == "" {
		if dbName == "" {
			dbName = "seckill"
		}
		admin, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			return nil, nil, fmt.Errorf("connect mysql: %w", err)
		}
		if err := admin.WithContext(ctx).Exec("CREATE DATABASE IF NOT EXISTS `" + dbName + "`").Error; err != nil {
			return nil, nil, fmt.Errorf("create database %s: %w", dbName, err)
		}
		dropFn = func() error {
			var err error
			if drop {
				err = admin.Exec("DROP DATABASE IF EXISTS `" + dbName + "`").Error
			}
			if sqlDB, e := admin.DB(); e == nil {
				err = errors.Join(err, sqlDB.Close())
			}
			return err
		}
		cfg.DBName = dbName
	}
	db, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
	if err != nil {
		if dropFn != nil {
			_ = dropFn()
		}
		return nil, nil, fmt.Errorf("open mysql %s: %w", cfg.DBName, err)
	}
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(32)
		sqlDB.SetMaxIdleConns(32)
		sqlDB.SetConnMaxLifetime(time.Hour)
	}
	return db, dropFn, nil
}

// ErrAddrMap is returned for a malformed -kafka-addr-map.
var ErrAddrMap = errors.New("bad Kafka address map")

// parseAddrMap parses "BROKER=DIAL,BROKER=DIAL" (host:port each).
func parseAddrMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range splitList(s) {
		from, to, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not BROKER=DIAL", ErrAddrMap, p)
		}
		for _, a := range []string{from, to} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("%w: %q: %v", ErrAddrMap, a, err)
			}
		}
		m[from] = to
	}
	return m, nil
}

// Sarama makes c dial through -kafka-addr-map, if one is set: sarama dials
// the addresses the brokers advertise, so a proxy in front of a broker
// carries only the bootstrap connection unless the client maps the
// advertised address to the proxy. It returns c.
func (in *Infra) Sarama(c *sarama.Config) *sarama.Config {
	if len(in.kafkaAddrMap) == 0 {
		return c
	}
	c.Net.Proxy.Enable = true
	c.Net.Proxy.Dialer = mappedDialer{m: in.kafkaAddrMap,
		d: &net.Dialer{Timeout: c.Net.DialTimeout, KeepAlive: c.Net.KeepAlive, LocalAddr: c.Net.LocalAddr}}
	return c
}

// mappedDialer dials m[addr] instead of addr when addr is mapped.
type mappedDialer struct {
	m map[string]string
	d *net.Dialer
}

func (md mappedDialer) Dial(network, addr string) (net.Conn, error) {
	if to, ok := md.m[addr]; ok {
		addr = to
	}
	return md.d.Dial(network, addr)
}

// ConnectKafka opens the node's Kafka clients (node tags their client
// IDs): the producer, and the client and cluster admin that read the
// consumer group's lag. Close closes them.
func (in *Infra) ConnectKafka(node string) error {
	c := orderkafka.SaramaConfig()
	c.ClientID = "seckill-fullstack-" + node
	c.Producer.Timeout = 5 * time.Second
	c.Net.DialTimeout = 3 * time.Second
	c.Metadata.Retry.Max = 3
	in.kafkaCfg = in.Sarama(c) // -kafka-addr-map
	sp, err := sarama.NewSyncProducer(in.Brokers, in.kafkaCfg)
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	in.Producer = sp
	ac := orderkafka.SaramaConfig()
	ac.ClientID = "seckill-fullstack-admin-" + node
	ac.Net.DialTimeout = 3 * time.Second
	ac.Metadata.Retry.Max = 3
	client, err := sarama.NewClient(in.Brokers, in.Sarama(ac))
	if err != nil {
		return fmt.Errorf("kafka client for lag: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return fmt.Errorf("kafka admin for lag: %w", err)
	}
	in.KafkaClient, in.KafkaAdmin = client, admin
	return nil
}
