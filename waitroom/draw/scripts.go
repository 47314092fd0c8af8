package draw

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Draw scripts; every script's header lists its KEYS, ARGV and return
// codes. None reads the time.
var (
	//go:embed open.lua
	openLua string
	//go:embed enter.lua
	enterLua string
	//go:embed close.lua
	closeLua string
	//go:embed reveal.lua
	revealLua string
	//go:embed write.lua
	writeLua string
	//go:embed replace.lua
	replaceLua string
	//go:embed outcome.lua
	outcomeLua string

	openScript    = redis.NewScript(openLua)
	enterScript   = redis.NewScript(enterLua)
	closeScript   = redis.NewScript(closeLua)
	revealScript  = redis.NewScript(revealLua)
	writeScript   = redis.NewScript(writeLua)
	replaceScript = redis.NewScript(replaceLua)
	outcomeScript = redis.NewScript(outcomeLua)
)
