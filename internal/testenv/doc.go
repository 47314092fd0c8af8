// Package testenv hands tests the collaborators they need: a Redis client,
// a gorm database and Kafka brokers.
//
// By default everything is embedded and needs no server: miniredis, a
// pure-Go SQLite file in the test's temp dir, and an in-process kfake Kafka
// cluster of three brokers reached over loopback TCP. Real servers are used
// when these environment variables are set:
//
//	SECKILL_REDIS_ADDR           host:port of a standalone Redis
//	SECKILL_REDIS_CLUSTER_ADDRS  comma-separated seed nodes of a Redis Cluster
//	SECKILL_MYSQL_DSN            go-sql-driver DSN of a MySQL/MariaDB server
//	                             (a fresh database is created per test and dropped)
//	SECKILL_POSTGRES_DSN         pgx connection string of a PostgreSQL server
//	                             (likewise; only [Postgres] and [AllDB] use it)
//	SECKILL_KAFKA_BROKERS        comma-separated Kafka brokers
//
// [DB] returns one database, SQLite or MySQL/MariaDB; [AllDB] returns every
// kind available (SQLite always, MySQL/MariaDB and PostgreSQL when their
// variables are set), for tests that must hold on each, as [AllRedis] does
// for Redis.
//
// Isolation: every test gets its own key prefix ([Prefix]) and its own
// database; keys under the prefix are deleted at cleanup. Nothing ever calls
// FLUSHDB or FLUSHALL.
//
// This package is test-only infrastructure; library code never imports it.
package testenv
