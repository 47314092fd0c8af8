package token

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Pool scripts: lib.lua (shared helpers) is prepended to each; every script's
// header lists its KEYS, ARGV, return codes and source of "now".
var (
	//go:embed lib.lua
	libLua string
	//go:embed issue.lua
	issueLua string
	//go:embed take.lua
	takeLua string
	//go:embed consume.lua
	consumeLua string
	//go:embed restore.lua
	restoreLua string
	//go:embed reclaim.lua
	reclaimLua string
	//go:embed stats.lua
	statsLua string
	//go:embed drop.lua
	dropLua string

	issueScript   = redis.NewScript(issueLua)
	takeScript    = redis.NewScript(libLua + takeLua)
	consumeScript = redis.NewScript(libLua + consumeLua)
	restoreScript = redis.NewScript(libLua + restoreLua)
	reclaimScript = redis.NewScript(libLua + reclaimLua)
	statsScript   = redis.NewScript(libLua + statsLua)
	dropScript    = redis.NewScript(dropLua)
)
