package risk

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// listAll pages through List with limit and returns every ban, failing on
// a page larger than limit or an ID out of lexical order (so none twice).
func listAll(t *testing.T, bl *Blacklist, kind Kind, limit int) []Ban {
	t.Helper()
	var all []Ban
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10_000, "paging ends")
		bans, next, err := bl.List(bg, kind, after, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(bans), limit)
		for _, b := range bans {
			require.Equal(t, kind, b.Kind)
			if len(all) > 0 {
				require.Less(t, all[len(all)-1].ID, b.ID, "lexical order, each once")
			}
			all = append(all, b)
		}
		if next == "" {
			return all
		}
		require.Greater(t, next, after, "the cursor moves on")
		after = next
	}
}

func banIDs(bans []Ban) []string {
	var ids []string
	for _, b := range bans {
		ids = append(ids, b.ID)
	}
	return ids
}

// indexed reads, from Redis itself, the IDs in kind's index (both sorted
// sets must agree).
func indexed(t *testing.T, rdb redis.UniversalClient, prefix string, kind Kind) []string {
	t.Helper()
	keys := banIndexKeys(prefix, kind)
	byEnd, err := rdb.ZRange(bg, keys[0], 0, -1).Result()
	require.NoError(t, err)
	byID, err := rdb.ZRange(bg, keys[1], 0, -1).Result()
	require.NoError(t, err)
	sort.Strings(byEnd)
	assert.Equal(t, byID, byEnd, "the two index sets agree")
	return byID
}

// banned reads, from Redis itself, which of ids have a ban key.
func bannedIDs(t *testing.T, rdb redis.UniversalClient, prefix string, kind Kind, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		n, err := rdb.Exists(bg, banKey(prefix, kind, id)).Result()
		require.NoError(t, err)
		if n == 1 {
			out = append(out, id)
		}
	}
	return out
}

// TestBlacklistListAllRedis: bans added concurrently (users and IPs, some
// subjects twice) are all listed, once each, per kind, whatever the page
// size; the listing matches the ban keys and the index read from Redis;
// removed and reset bans are gone from both.
func TestBlacklistListAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		t.Parallel()
		bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: newFakeClock()})
		require.NoError(t, err)
		const n = 40
		users := make([]string, n)
		ips := make([]string, n/4)
		for i := range users {
			users[i] = fmt.Sprintf("user-%02d", i)
		}
		for i := range ips {
			ips[i] = fmt.Sprintf("203.0.113.%d", i+1)
		}
		errs := make(chan error, 2*n+len(ips))
		for i := range 2 * n { // every user twice: an Add and an AddFor
			go func() {
				var err error
				if i%2 == 0 {
					_, err = bl.Add(bg, KindUser, users[i/2], "scalping")
				} else {
					_, err = bl.AddFor(bg, KindUser, users[i/2], "manual", time.Hour)
				}
				errs <- err
			}()
		}
		for _, ip := range ips {
			go func() { _, err := bl.AddFor(bg, KindIP, ip, "manual", time.Hour); errs <- err }()
		}
		for range cap(errs) {
			require.NoError(t, <-errs)
		}

		wantUsers := slices.Clone(users) // already in lexical order
		wantIPs := slices.Clone(ips)
		sort.Strings(wantIPs)
		for _, limit := range []int{1, 3, 7, n, 1000} {
			got := listAll(t, bl, KindUser, limit)
			require.Equal(t, wantUsers, banIDs(got), "limit %d", limit)
			for _, b := range got {
				assert.EqualValues(t, 2, b.Offence)
				assert.False(t, b.Permanent)
				assert.False(t, b.Until.IsZero())
			}
			assert.Equal(t, wantIPs, banIDs(listAll(t, bl, KindIP, limit)), "limit %d", limit)
		}
		assert.Empty(t, listAll(t, bl, KindDevice, 10))
		assert.Equal(t, wantUsers, indexed(t, rdb, prefix, KindUser), "index from Redis")
		assert.Equal(t, wantUsers, bannedIDs(t, rdb, prefix, KindUser, users), "ban keys from Redis")
		assert.Equal(t, wantIPs, indexed(t, rdb, prefix, KindIP))

		// Remove and Reset take the ban out of the index too.
		for i, u := range users {
			switch i % 4 {
			case 1:
				require.NoError(t, bl.Remove(bg, KindUser, u))
			case 2:
				require.NoError(t, bl.Reset(bg, KindUser, u))
			}
		}
		require.NoError(t, bl.Remove(bg, KindIP, ips[0]))
		var left []string
		for i, u := range users {
			if i%4 == 0 || i%4 == 3 {
				left = append(left, u)
			}
		}
		for _, limit := range []int{1, 4, 1000} {
			assert.Equal(t, left, banIDs(listAll(t, bl, KindUser, limit)), "limit %d", limit)
		}
		assert.Equal(t, left, indexed(t, rdb, prefix, KindUser), "index from Redis")
		assert.Equal(t, left, bannedIDs(t, rdb, prefix, KindUser, users), "ban keys from Redis")
		assert.Equal(t, wantIPs[1:], banIDs(listAll(t, bl, KindIP, 2)))

		// A Remove racing Adds of the same subjects: whatever the
		// interleaving, a ban key that exists is listed and a listed ban
		// has its key.
		race := make(chan error, 2*len(left))
		for _, u := range left {
			go func() { _, err := bl.AddFor(bg, KindUser, u, "again", 2*time.Hour); race <- err }()
			go func() { race <- bl.Remove(bg, KindUser, u) }()
		}
		for range cap(race) {
			require.NoError(t, <-race)
		}
		assert.Equal(t, bannedIDs(t, rdb, prefix, KindUser, users), banIDs(listAll(t, bl, KindUser, 3)),
			"listed = the ban keys that exist")
	})
}

// TestBlacklistListExpiry (miniredis: its TTLs and the injected clock move
// together): ended bans are not listed and their entries are pruned on
// read and on write; a permanent ban stays listed until removed; an entry
// whose ban key vanished is skipped.
func TestBlacklistListExpiry(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	clk := newFakeClock()
	bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: clk})
	require.NoError(t, err)
	advance := func(d time.Duration) { clk.Add(d); m.FastForward(d) }

	_, err = bl.Add(bg, KindDevice, "d-1m", "x") // first offence: 1 minute
	require.NoError(t, err)
	_, err = bl.AddFor(bg, KindDevice, "d-10m", "x", 10*time.Minute)
	require.NoError(t, err)
	_, err = bl.AddFor(bg, KindDevice, "d-1h", "x", time.Hour)
	require.NoError(t, err)
	require.NoError(t, rdb.Set(bg, banKey(prefix, KindDevice, "d-perm"), "0|1|manual", 0).Err())
	ban, err := bl.AddFor(bg, KindDevice, "d-perm", "auto", time.Minute)
	require.NoError(t, err)
	require.True(t, ban.Permanent)

	got := listAll(t, bl, KindDevice, 2)
	assert.Equal(t, []string{"d-10m", "d-1h", "d-1m", "d-perm"}, banIDs(got))
	for _, b := range got {
		if b.ID == "d-perm" {
			assert.True(t, b.Permanent)
			assert.Equal(t, "auto", b.Reason)
		} else {
			assert.False(t, b.Until.IsZero())
		}
	}

	advance(2 * time.Minute)
	assert.Equal(t, []string{"d-10m", "d-1h", "d-perm"}, banIDs(listAll(t, bl, KindDevice, 10)))
	assert.Equal(t, []string{"d-10m", "d-1h", "d-perm"}, indexed(t, rdb, prefix, KindDevice), "pruned on read")

	advance(10 * time.Minute)
	_, err = bl.AddFor(bg, KindDevice, "d-new", "x", time.Minute) // a write prunes too
	require.NoError(t, err)
	assert.Equal(t, []string{"d-1h", "d-new", "d-perm"}, indexed(t, rdb, prefix, KindDevice), "pruned on write")

	// The ban key vanishes without Remove (deleted by hand): skipped, and
	// its entry dropped at its end.
	require.NoError(t, rdb.Del(bg, banKey(prefix, KindDevice, "d-1h")).Err())
	assert.Equal(t, []string{"d-new", "d-perm"}, banIDs(listAll(t, bl, KindDevice, 1)))
	advance(time.Hour)
	assert.Equal(t, []string{"d-perm"}, banIDs(listAll(t, bl, KindDevice, 10)))
	assert.Equal(t, []string{"d-perm"}, indexed(t, rdb, prefix, KindDevice))

	advance(365 * 24 * time.Hour)
	assert.Equal(t, []string{"d-perm"}, banIDs(listAll(t, bl, KindDevice, 10)), "permanent: listed until removed")
	require.NoError(t, bl.Remove(bg, KindDevice, "d-perm"))
	assert.Empty(t, listAll(t, bl, KindDevice, 10))
	assert.Empty(t, indexed(t, rdb, prefix, KindDevice))
}

// TestBlacklistListOlderBans: a ban key written without an index entry (by
// an older version, or by hand) is enforced but not listed, until an Add
// of the subject enters it.
func TestBlacklistListOlderBans(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: prefix, Clock: newFakeClock()})
	require.NoError(t, err)
	require.NoError(t, rdb.Set(bg, banKey(prefix, KindUser, "old"), "1|1|legacy", time.Hour).Err())
	_, banned, err := bl.Banned(bg, KindUser, "old")
	require.NoError(t, err)
	assert.True(t, banned, "enforced")
	assert.Empty(t, listAll(t, bl, KindUser, 10), "not listed: no index entry")
	_, err = bl.Add(bg, KindUser, "old", "again")
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, banIDs(listAll(t, bl, KindUser, 10)))
}

// TestBlacklistListArguments: the kind, the limit (1..1000) and the
// cursor's length are checked before Redis is touched; a failing Redis is
// an error, not an empty list.
func TestBlacklistListArguments(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	bl, err := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: testenv.Prefix(t)})
	require.NoError(t, err)
	for _, tc := range []struct {
		kind  Kind
		after string
		limit int
	}{{"x", "", 10}, {"", "", 10}, {KindUser, "", 0}, {KindUser, "", -1}, {KindUser, "", 1001},
		{KindUser, strings.Repeat("a", maxIDLen+1), 10}} {
		_, _, err := bl.List(bg, tc.kind, tc.after, tc.limit)
		assert.ErrorIs(t, err, ErrInvalidArgument, "%q %d", tc.kind, tc.limit)
	}
	bans, next, err := bl.List(bg, KindUser, "", 1000)
	require.NoError(t, err)
	assert.Empty(t, bans)
	assert.Empty(t, next)
	m.SetError("READONLY")
	_, _, err = bl.List(bg, KindUser, "", 10)
	require.ErrorContains(t, err, "READONLY")
	assert.NotErrorIs(t, err, ErrInvalidArgument)
}
