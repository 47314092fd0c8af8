package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Environment variables that select real servers.
const (
	EnvRedisAddr         = "SECKILL_REDIS_ADDR"
	EnvRedisClusterAddrs = "SECKILL_REDIS_CLUSTER_ADDRS"
	EnvMySQLDSN          = "SECKILL_MYSQL_DSN"
	EnvKafkaBrokers      = "SECKILL_KAFKA_BROKERS"
)

// RedisKind says which Redis a test talks to.
type RedisKind string

// Kinds of Redis returned by [Redis].
const (
	KindMiniredis  RedisKind = "miniredis"
	KindStandalone RedisKind = "standalone"
	KindCluster    RedisKind = "cluster"
)

// Kind reports which Redis [Redis] returns in this process. When both real
// variables are set, the Cluster wins: it is the stricter target.
func Kind() RedisKind {
	switch {
	case os.Getenv(EnvRedisClusterAddrs) != "":
		return KindCluster
	case os.Getenv(EnvRedisAddr) != "":
		return KindStandalone
	default:
		return KindMiniredis
	}
}

// Redis returns a client for the test: miniredis, or a real server / Cluster
// selected by the environment (see the package doc). The client is closed at
// cleanup; keys under [Prefix] are deleted when the test that asked for the
// prefix ends.
func Redis(t testing.TB) redis.UniversalClient {
	t.Helper()
	switch Kind() {
	case KindCluster:
		return RealCluster(t)
	case KindStandalone:
		return RealRedis(t)
	default:
		c, _ := Miniredis(t)
		return c
	}
}

// AllRedis returns one client of every kind available in this process:
// miniredis always, plus the real standalone server and the real Cluster when
// their variables are set. Use it for tables that must hold on each.
func AllRedis(t testing.TB) map[RedisKind]redis.UniversalClient {
	t.Helper()
	m := map[RedisKind]redis.UniversalClient{}
	c, _ := Miniredis(t)
	m[KindMiniredis] = c
	if os.Getenv(EnvRedisAddr) != "" {
		m[KindStandalone] = RealRedis(t)
	}
	if os.Getenv(EnvRedisClusterAddrs) != "" {
		m[KindCluster] = RealCluster(t)
	}
	return m
}

// poolTimeout is how long a test client's caller waits for a free
// connection. go-redis' default (the read timeout + 1 s = 4 s) failed
// TestPauseRace's 1,000 concurrent reservations on a loaded 2-core box
// under -race (CI: "connection pool timeout"); a test measures no
// latency, so a wait for a connection is not a failure.
const poolTimeout = time.Minute

// Miniredis always starts a miniredis for the test, for tests that need its
// levers (SetTime, FastForward, SetError, Close/Restart).
func Miniredis(t testing.TB) (*redis.Client, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, PoolTimeout: poolTimeout})
	t.Cleanup(func() { _ = c.Close() })
	return c, m
}

// RealRedis returns a client of the standalone server named by
// SECKILL_REDIS_ADDR, or skips the test when it is unset.
func RealRedis(t testing.TB) *redis.Client {
	t.Helper()
	addr := os.Getenv(EnvRedisAddr)
	if addr == "" {
		t.Skipf("%s not set: no real Redis", EnvRedisAddr)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128, PoolTimeout: poolTimeout})
	ping(t, c)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// RealCluster returns a client of the Cluster named by
// SECKILL_REDIS_CLUSTER_ADDRS, or skips the test when it is unset.
func RealCluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := os.Getenv(EnvRedisClusterAddrs)
	if addrs == "" {
		t.Skipf("%s not set: no real Redis Cluster", EnvRedisClusterAddrs)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), PoolSize: 128, PoolTimeout: poolTimeout})
	ping(t, c)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ping(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: ping redis: %v", err)
	}
}

var (
	prefixMu sync.Mutex
	prefixes = map[testing.TB]string{}

	cleanOnce    sync.Once
	cleanClients []redis.UniversalClient
)

// Prefix returns the key prefix owned by this test (each subtest and each
// -count repetition gets its own), ending in ":". Use it as the package's key
// prefix option. When real servers are configured, keys under it are deleted
// from them when the test ends.
func Prefix(t testing.TB) string {
	prefixMu.Lock()
	p, ok := prefixes[t]
	if !ok {
		var b [6]byte
		_, _ = rand.Read(b[:])
		p = "t" + hex.EncodeToString(b[:]) + ":"
		prefixes[t] = p
	}
	prefixMu.Unlock()
	if !ok {
		t.Cleanup(func() {
			for _, c := range realCleanClients() {
				cleanPrefix(c, p)
			}
			prefixMu.Lock()
			delete(prefixes, t)
			prefixMu.Unlock()
		})
	}
	return p
}

// realCleanClients returns process-wide clients of the configured real
// servers, used only to delete test prefixes.
func realCleanClients() []redis.UniversalClient {
	cleanOnce.Do(func() {
		if addr := os.Getenv(EnvRedisAddr); addr != "" {
			cleanClients = append(cleanClients, redis.NewClient(&redis.Options{Addr: addr}))
		}
		if addrs := os.Getenv(EnvRedisClusterAddrs); addrs != "" {
			cleanClients = append(cleanClients, redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")}))
		}
	})
	return cleanClients
}

func cleanPrefix(c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del := func(ctx context.Context, n redis.UniversalClient) error {
		iter := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			n.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
		return
	}
	_ = del(ctx, c)
}
