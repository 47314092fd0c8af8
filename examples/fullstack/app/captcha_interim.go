package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/mojocn/base64Captcha"
	"github.com/redis/go-redis/v9"
)

// interimCaptcha is a stand-in until package captcha lands: answers live in
// Redis (one GETDEL verifies once), images come from base64Captcha.
// TODO(fullstack): replace with package captcha.
type interimCaptcha struct {
	rdb    redis.UniversalClient
	prefix string
	drv    *base64Captcha.DriverDigit
	ttl    time.Duration
}

func newCaptchaGate(rdb redis.UniversalClient, cfg Config) (captchaGate, error) {
	return &interimCaptcha{rdb: rdb, prefix: cfg.KeyPrefix, drv: base64Captcha.NewDriverDigit(80, 240, 5, 0.5, 40), ttl: 5 * time.Minute}, nil
}

func (c *interimCaptcha) key(id string) string { return c.prefix + "{c:" + id + "}:captcha" }

func (c *interimCaptcha) New(ctx context.Context, user string, image bool) (string, string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	_, q, ans := c.drv.GenerateIdQuestionAnswer()
	img := ""
	if image {
		item, err := c.drv.DrawCaptcha(q)
		if err != nil {
			return "", "", err
		}
		img = item.EncodeB64string()
	}
	if err := c.rdb.Set(ctx, c.key(id), user+":"+ans, c.ttl).Err(); err != nil {
		return "", "", err
	}
	return id, img, nil
}

func (c *interimCaptcha) Verify(ctx context.Context, id, user, answer string) (bool, error) {
	if id == "" || len(id) > 64 || answer == "" {
		return false, nil
	}
	v, err := c.rdb.GetDel(ctx, c.key(id)).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	u, ans, _ := strings.Cut(v, ":")
	return u == user && strings.EqualFold(ans, strings.TrimSpace(answer)), nil
}

func (c *interimCaptcha) Answer(id, user string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, err := c.rdb.Get(ctx, c.key(id)).Result()
	if err != nil {
		return "", false
	}
	u, ans, _ := strings.Cut(v, ":")
	return ans, u == user
}
