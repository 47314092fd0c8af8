package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// newRedisReader is redisReader (a test gives a reader of its own).
var newRedisReader = redisReader

// redisReader returns the reader of the service's Redis servers for
// -peak (load.Config.Redis: INFO commandstats and INFO cpu, summed over
// the standalone servers of -redis and -stock-redis, or over the masters
// of -redis-cluster) and its close; without a real Redis it returns nil
// and the reason (embedded: the service in this process runs on
// miniredis).
func redisReader(cfg app.Config, embedded bool) (read func(context.Context) (load.RedisReading, error), note string, closeAll func()) {
	if len(cfg.RedisCluster) > 0 {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.RedisCluster})
		return func(ctx context.Context) (load.RedisReading, error) {
			var mu sync.Mutex
			sum := load.RedisReading{Calls: map[string]int64{}}
			err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				r, err := readOne(ctx, m)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				add(&sum, r)
				return nil
			})
			return sum, err
		}, "", func() { _ = c.Close() }
	}
	var clients []*redis.Client
	for _, addr := range []string{cfg.RedisAddr, cfg.StockRedisAddr} {
		if addr != "" && (len(clients) == 0 || clients[0].Options().Addr != addr) {
			clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
		}
	}
	if len(clients) == 0 {
		if embedded {
			return nil, "the embedded miniredis has no INFO commandstats: give -redis", func() {}
		}
		return nil, "the target's Redis is not known: give it with -redis, -stock-redis or -redis-cluster", func() {}
	}
	return func(ctx context.Context) (load.RedisReading, error) {
			sum := load.RedisReading{Calls: map[string]int64{}}
			for _, c := range clients {
				r, err := readOne(ctx, c)
				if err != nil {
					return sum, err
				}
				add(&sum, r)
			}
			return sum, nil
		}, "", func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}
}

// readOne reads one server's INFO commandstats and INFO cpu.
func readOne(ctx context.Context, c *redis.Client) (load.RedisReading, error) {
	addr := c.Options().Addr
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return load.RedisReading{}, fmt.Errorf("%s: INFO commandstats: %w", addr, err)
	}
	calls, err := load.ParseCommandStats(stats)
	if err != nil {
		return load.RedisReading{}, fmt.Errorf("%s: %w", addr, err)
	}
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return load.RedisReading{}, fmt.Errorf("%s: INFO cpu: %w", addr, err)
	}
	cpu, err := load.ParseCPU(info)
	if err != nil {
		return load.RedisReading{}, fmt.Errorf("%s: %w", addr, err)
	}
	return load.RedisReading{Calls: calls, CPU: cpu}, nil
}

func add(sum *load.RedisReading, r load.RedisReading) {
	for k, v := range r.Calls {
		sum.Calls[k] += v
	}
	sum.CPU += r.CPU
}
