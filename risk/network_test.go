package risk

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBlacklistNetworkBans: a KindIP ban of a network (CIDR) refuses
// every address in it, IPv4 and IPv6, and no address outside it; the
// ban is listed, reported by Banned and lifted by Remove like an
// address's.
func TestBlacklistNetworkBans(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: newFakeClock()})
		require.NoError(t, err)
		ban, err := bl.AddFor(bg, KindIP, "203.0.113.77/24", "manual", time.Hour)
		require.NoError(t, err)
		assert.Equal(t, "203.0.113.0/24", ban.ID, "masked")
		ban, err = bl.Add(bg, KindIP, "2001:DB8:1:2:aaaa::1/64", "")
		require.NoError(t, err)
		assert.Equal(t, "2001:db8:1:2::/64", ban.ID)
		assert.Equal(t, time.Minute, ban.Duration, "escalates like any ban")

		for _, c := range []struct {
			ip     string
			denied bool
		}{
			{"203.0.113.1", true},
			{"203.0.113.254", true},
			{"::ffff:203.0.113.9", true},
			{"203.0.112.255", false},
			{"203.0.114.0", false},
			{"2001:db8:1:2::1", true},
			{"2001:db8:1:2:ffff:ffff:ffff:ffff", true},
			{"2001:db8:1:3::1", false},
			{"2001:db8:1:1:ffff::1", false},
		} {
			dec, err := bl.Check(bg, Subject{UserID: "u1", IP: netip.MustParseAddr(c.ip), DeviceID: "d1"})
			require.NoError(t, err)
			if c.denied {
				assert.Equal(t, Deny, dec.Action, c.ip)
				assert.Equal(t, ReasonIPBlacklisted, dec.Reason, c.ip)
				assert.Positive(t, dec.RetryAfter, c.ip)
			} else {
				assert.Equal(t, Allow, dec.Action, c.ip)
			}
		}

		bans, next, err := bl.List(bg, KindIP, "", 10)
		require.NoError(t, err)
		assert.Empty(t, next)
		assert.Equal(t, []string{"2001:db8:1:2::/64", "203.0.113.0/24"}, banIDs(bans))
		_, banned, err := bl.Banned(bg, KindIP, "203.0.113.0/24")
		require.NoError(t, err)
		assert.True(t, banned)

		require.NoError(t, bl.Remove(bg, KindIP, "203.0.113.0/24"))
		dec, err := bl.Check(bg, Subject{IP: netip.MustParseAddr("203.0.113.1")})
		require.NoError(t, err)
		assert.Equal(t, Allow, dec.Action, "lifted")
		require.NoError(t, bl.Reset(bg, KindIP, "2001:db8:1:2::/64"))
		n, err := rdb.Exists(bg, banKey(prefix, KindIP, "2001:db8:1:2::/64"), offenceKey(prefix, KindIP, "2001:db8:1:2::/64")).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "reset deletes both keys")
		bans, _, err = bl.List(bg, KindIP, "", 10)
		require.NoError(t, err)
		assert.Empty(t, bans)
	})
}

// TestBlacklistNetworkIDs: networks are canonical (masked, IPv4-mapped
// ones as IPv4, a full-length one is its address), a length the blacklist
// does not look up cannot be banned (it would never be enforced), and
// the lengths are configurable.
func TestBlacklistNetworkIDs(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{})
	require.NoError(t, err)
	for in, want := range map[string]string{
		"10.1.2.3/24":          "10.1.2.0/24",
		"10.1.2.3/32":          "10.1.2.3",
		"::ffff:10.1.2.3/120":  "10.1.2.0/24",
		"2001:db8::1/128":      "2001:db8::1",
		"2001:0db8:0:0:1::/64": "2001:db8::/64",
	} {
		ban, err := bl.AddFor(bg, KindIP, in, "", time.Hour)
		require.NoError(t, err, in)
		assert.Equal(t, want, ban.ID, in)
	}
	dec, err := bl.Check(bg, Subject{IP: netip.MustParseAddr("2001:db8::1")})
	require.NoError(t, err)
	assert.Equal(t, Deny, dec.Action, "a /128 ban is the address ban")
	for _, bad := range []string{"10.1.2.3/16", "2001:db8::/48", "10.1.2.3/33", "10.1.2.3/", "x/24", "2001:db8::/64%eth0"} {
		_, err := bl.AddFor(bg, KindIP, bad, "", time.Hour)
		assert.ErrorIs(t, err, ErrInvalidArgument, bad)
	}

	// Other lengths: /16 and /48 looked up, /24 and /64 no longer.
	bl2, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: "b2:", IPv4Prefixes: []int{16, 32}, IPv6Prefixes: []int{48}})
	require.NoError(t, err)
	_, err = bl2.AddFor(bg, KindIP, "10.1.0.0/16", "", time.Hour)
	require.NoError(t, err)
	_, err = bl2.AddFor(bg, KindIP, "10.2.2.0/24", "", time.Hour)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	dec, err = bl2.Check(bg, Subject{IP: netip.MustParseAddr("10.1.200.1")})
	require.NoError(t, err)
	assert.Equal(t, Deny, dec.Action)
	// Off: a non-nil empty list.
	bl3, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: "b3:", IPv4Prefixes: []int{}})
	require.NoError(t, err)
	_, err = bl3.AddFor(bg, KindIP, "10.1.2.0/24", "", time.Hour)
	assert.ErrorIs(t, err, ErrInvalidArgument)

	for _, cfg := range []BlacklistConfig{
		{IPv4Prefixes: []int{0}}, {IPv4Prefixes: []int{33}}, {IPv6Prefixes: []int{129}},
		{IPv6Prefixes: []int{8, 16, 24, 32, 40}},
	} {
		_, err := NewBlacklist(rdb, cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, fmt.Sprint(cfg))
	}
}

// TestBlacklistCheckReadsExactKeys: a check reads one exact key per
// subject (user, address, each configured network, device), however many
// bans exist: the lookup is O(prefix lengths), not a scan of the bans.
func TestBlacklistCheckReadsExactKeys(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{IPv6Prefixes: []int{64, 48}})
	require.NoError(t, err)
	for i := range 200 {
		_, err := bl.AddFor(bg, KindIP, fmt.Sprintf("2001:db8:%x::/48", i+1), "", time.Hour)
		require.NoError(t, err)
	}
	items, n := bl.banItems(Subject{UserID: "u1", IP: netip.MustParseAddr("2001:db8:ffff:1::9"), DeviceID: "d1"})
	var got []string
	for _, it := range items[:n] {
		got = append(got, string(it.kind)+":"+it.id)
	}
	assert.Equal(t, []string{"u:u1", "ip:2001:db8:ffff:1::9", "ip:2001:db8:ffff:1::/64", "ip:2001:db8:ffff::/48", "d:d1"}, got)
	items, n = bl.banItems(Subject{IP: netip.MustParseAddr("::ffff:192.0.2.1")})
	assert.Equal(t, []banItem{{KindIP, "192.0.2.1"}, {KindIP, "192.0.2.0/24"}}, items[:n])
}

// TestAutoBanIPv6Network: a Behaviour auto-ban with KindIP bans an IPv6
// address's /64 (a client that rotates through its /64 stays banned) and
// an IPv4 address alone; with KindDevice it bans the device too.
func TestAutoBanIPv6Network(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: newFakeClock()})
		require.NoError(t, err)
		beh, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Minute, FlagAt: 1, DenyAt: 1, KeyPrefix: prefix,
			AutoBlacklist: bl, AutoBlacklistKinds: []Kind{KindUser, KindDevice, KindIP}})
		require.NoError(t, err)
		c, err := NewChecker([]Rule{bl, beh})
		require.NoError(t, err)
		s := Subject{UserID: "bot1", IP: netip.MustParseAddr("2001:db8:5:6::1"), DeviceID: "emu-1"}
		for range 2 {
			_, err := c.Check(bg, s)
			require.NoError(t, err)
		}
		for _, k := range []struct {
			kind Kind
			id   string
		}{{KindUser, "bot1"}, {KindDevice, "emu-1"}, {KindIP, "2001:db8:5:6::/64"}} {
			ttl, err := rdb.PTTL(bg, banKey(prefix, k.kind, k.id)).Result()
			require.NoError(t, err)
			assert.Equal(t, time.Minute, ttl.Round(time.Second), "%s:%s banned", k.kind, k.id)
		}
		// Another account on another address of the /64, another device.
		dec, err := c.Check(bg, Subject{UserID: "bot2", IP: netip.MustParseAddr("2001:db8:5:6:dead:beef::2"), DeviceID: "emu-2"})
		require.NoError(t, err)
		assert.Equal(t, Deny, dec.Action)
		assert.Equal(t, ReasonIPBlacklisted, dec.Reason)

		s4 := Subject{UserID: "bot3", IP: netip.MustParseAddr("198.51.100.7")}
		for range 2 {
			_, err := c.Check(bg, s4)
			require.NoError(t, err)
		}
		var n int64
		for _, k := range []string{banKey(prefix, KindIP, "198.51.100.7"), banKey(prefix, KindIP, "198.51.100.0/24")} {
			e, err := rdb.Exists(bg, k).Result() // one key a call: on a Cluster they sit in different slots
			require.NoError(t, err)
			n += e
		}
		assert.Equal(t, int64(1), n, "an IPv4 address is banned alone")
	})
	rdb, _ := testenv.Miniredis(t)
	_, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Minute, FlagAt: 1, DenyAt: 1, AutoBlacklistKinds: []Kind{"x"}})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}
