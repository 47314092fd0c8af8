package risk

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeviceBindRaceAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		d, err := NewDeviceBinder(rdb, DeviceBinderConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		for round := 0; round < 5; round++ {
			device := fmt.Sprint("dev-", round)
			const perUser = 25
			var newBinds, conflicts, same atomic.Int64
			owners := sync.Map{}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, user := range []string{"alice", "bob"} {
				for i := 0; i < perUser; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						b, err := d.Bind(bg, device, user)
						if !assert.NoError(t, err) {
							return
						}
						owners.Store(b.Owner, true)
						switch {
						case b.New:
							newBinds.Add(1)
							assert.Equal(t, user, b.Owner)
						case b.Conflict:
							conflicts.Add(1)
							assert.NotEqual(t, user, b.Owner)
						default:
							same.Add(1)
							assert.Equal(t, user, b.Owner)
						}
					}()
				}
			}
			close(start)
			wg.Wait()
			assert.EqualValues(t, 1, newBinds.Load(), "exactly one binds")
			assert.EqualValues(t, perUser, conflicts.Load(), "every call of the other user conflicts")
			assert.EqualValues(t, perUser-1, same.Load())
			n := 0
			owners.Range(func(any, any) bool { n++; return true })
			assert.Equal(t, 1, n, "everyone saw one owner")
		}
	})
}

func TestDeviceBinder(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		cfg      DeviceBinderConfig
		conflict Action
	}{
		{"deny by default", DeviceBinderConfig{}, Deny},
		{"challenge", DeviceBinderConfig{ChallengeConflict: true}, Challenge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rdb, m := testenv.Miniredis(t)
			cfg := c.cfg
			cfg.BindTTL = time.Hour
			d, err := NewDeviceBinder(rdb, cfg)
			require.NoError(t, err)
			dec, err := d.Check(bg, Subject{UserID: "alice", DeviceID: "phone"})
			require.NoError(t, err)
			assert.Equal(t, Allow, dec.Action)
			dec, err = d.Check(bg, Subject{UserID: "alice", DeviceID: "phone"})
			require.NoError(t, err)
			assert.Equal(t, Allow, dec.Action, "owner keeps using it")
			dec, err = d.Check(bg, Subject{UserID: "bob", DeviceID: "phone"})
			require.NoError(t, err)
			assert.Equal(t, c.conflict, dec.Action)
			assert.Equal(t, ReasonDeviceShared, dec.Reason)
			dec, err = d.Check(bg, Subject{UserID: "bob"})
			require.NoError(t, err)
			assert.Equal(t, Allow, dec.Action, "no device: skipped")
			dec, err = d.Check(bg, Subject{DeviceID: "phone"})
			require.NoError(t, err)
			assert.Equal(t, Allow, dec.Action, "no user: skipped")

			// Refresh on owner use: after 50m + use + 50m it still belongs to alice.
			m.FastForward(50 * time.Minute)
			_, err = d.Bind(bg, "phone", "alice")
			require.NoError(t, err)
			m.FastForward(50 * time.Minute)
			b, err := d.Bind(bg, "phone", "bob")
			require.NoError(t, err)
			assert.True(t, b.Conflict)
			assert.Equal(t, "alice", b.Owner)
			// Expiry frees the device.
			m.FastForward(61 * time.Minute)
			b, err = d.Bind(bg, "phone", "bob")
			require.NoError(t, err)
			assert.True(t, b.New)
			// Unbind frees it too.
			require.NoError(t, d.Unbind(bg, "phone"))
			b, err = d.Bind(bg, "phone", "carol")
			require.NoError(t, err)
			assert.True(t, b.New)
			assert.Equal(t, "carol", b.Owner)
		})
	}
}

func TestDeviceBinderNoRefresh(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	d, err := NewDeviceBinder(rdb, DeviceBinderConfig{BindTTL: time.Hour, FixedExpiry: true})
	require.NoError(t, err)
	_, err = d.Bind(bg, "phone", "alice")
	require.NoError(t, err)
	m.FastForward(50 * time.Minute)
	_, err = d.Bind(bg, "phone", "alice")
	require.NoError(t, err)
	m.FastForward(11 * time.Minute)
	b, err := d.Bind(bg, "phone", "bob")
	require.NoError(t, err)
	assert.True(t, b.New, "binding expired at creation + TTL")
}

func TestDeviceBinderErrors(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	_, err := NewDeviceBinder(nil, DeviceBinderConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	for _, ttl := range []time.Duration{-time.Hour, time.Microsecond} {
		_, err = NewDeviceBinder(rdb, DeviceBinderConfig{BindTTL: ttl})
		assert.ErrorIs(t, err, ErrInvalidConfig, "%v", ttl)
	}
	d, err := NewDeviceBinder(rdb, DeviceBinderConfig{})
	require.NoError(t, err)
	_, err = d.Bind(bg, "", "u")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = d.Bind(bg, "d", "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorIs(t, d.Unbind(bg, ""), ErrInvalidArgument)
	// A non-string value (someone wrote a hash there) is an error, not a panic.
	m.HSet("seckill:risk:{d:weird}:owner", "f", "v")
	_, err = d.Bind(bg, "weird", "u")
	assert.Error(t, err)
	m.SetError("ERR boom")
	_, err = d.Check(bg, Subject{UserID: "u", DeviceID: "d"})
	assert.Error(t, err)
	assert.Error(t, d.Unbind(bg, "d"))
}
