package stock

import (
	_ "embed" // for the go:embed scripts below

	"github.com/redis/go-redis/v9"
)

// Each script is one .lua file next to this one; its header lists KEYS, ARGV
// and the reply, whose codes replycodes.go names for the Go side. They run through redis.Script.Run: EVALSHA, then EVAL when
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

	//go:embed layout.lua
	layoutLua    string
	layoutScript = redis.NewScript(layoutLua)

	//go:embed directory.lua
	directoryLua    string
	directoryScript = redis.NewScript(directoryLua)

	//go:embed drop.lua
	dropLua    string
	dropScript = redis.NewScript(dropLua)

	//go:embed probe.lua
	probeLua    string
	probeScript = redis.NewScript(probeLua)

	//go:embed give.lua
	giveLua    string
	giveScript = redis.NewScript(giveLua)

	//go:embed credit.lua
	creditLua    string
	creditScript = redis.NewScript(creditLua)

	//go:embed settle.lua
	settleLua    string
	settleScript = redis.NewScript(settleLua)

	//go:embed adjust.lua
	adjustLua    string
	adjustScript = redis.NewScript(adjustLua)

	//go:embed adjlog.lua
	adjlogLua    string
	adjlogScript = redis.NewScript(adjlogLua)

	//go:embed pending.lua
	pendingLua    string
	pendingScript = redis.NewScript(pendingLua)

	//go:embed reserve_lines.lua
	reserveLinesLua    string
	reserveLinesScript = redis.NewScript(reserveLinesLua)

	//go:embed vload.lua
	vloadLua    string
	vloadScript = redis.NewScript(vloadLua)

	//go:embed vheld.lua
	vheldLua    string
	vheldScript = redis.NewScript(vheldLua)

	//go:embed vstock.lua
	vstockLua    string
	vstockScript = redis.NewScript(vstockLua)

	//go:embed extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)

	//go:embed group_take.lua
	groupTakeLua    string
	groupTakeScript = redis.NewScript(groupTakeLua)

	//go:embed group_give.lua
	groupGiveLua    string
	groupGiveScript = redis.NewScript(groupGiveLua)

	//go:embed group_rebuild.lua
	groupRebuildLua    string
	groupRebuildScript = redis.NewScript(groupRebuildLua)

	//go:embed group_freeze.lua
	groupFreezeLua    string
	groupFreezeScript = redis.NewScript(groupFreezeLua)

	//go:embed group_scan.lua
	groupScanLua    string
	groupScanScript = redis.NewScript(groupScanLua)
)
