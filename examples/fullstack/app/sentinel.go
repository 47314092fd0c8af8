package app

import (
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// parseSentinel parses -redis-sentinel "MASTER@host:port,host:port,...":
// the master's name as the Sentinels know it and the Sentinels' addresses.
func parseSentinel(s string) (master string, addrs []string, err error) {
	master, list, ok := strings.Cut(s, "@")
	if !ok || master == "" {
		return "", nil, fmt.Errorf("redis-sentinel %q: want MASTER@host:port[,host:port...]", s)
	}
	for _, a := range splitList(list) {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", nil, fmt.Errorf("redis-sentinel %q: sentinel address %q: %w", s, a, err)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return "", nil, fmt.Errorf("redis-sentinel %q: no sentinel address", s)
	}
	return master, addrs, nil
}

// sentinelErr is parseSentinel's error for a set -redis-sentinel.
func sentinelErr(s string) error {
	if s == "" {
		return nil
	}
	_, _, err := parseSentinel(s)
	return err
}

// sentinelClient is a client of the Sentinel-managed master (go-redis
// asks the Sentinels for the master and follows a failover), with the
// options of every client to a Redis server (redisOptions).
func sentinelClient(spec string, pool int) (*redis.Client, error) {
	master, addrs, err := parseSentinel(spec)
	if err != nil {
		return nil, err
	}
	o := redisOptions("", pool)
	return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs,
		PoolSize: o.PoolSize, MaxRetries: o.MaxRetries, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout}), nil
}
