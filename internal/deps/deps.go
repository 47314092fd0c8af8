//go:build tools

// Package deps pins modules the packages are about to use while they are
// being written, so go mod tidy keeps them. Removed once every one is imported.
package deps

import (
	_ "github.com/IBM/sarama"
	_ "github.com/chromedp/chromedp"
	_ "github.com/coder/websocket"
	_ "github.com/glebarez/sqlite"
	_ "github.com/go-redis/redis_rate/v10"
	_ "github.com/mojocn/base64Captcha"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/sony/gobreaker/v2"
	_ "github.com/sony/sonyflake"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "golang.org/x/time/rate"
	_ "gorm.io/driver/mysql"
)
