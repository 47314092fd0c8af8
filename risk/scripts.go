package risk

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed blacklist_add.lua
	blacklistAddSrc string
	//go:embed behaviour.lua
	behaviourSrc string
	//go:embed device_bind.lua
	deviceBindSrc string
	//go:embed revoke.lua
	revokeSrc string

	blacklistAddScript = redis.NewScript(blacklistAddSrc)
	behaviourScript    = redis.NewScript(behaviourSrc)
	deviceBindScript   = redis.NewScript(deviceBindSrc)
	revokeScript       = redis.NewScript(revokeSrc)
)
