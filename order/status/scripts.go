package status

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed result_set.lua
var resultSetLua string

var (
	resultSetScript = redis.NewScript(resultSetLua)
)
