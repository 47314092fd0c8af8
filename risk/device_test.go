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
			assert.Equal(t, Challenge, dec.Action, "no device: challenged by default, never skipped")
			assert.Equal(t, ReasonDeviceMissing, dec.Reason)
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

// TestDeviceMissingIsNotAWayAround: the device is bound to alice; bob is
// refused it with the header, and leaving the header out must not let
// him through silently (today's bypass): challenged by default, denied
// with RequireDevice, flagged with FlagMissing; the fused form decides
// the same.
func TestDeviceMissingIsNotAWayAround(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    DeviceBinderConfig
		action Action
		flags  []string
	}{
		{"default: challenge", DeviceBinderConfig{}, Challenge, nil},
		{"require device: deny", DeviceBinderConfig{RequireDevice: true}, Deny, nil},
		{"flag missing: a signal only", DeviceBinderConfig{FlagMissing: true}, Allow, []string{ReasonDeviceMissing}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
				cfg := c.cfg
				cfg.KeyPrefix = prefix
				d, err := NewDeviceBinder(rdb, cfg)
				require.NoError(t, err)
				dec, err := d.Check(bg, Subject{UserID: "alice", DeviceID: "phone"})
				require.NoError(t, err)
				require.Equal(t, Allow, dec.Action)
				dec, err = d.Check(bg, Subject{UserID: "bob", DeviceID: "phone"})
				require.NoError(t, err)
				require.Equal(t, Deny, dec.Action, "with the header")

				dec, err = d.Check(bg, Subject{UserID: "bob", IP: netipMust("203.0.113.7")})
				require.NoError(t, err)
				assert.Equal(t, c.action, dec.Action, "without the header")
				assert.Equal(t, c.flags, dec.Flags)
				if c.action != Allow {
					assert.Equal(t, ReasonDeviceMissing, dec.Reason)
				}
				chk, err := NewChecker([]Rule{d})
				require.NoError(t, err)
				cd, err := chk.Check(bg, Subject{UserID: "bob"})
				require.NoError(t, err)
				assert.Equal(t, dec.Action, cd.Action, "through a Checker")
				// Nothing was written for bob: the device is still alice's.
				owner, err := rdb.Get(bg, deviceKey(prefix, "phone")).Result()
				require.NoError(t, err)
				assert.Equal(t, "alice", owner)
			})
		})
	}
	_, err := NewDeviceBinder(redis.NewClient(&redis.Options{}), DeviceBinderConfig{RequireDevice: true, FlagMissing: true})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// TestDeviceAutoBlacklist: with AutoBlacklist, each presentation of a
// device by a user other than its owner bans the device, escalating as
// a user's automatic ban (1m, then 2m, ...), and the blacklist then
// refuses it to everyone, its owner too.
func TestDeviceAutoBlacklist(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: newFakeClock()})
		require.NoError(t, err)
		d, err := NewDeviceBinder(rdb, DeviceBinderConfig{KeyPrefix: prefix, AutoBlacklist: bl})
		require.NoError(t, err)
		c, err := NewChecker([]Rule{bl, d})
		require.NoError(t, err)
		dec, err := c.Check(bg, Subject{UserID: "alice", DeviceID: "phone"})
		require.NoError(t, err)
		require.Equal(t, Allow, dec.Action)
		_, banned, err := bl.Banned(bg, KindDevice, "phone")
		require.NoError(t, err)
		require.False(t, banned, "the owner's use bans nothing")

		for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
			dec, err := d.Check(bg, Subject{UserID: fmt.Sprintf("farm%d", i), DeviceID: "phone"})
			require.NoError(t, err)
			assert.Equal(t, Deny, dec.Action)
			assert.Equal(t, ReasonDeviceShared, dec.Reason)
			assert.Equal(t, want, dec.RetryAfter)
			// Counted from Redis: the ban key's TTL and offence.
			ttl, err := rdb.PTTL(bg, banKey(prefix, KindDevice, "phone")).Result()
			require.NoError(t, err)
			assert.InDelta(t, float64(want), float64(ttl), float64(time.Second))
			n, err := rdb.Get(bg, offenceKey(prefix, KindDevice, "phone")).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(i+1), n)
		}
		dec, err = c.Check(bg, Subject{UserID: "alice", DeviceID: "phone"})
		require.NoError(t, err)
		assert.Equal(t, Deny, dec.Action)
		assert.Equal(t, ReasonDeviceBlacklisted, dec.Reason, "banned for its owner too")
		bans, _, err := bl.List(bg, KindDevice, "", 10)
		require.NoError(t, err)
		require.Len(t, bans, 1)
		assert.Equal(t, ReasonDeviceShared, bans[0].Reason)
	})
}
