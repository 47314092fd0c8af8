package risk

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client lists exactly the Redis commands this package uses. It is
// satisfied by *redis.Client, *redis.ClusterClient, *redis.Ring and
// redis.UniversalClient, and by any wrapper or fake with these methods.
//
// The scripts (blacklist escalation, behaviour window, device binding,
// session revocation) run through [redis.Script.Run] (EVALSHA, falling back
// to EVAL); sessions otherwise use plain GET / GETEX / SET NX; multi-subject
// blacklist checks use one pipeline of GETs (keys of different subjects
// live in different Cluster slots, so MGET is not possible).
// [AuthCache.Run] also needs the client's Subscribe method, which every
// go-redis client has ([NewAuthCache] checks for it).
type Client interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
	GetEx(ctx context.Context, key string, expiration time.Duration) *redis.StringCmd
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
	Pipeline() redis.Pipeliner
}
