package risk

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidIDs(t *testing.T) {
	t.Parallel()
	max := strings.Repeat("a", maxIDLen)
	for _, c := range []struct {
		id           string
		user, device bool
	}{
		{"42", true, true},
		{"0b5e6f2a-3c1d-4e8f-9a7b-2c4d6e8f0a1b", true, true}, // UUID
		{"android:1a2b.C3_d-4", true, true},
		{max, true, true},
		{max + "a", false, false},
		{"", false, false},
		{"alice@example.com", true, false},
		{"user name", true, false},
		{"a{b}", false, false},
		{"a}", false, false},
		{"bXk+Zz0/", true, false}, // base64 std: '+' and '/'
		{"é", true, false},
		{"a\x00b", true, false},
		{"a\nb", true, false},
	} {
		assert.Equal(t, c.user, ValidUserID(c.id), "user %.20q", c.id)
		assert.Equal(t, c.device, ValidDeviceID(c.id), "device %.20q", c.id)
	}
}

// redisFootprint counts the keys under prefix and their bytes (key length +
// MEMORY USAGE), reading the server directly (every master of a Cluster).
func redisFootprint(t *testing.T, rdb redis.UniversalClient, prefix string) (keys int, bytes int64) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	count := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			n, err := c.MemoryUsage(ctx, k).Result()
			if err != nil && err != redis.Nil {
				return err
			}
			mu.Lock()
			keys++
			bytes += int64(len(k)) + n
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return count(ctx, n) })
	} else {
		err = count(ctx, rdb)
	}
	require.NoError(t, err)
	return keys, bytes
}

// Invalid user and device IDs are refused before they become Redis keys or
// values: 8 requests with 512 KiB device IDs used to leave 4 MiB of keys
// that lived for the 30-day bind TTL.
func TestInvalidIDsWriteNothingAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		p := prefix
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: p})
		require.NoError(t, err)
		beh, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Minute, FlagAt: 5, DenyAt: 10, KeyPrefix: p, AutoBlacklist: bl})
		require.NoError(t, err)
		dev, err := NewDeviceBinder(rdb, DeviceBinderConfig{KeyPrefix: p})
		require.NoError(t, err)
		sessions, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: p})
		require.NoError(t, err)
		// Device rule alone first, as an app that binds without a blacklist.
		devOnly, err := NewChecker([]Rule{dev})
		require.NoError(t, err)
		chk, err := NewChecker([]Rule{bl, beh, dev})
		require.NoError(t, err)
		mw, err := NewMiddleware(chk)
		require.NoError(t, err)

		keys0, bytes0 := redisFootprint(t, rdb, prefix)
		require.Zero(t, keys0)

		big := func(i int) string { return strings.Repeat(string(rune('a'+i)), 512<<10) }
		badDevices := []string{"dev ice", "a{b}", "phone/1", "d\x00", "é", strings.Repeat("d", maxIDLen+1)}
		badUsers := []string{"a{b}", strings.Repeat("u", maxIDLen+1)}

		for i := range 8 {
			_, err := dev.Bind(bg, big(i), "alice")
			assert.ErrorIs(t, err, ErrInvalidArgument)
			if assert.ErrorIs(t, err, ErrInvalidArgument) {
				assert.Less(t, len(err.Error()), 200, "the error does not echo the ID")
			}

			d, err := devOnly.Check(bg, Subject{UserID: "alice", DeviceID: big(i)})
			require.NoError(t, err, "bad input is not an outage")
			assert.Equal(t, Deny, d.Action)
			assert.Equal(t, ReasonInvalidDevice, d.Reason)

			resp := serve(t, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mw(next).ServeHTTP(w, r.WithContext(WithUser(r.Context(), "alice")))
				})
			}, func(r *http.Request) { r.Header.Set("X-Device-ID", big(i)) })
			assert.Equal(t, http.StatusForbidden, resp.status)
			assert.Equal(t, ReasonInvalidDevice, resp.body["reason"])
			assert.False(t, resp.reached)
		}
		for _, id := range badDevices {
			_, err := dev.Bind(bg, id, "alice")
			assert.ErrorIs(t, err, ErrInvalidArgument, "%.20q", id)
			assert.ErrorIs(t, dev.Unbind(bg, id), ErrInvalidArgument)
			_, err = bl.Add(bg, KindDevice, id, "")
			assert.ErrorIs(t, err, ErrInvalidArgument)
			_, err = bl.AddFor(bg, KindDevice, id, "", time.Hour)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			_, _, err = bl.Banned(bg, KindDevice, id)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			for _, c := range []*Checker{devOnly, chk} {
				d, err := c.Check(bg, Subject{UserID: "alice", DeviceID: id})
				require.NoError(t, err)
				assert.Equal(t, Deny, d.Action, "%.20q", id)
				assert.Equal(t, ReasonInvalidDevice, d.Reason)
			}
		}
		for _, id := range append(badUsers, big(0)) {
			_, err := dev.Bind(bg, "phone-1", id)
			assert.ErrorIs(t, err, ErrInvalidArgument, "a user ID is the binding's 30-day value")
			_, err = beh.Record(bg, id)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			_, err = sessions.Create(bg, id, time.Hour)
			assert.ErrorIs(t, err, ErrInvalidArgument)
			_, err = bl.Add(bg, KindUser, id, "")
			assert.ErrorIs(t, err, ErrInvalidArgument)
			for _, r := range []Rule{bl, beh, dev} {
				d, err := r.Check(bg, Subject{UserID: id, DeviceID: "phone-1"})
				require.NoError(t, err)
				assert.Equal(t, Deny, d.Action, r.Name())
				assert.Equal(t, ReasonInvalidUser, d.Reason, r.Name())
			}
		}
		// IPs are canonical addresses (at most 45 bytes) or refused.
		_, err = bl.AddFor(bg, KindIP, strings.Repeat("1", 512<<10), "", time.Hour)
		if assert.ErrorIs(t, err, ErrInvalidArgument) {
			assert.Less(t, len(err.Error()), 200)
		}

		keys1, bytes1 := redisFootprint(t, rdb, prefix)
		assert.Equal(t, keys0, keys1, "no key written for an invalid ID")
		assert.Equal(t, bytes0, bytes1)

		// Control: the counter sees a valid binding (one key, its bytes).
		b, err := dev.Bind(bg, strings.Repeat("d", maxIDLen), "alice")
		require.NoError(t, err)
		assert.True(t, b.New)
		keys2, bytes2 := redisFootprint(t, rdb, prefix)
		assert.Equal(t, keys1+1, keys2)
		assert.Greater(t, bytes2, bytes1+int64(maxIDLen))
		assert.Less(t, bytes2, bytes1+4096)
	})
}
