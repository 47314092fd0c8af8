package redislimit

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed sliding_window.lua
	slidingWindowLua string
	//go:embed sliding_window_refund.lua
	slidingWindowRefundLua string
	//go:embed gcra.lua
	gcraLua string

	slidingWindowScript       = redis.NewScript(slidingWindowLua)
	slidingWindowRefundScript = redis.NewScript(slidingWindowRefundLua)
	gcraScript                = redis.NewScript(gcraLua)
)
