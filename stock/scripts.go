package stock

import (
	_ "embed" // for the go:embed scripts below

	"github.com/redis/go-redis/v9"
)

// Each script is one .lua file next to this one; its header lists KEYS, ARGV
// and the reply. They run through redis.Script.Run: EVALSHA, then EVAL when
// the server answers NOSCRIPT (after SCRIPT FLUSH, a restart or a failover).

var (
	//go:embed reserve.lua
	reserveLua    string
	reserveScript = redis.NewScript(reserveLua)

	//go:embed reserve_many.lua
	reserveManyLua    string
	reserveManyScript = redis.NewScript(reserveManyLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed load.lua
	loadLua    string
	loadScript = redis.NewScript(loadLua)

	//go:embed held.lua
	heldLua    string
	heldScript = redis.NewScript(heldLua)

	//go:embed remaining.lua
	remainingLua    string
	remainingScript = redis.NewScript(remainingLua)

	//go:embed stats.lua
	statsLua    string
	statsScript = redis.NewScript(statsLua)

	//go:embed scan.lua
	scanLua    string
	scanScript = redis.NewScript(scanLua)

	//go:embed lookup.lua
	lookupLua    string
	lookupScript = redis.NewScript(lookupLua)

	//go:embed ids.lua
	idsLua    string
	idsScript = redis.NewScript(idsLua)

	//go:embed freeze.lua
	freezeLua    string
	freezeScript = redis.NewScript(freezeLua)

	//go:embed rebuild.lua
	rebuildLua    string
	rebuildScript = redis.NewScript(rebuildLua)
)
