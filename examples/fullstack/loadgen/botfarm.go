package main

import (
	"context"
	"fmt"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// botFarmServer readies the embedded server for -botfarm: the clients'
// addresses travel in X-Forwarded-For, so it trusts this process.
func botFarmServer(cl *cmdline, cfg *app.Config) {
	if cl.botfarm > 0 && len(cfg.TrustedProxies) == 0 {
		cfg.TrustedProxies = []string{"127.0.0.1", "::1"}
	}
}

// runBotFarm is -botfarm: bots race humans for the stock (load.BotFarm).
func runBotFarm(ctx context.Context, bots int, lc load.Config) (int, error) {
	if bots >= lc.Users {
		return 0, fmt.Errorf("botfarm: %d bots leave no humans among %d users", bots, lc.Users)
	}
	rep, err := load.BotFarm(ctx, load.BotFarmConfig{Target: lc.Target, Humans: lc.Users - bots, Bots: bots, Concurrency: lc.Concurrency})
	if err != nil {
		return 0, err
	}
	fmt.Print(rep)
	return 0, nil
}
