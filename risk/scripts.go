package risk

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed blacklist_add.lua
	blacklistAddSrc string
	//go:embed blacklist_index.lua
	blacklistIndexSrc string
	//go:embed behaviour.lua
	behaviourSrc string
	//go:embed device_bind.lua
	deviceBindSrc string
	//go:embed revoke.lua
	revokeSrc string
	// blacklistCheckSrc is Blacklist.Check's reads as Lua: the blacklist's
	// part of Checker.CheckCheck (never run on its own).
	//go:embed blacklist_check.lua
	blacklistCheckSrc string

	blacklistAddScript   = redis.NewScript(blacklistAddSrc)
	blacklistIndexScript = redis.NewScript(blacklistIndexSrc)
	behaviourScript      = redis.NewScript(behaviourSrc)
	deviceBindScript     = redis.NewScript(deviceBindSrc)
	revokeScript         = redis.NewScript(revokeSrc)
	// probeScript publishes AuthCache's liveness probe (ARGV[1] channel,
	// ARGV[2] payload) through the Scripter that Client already has.
	probeScript = redis.NewScript("return redis.call('PUBLISH', ARGV[1], ARGV[2])")
)
