package app

import (
	"slices"
	"testing"
)

func TestParseSentinel(t *testing.T) {
	m, a, err := parseSentinel("seckill@127.0.0.1:26379, 127.0.0.1:26380")
	if err != nil || m != "seckill" || !slices.Equal(a, []string{"127.0.0.1:26379", "127.0.0.1:26380"}) {
		t.Errorf("parseSentinel = %q, %v, %v", m, a, err)
	}
	for _, bad := range []string{"127.0.0.1:26379", "@127.0.0.1:26379", "m@", "m@nohostport"} {
		if _, _, err := parseSentinel(bad); err == nil {
			t.Errorf("parseSentinel(%q): no error", bad)
		}
	}
}

func TestConfigSentinel(t *testing.T) {
	c := DefaultConfig()
	c.RedisSentinel = "m@127.0.0.1:26379"
	if err := c.Validate(); err != nil {
		t.Errorf("-redis-sentinel alone: %v", err)
	}
	if c.Embedded() {
		t.Error("-redis-sentinel set: Embedded() = true")
	}
	c.RedisAddr = "127.0.0.1:6379"
	if err := c.Validate(); err == nil {
		t.Error("-redis-sentinel with -redis: no error")
	}
	c = DefaultConfig()
	c.RedisSentinel = "no-master-name"
	if err := c.Validate(); err == nil {
		t.Error("malformed -redis-sentinel: no error")
	}
}
