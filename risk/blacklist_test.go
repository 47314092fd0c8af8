package risk

import (
	"net/netip"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBlacklistEscalation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    BlacklistConfig
		expect []time.Duration
	}{
		{"default doubling to 24h", BlacklistConfig{}, []time.Duration{
			time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute}},
		{"capped", BlacklistConfig{BanBase: time.Minute, BanMax: 5 * time.Minute, BanFactor: 2}, []time.Duration{
			time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}},
		{"factor 3", BlacklistConfig{BanBase: 10 * time.Second, BanMax: time.Hour, BanFactor: 3}, []time.Duration{
			10 * time.Second, 30 * time.Second, 90 * time.Second, 270 * time.Second}},
		{"factor 1 = fixed", BlacklistConfig{BanBase: time.Minute, BanMax: time.Hour, BanFactor: 1}, []time.Duration{
			time.Minute, time.Minute, time.Minute}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rdb, m := testenv.Miniredis(t)
			clk := newFakeClock()
			cfg := c.cfg
			cfg.Clock = clk
			bl, err := NewBlacklist(rdb, cfg)
			require.NoError(t, err)
			for i, want := range c.expect {
				ban, err := bl.Add(bg, KindUser, "u1", "scalping")
				require.NoError(t, err)
				assert.EqualValues(t, i+1, ban.Offence)
				assert.Equal(t, want, ban.Duration, "offence %d", i+1)
				assert.True(t, clk.Now().Add(want).Equal(ban.Until), "until")
				assert.Equal(t, want, m.TTL("seckill:risk:{bl:u:u1}:ban"))

				got, banned, err := bl.Banned(bg, KindUser, "u1")
				require.NoError(t, err)
				require.True(t, banned)
				assert.Equal(t, "scalping", got.Reason)
				assert.EqualValues(t, i+1, got.Offence)

				// Serve the ban, then offend again.
				m.FastForward(want)
				clk.Add(want)
				_, banned, err = bl.Banned(bg, KindUser, "u1")
				require.NoError(t, err)
				assert.False(t, banned, "ban of offence %d expired", i+1)
			}
		})
	}
}

func TestBlacklistMemoryAndRemove(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{BanBase: time.Minute, BanMax: time.Hour, BanFactor: 2, OffenceMemory: time.Hour})
	require.NoError(t, err)

	ban, err := bl.Add(bg, KindDevice, "d1", "")
	require.NoError(t, err)
	assert.Equal(t, ReasonDeviceBlacklisted, ban.Reason, "default reason")
	ban, err = bl.Add(bg, KindDevice, "d1", "x")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, ban.Duration)

	// Offences are forgotten after the memory.
	m.FastForward(61 * time.Minute)
	ban, err = bl.Add(bg, KindDevice, "d1", "x")
	require.NoError(t, err)
	assert.EqualValues(t, 1, ban.Offence)
	assert.Equal(t, time.Minute, ban.Duration)

	// Remove lifts the ban but keeps the history.
	require.NoError(t, bl.Remove(bg, KindDevice, "d1"))
	_, banned, err := bl.Banned(bg, KindDevice, "d1")
	require.NoError(t, err)
	assert.False(t, banned)
	ban, err = bl.Add(bg, KindDevice, "d1", "x")
	require.NoError(t, err)
	assert.EqualValues(t, 2, ban.Offence, "history kept by Remove")

	// Reset forgets it.
	require.NoError(t, bl.Reset(bg, KindDevice, "d1"))
	ban, err = bl.Add(bg, KindDevice, "d1", "x")
	require.NoError(t, err)
	assert.EqualValues(t, 1, ban.Offence)

	// A longer ban is never shortened by a later shorter one.
	ban, err = bl.AddFor(bg, KindIP, "203.0.113.1", "manual", 10*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 10*time.Hour, ban.Duration)
	ban, err = bl.Add(bg, KindIP, "203.0.113.1", "auto")
	require.NoError(t, err)
	assert.EqualValues(t, 2, ban.Offence)
	assert.Equal(t, 10*time.Hour, ban.Duration)
	assert.Equal(t, 10*time.Hour, m.TTL("seckill:risk:{bl:ip:203.0.113.1}:ban"))

	// Argument errors.
	_, err = bl.Add(bg, "x", "1", "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = bl.Add(bg, KindUser, "", "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = bl.AddFor(bg, KindUser, "1", "", 0)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorIs(t, bl.Remove(bg, KindUser, ""), ErrInvalidArgument)
	assert.ErrorIs(t, bl.Reset(bg, "", "1"), ErrInvalidArgument)
	_, _, err = bl.Banned(bg, KindUser, "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	for _, cfg := range []BlacklistConfig{
		{BanBase: -time.Second}, {BanBase: time.Microsecond}, {BanBase: time.Hour, BanMax: time.Minute},
		{BanFactor: -1}, {OffenceMemory: -time.Hour},
	} {
		_, err = NewBlacklist(rdb, cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
	}
	_, err = NewBlacklist(nil, BlacklistConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestBlacklistCheckAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		clk := newFakeClock()
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: clk})
		require.NoError(t, err)
		ip := netip.MustParseAddr("203.0.113.7")
		ip6 := netip.MustParseAddr("2001:db8::7")
		_, err = bl.Add(bg, KindUser, "bad-user", "")
		require.NoError(t, err)
		_, err = bl.AddFor(bg, KindIP, ip.String(), "", time.Hour)
		require.NoError(t, err)
		_, err = bl.Add(bg, KindIP, ip6.String(), "")
		require.NoError(t, err)
		_, err = bl.Add(bg, KindDevice, "bad-dev", "")
		require.NoError(t, err)

		clean := netip.MustParseAddr("198.51.100.1")
		cases := []struct {
			name   string
			s      Subject
			reason string
		}{
			{"nothing set", Subject{}, ""},
			{"clean all three", Subject{UserID: "ok", IP: clean, DeviceID: "ok"}, ""},
			{"user only", Subject{UserID: "bad-user"}, ReasonUserBlacklisted},
			{"ip only", Subject{IP: ip}, ReasonIPBlacklisted},
			{"ipv6", Subject{UserID: "ok", IP: ip6}, ReasonIPBlacklisted},
			{"device only", Subject{DeviceID: "bad-dev"}, ReasonDeviceBlacklisted},
			{"clean user, banned ip", Subject{UserID: "ok", IP: ip, DeviceID: "ok"}, ReasonIPBlacklisted},
			{"clean user, banned device", Subject{UserID: "ok", IP: clean, DeviceID: "bad-dev"}, ReasonDeviceBlacklisted},
			{"user wins precedence", Subject{UserID: "bad-user", IP: ip, DeviceID: "bad-dev"}, ReasonUserBlacklisted},
			{"ip before device", Subject{UserID: "ok", IP: ip, DeviceID: "bad-dev"}, ReasonIPBlacklisted},
		}
		denials := 0
		for _, c := range cases {
			d, err := bl.Check(bg, c.s)
			require.NoError(t, err, c.name)
			if c.reason == "" {
				assert.Equal(t, Allow, d.Action, c.name)
				continue
			}
			denials++
			assert.Equal(t, Deny, d.Action, c.name)
			assert.Equal(t, c.reason, d.Reason, c.name)
			assert.False(t, d.Throttled)
			assert.Greater(t, d.RetryAfter, time.Duration(0), c.name)
		}
		assert.Equal(t, 8, denials)

		d, err := bl.Check(bg, Subject{IP: ip})
		require.NoError(t, err)
		assert.Equal(t, time.Hour, d.RetryAfter)
		require.NoError(t, bl.Remove(bg, KindIP, ip.String()))
		d, err = bl.Check(bg, Subject{IP: ip})
		require.NoError(t, err)
		assert.Equal(t, Allow, d.Action, "explicit remove lifts the IP ban")
	})
}

func TestBlacklistHandWrittenValue(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{})
	require.NoError(t, err)
	// An operator bans by hand with redis-cli: still a ban.
	require.NoError(t, m.Set("seckill:risk:{bl:u:7}:ban", "1"))
	d, err := bl.Check(bg, Subject{UserID: "7", DeviceID: "x"})
	require.NoError(t, err)
	assert.Equal(t, Deny, d.Action)
	d, err = bl.Check(bg, Subject{UserID: "7"})
	require.NoError(t, err)
	assert.Equal(t, Deny, d.Action)
	_, banned, err := bl.Banned(bg, KindUser, "7")
	require.NoError(t, err)
	assert.True(t, banned)
}

func TestBlacklistDown(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{})
	require.NoError(t, err)
	m.SetError("ERR boom")
	_, err = bl.Check(bg, Subject{UserID: "1"})
	assert.Error(t, err)
	_, err = bl.Check(bg, Subject{UserID: "1", DeviceID: "d"})
	assert.Error(t, err)
	_, err = bl.Add(bg, KindUser, "1", "")
	assert.Error(t, err)
	_, _, err = bl.Banned(bg, KindUser, "1")
	assert.Error(t, err)
	assert.Error(t, bl.Remove(bg, KindUser, "1"))
	assert.Error(t, bl.Reset(bg, KindUser, "1"))
}

func TestBlacklistEscalationAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, BanBase: time.Minute, BanMax: 10 * time.Minute, BanFactor: 2})
		require.NoError(t, err)
		want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
		for i, w := range want {
			ban, err := bl.Add(bg, KindUser, "esc", "r")
			require.NoError(t, err)
			assert.EqualValues(t, i+1, ban.Offence)
			assert.Equal(t, w, ban.Duration, "offence %d", i+1)
			ttl, err := rdb.PTTL(bg, banKey(prefix, KindUser, "esc")).Result()
			require.NoError(t, err)
			assert.InDelta(t, float64(w), float64(ttl), float64(2*time.Second))
			got, banned, err := bl.Banned(bg, KindUser, "esc")
			require.NoError(t, err)
			require.True(t, banned)
			assert.Equal(t, "r", got.Reason)
			assert.EqualValues(t, i+1, got.Offence)
		}
	})
}

func TestBlacklistIPCanonical(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{})
	require.NoError(t, err)
	_, err = bl.AddFor(bg, KindIP, "::ffff:203.0.113.5", "manual", time.Hour)
	require.NoError(t, err)
	_, err = bl.AddFor(bg, KindIP, "2001:DB8:0::0:1", "manual", time.Hour)
	require.NoError(t, err)
	for _, ip := range []string{"203.0.113.5", "::ffff:203.0.113.5", "2001:db8::1", "fe80::1%eth0"} {
		d, err := bl.Check(bg, Subject{IP: netipMust(ip)})
		require.NoError(t, err)
		want := Deny
		if ip == "fe80::1%eth0" {
			want = Allow
		}
		assert.Equal(t, want, d.Action, ip)
	}
	_, banned, err := bl.Banned(bg, KindIP, "[2001:db8::1]:443")
	require.NoError(t, err)
	assert.True(t, banned)
	require.NoError(t, bl.Remove(bg, KindIP, "203.0.113.5"))
	_, banned, err = bl.Banned(bg, KindIP, "::ffff:203.0.113.5")
	require.NoError(t, err)
	assert.False(t, banned)
	_, err = bl.Add(bg, KindIP, "not-an-ip", "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// Bans only ever grow: a later Add/AddFor keeps the longer of the existing
// and the new ban, and a ban key without a TTL (written by hand, or by an
// older version) is permanent and stays permanent.
func TestBlacklistExtendOnlyAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		clk := newFakeClock()
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: clk, BanBase: time.Minute, BanMax: time.Hour, BanFactor: 2})
		require.NoError(t, err)
		pttl := func(id string) time.Duration {
			t.Helper()
			d, err := rdb.PTTL(bg, banKey(prefix, KindUser, id)).Result()
			require.NoError(t, err)
			return d
		}
		const slack = float64(2 * time.Second)

		t.Run("permanent then timed stays permanent", func(t *testing.T) {
			key := banKey(prefix, KindUser, "perm")
			for _, v := range []string{"1", "0|3|manual"} { // by hand; by an older version
				require.NoError(t, rdb.Set(bg, key, v, 0).Err())
				require.Equal(t, time.Duration(-1), pttl("perm"), "no TTL: permanent")

				ban, err := bl.AddFor(bg, KindUser, "perm", "auto", time.Minute)
				require.NoError(t, err)
				assert.True(t, ban.Permanent, v)
				assert.Zero(t, ban.Duration)
				assert.True(t, ban.Until.IsZero())
				assert.Equal(t, time.Duration(-1), pttl("perm"), "AddFor must not put a TTL on a permanent ban (%s)", v)

				ban, err = bl.Add(bg, KindUser, "perm", "auto")
				require.NoError(t, err)
				assert.True(t, ban.Permanent)
				assert.Equal(t, time.Duration(-1), pttl("perm"), "Add must not put a TTL on a permanent ban (%s)", v)

				got, banned, err := bl.Banned(bg, KindUser, "perm")
				require.NoError(t, err)
				require.True(t, banned)
				assert.True(t, got.Permanent)
				assert.True(t, got.Until.IsZero())
				assert.Equal(t, "auto", got.Reason)

				d, err := bl.Check(bg, Subject{UserID: "perm"})
				require.NoError(t, err)
				assert.Equal(t, Deny, d.Action)
				assert.Zero(t, d.RetryAfter, "no end, so no Retry-After")
			}
		})

		t.Run("long then short keeps long", func(t *testing.T) {
			_, err := bl.AddFor(bg, KindUser, "long", "manual", 10*time.Hour)
			require.NoError(t, err)
			ban, err := bl.AddFor(bg, KindUser, "long", "auto", time.Minute)
			require.NoError(t, err)
			assert.False(t, ban.Permanent)
			assert.InDelta(t, float64(10*time.Hour), float64(ban.Duration), slack)
			assert.InDelta(t, float64(10*time.Hour), float64(pttl("long")), slack)
			ban, err = bl.Add(bg, KindUser, "long", "auto") // escalated: 2m
			require.NoError(t, err)
			assert.InDelta(t, float64(10*time.Hour), float64(ban.Duration), slack)
			assert.InDelta(t, float64(10*time.Hour), float64(pttl("long")), slack)
		})

		t.Run("short then long extends", func(t *testing.T) {
			ban, err := bl.Add(bg, KindUser, "short", "auto")
			require.NoError(t, err)
			assert.Equal(t, time.Minute, ban.Duration)
			ban, err = bl.AddFor(bg, KindUser, "short", "manual", 10*time.Hour)
			require.NoError(t, err)
			assert.Equal(t, 10*time.Hour, ban.Duration)
			assert.True(t, clk.Now().Add(10*time.Hour).Equal(ban.Until))
			assert.InDelta(t, float64(10*time.Hour), float64(pttl("short")), slack)
			got, _, err := bl.Banned(bg, KindUser, "short")
			require.NoError(t, err)
			assert.Equal(t, "manual", got.Reason)
			assert.True(t, ban.Until.Equal(got.Until))
		})
	})
}

// Concurrent Adds of different lengths end with the longest: the
// read-TTL-then-set is one script, so no shorter ban can land last.
func TestBlacklistConcurrentAddKeepsLongestAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		const n = 24
		errs := make(chan error, n)
		for i := range n {
			go func() {
				d := time.Duration(i+1) * time.Minute
				if i == n/2 {
					d = 10 * time.Hour
				}
				_, err := bl.AddFor(bg, KindDevice, "race", "r", d)
				errs <- err
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		ttl, err := rdb.PTTL(bg, banKey(prefix, KindDevice, "race")).Result()
		require.NoError(t, err)
		assert.InDelta(t, float64(10*time.Hour), float64(ttl), float64(5*time.Second))
		got, banned, err := bl.Banned(bg, KindDevice, "race")
		require.NoError(t, err)
		require.True(t, banned)
		assert.EqualValues(t, n, got.Offence)
	})
}
