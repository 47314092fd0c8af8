package risk

import "github.com/redis/go-redis/v9"

// Compile-time proof that go-redis clients satisfy Client.
var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
	_ Client = (redis.UniversalClient)(nil)
)
