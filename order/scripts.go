package order

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lease_acquire.lua
var leaseAcquireLua string

//go:embed lease_renew.lua
var leaseRenewLua string

//go:embed result_set.lua
var resultSetLua string

var (
	leaseAcquireScript = redis.NewScript(leaseAcquireLua)
	leaseRenewScript   = redis.NewScript(leaseRenewLua)
	resultSetScript    = redis.NewScript(resultSetLua)
)
