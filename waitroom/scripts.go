package waitroom

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Room scripts: lib.lua (shared helpers) is prepended to each; every
// script's header lists its KEYS, ARGV, return codes and source of "now".
var (
	//go:embed lib.lua
	libLua string
	//go:embed configure.lua
	configureLua string
	//go:embed join.lua
	joinLua string
	//go:embed poll.lua
	pollLua string
	//go:embed admit.lua
	admitLua string
	//go:embed done.lua
	doneLua string
	//go:embed check.lua
	checkLua string
	//go:embed pause.lua
	pauseLua string
	//go:embed stats.lua
	statsLua string
	//go:embed reveal.lua
	revealLua string
	//go:embed place.lua
	placeLua string

	configureScript = redis.NewScript(libLua + configureLua)
	joinScript      = redis.NewScript(libLua + joinLua)
	pollScript      = redis.NewScript(libLua + pollLua)
	admitScript     = redis.NewScript(libLua + admitLua)
	doneScript      = redis.NewScript(doneLua)
	checkScript     = redis.NewScript(libLua + checkLua)
	pauseScript     = redis.NewScript(libLua + pauseLua)
	statsScript     = redis.NewScript(libLua + statsLua)
	revealScript    = redis.NewScript(libLua + revealLua)
	placeScript     = redis.NewScript(libLua + placeLua)
)
