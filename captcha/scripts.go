package captcha

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Scripts; each .lua header lists KEYS, ARGV, return codes and time source.
var (
	//go:embed create.lua
	createLua string
	//go:embed verify.lua
	verifyLua string
	//go:embed claim.lua
	claimLua string

	createScript = redis.NewScript(createLua)
	verifyScript = redis.NewScript(verifyLua)
	claimScript  = redis.NewScript(claimLua)
)
