package orderid

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lease_acquire.lua
var leaseAcquireLua string

//go:embed lease_renew.lua
var leaseRenewLua string

var (
	leaseAcquireScript = redis.NewScript(leaseAcquireLua)
	leaseRenewScript   = redis.NewScript(leaseRenewLua)
)
