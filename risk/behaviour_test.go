package risk

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBehaviourWindow(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	t0 := testenv.Epoch() // miniredis TIME only: no real clock involved
	m.SetTime(t0)
	b, err := NewBehaviour(rdb, BehaviourConfig{Window: 10 * time.Second, FlagAt: 3, DenyAt: 5})
	require.NoError(t, err)

	type step struct {
		at      time.Duration // since t0
		count   int64
		action  Action
		crossed bool
		retry   time.Duration
	}
	steps := []step{
		{0, 1, Allow, false, 0},
		{time.Second, 2, Allow, false, 0},
		{2 * time.Second, 3, Allow, false, 0},
		{3 * time.Second, 4, Challenge, false, 0},
		{4 * time.Second, 5, Challenge, false, 0},
		{5 * time.Second, 6, Deny, true, 5 * time.Second},  // oldest (t0) leaves at t0+10s
		{6 * time.Second, 6, Deny, false, 4 * time.Second}, // capped, not stored
		{9 * time.Second, 6, Deny, false, time.Second},
		// t0 leaves the window: 5 stored, this one is the 6th again.
		{10*time.Second + time.Millisecond, 6, Deny, true, time.Second - time.Millisecond},
		// Events at 1..5s and 10.001s stored; at 15.5s those <= 5.5s left.
		{15*time.Second + 500*time.Millisecond, 2, Allow, false, 0},
	}
	// A reference model runs beside the table: events are stored while the
	// count is <= deny.
	var stored []time.Duration
	for i, s := range steps {
		m.SetTime(t0.Add(s.at))
		r, err := b.Record(bg, "u1")
		require.NoError(t, err)
		// Expected from a reference model.
		cut := s.at - 10*time.Second
		kept := stored[:0:0]
		for _, e := range stored {
			if e > cut {
				kept = append(kept, e)
			}
		}
		stored = kept
		n := int64(len(stored))
		crossed := false
		if n <= 5 {
			stored = append(stored, s.at)
			n++
			crossed = n == 6
		}
		assert.Equal(t, n, r.Count, "step %d", i)
		assert.Equal(t, s.count, r.Count, "step %d (table)", i)
		assert.Equal(t, crossed, r.Crossed, "step %d", i)
		assert.Equal(t, s.crossed, r.Crossed, "step %d (table)", i)
		assert.Equal(t, s.action == Deny, r.Denied, "step %d", i)
		assert.Equal(t, s.action != Allow, r.Flagged || r.Denied, "step %d", i)
		if s.action == Deny {
			assert.Equal(t, s.retry, r.RetryAfter, "step %d", i)
		}
	}

	// A full window later everything is forgotten.
	m.SetTime(t0.Add(time.Minute))
	r, err := b.Record(bg, "u1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Count)
	// Other users are independent.
	r, err = b.Record(bg, "u2")
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Count)

	// Memory bounded: deny+1 entries at most, TTL = window.
	for i := 0; i < 50; i++ {
		_, err = b.Record(bg, "u3")
		require.NoError(t, err)
	}
	members, err := m.ZMembers("seckill:risk:{u:u3}:beh")
	require.NoError(t, err)
	assert.Len(t, members, 6)
	assert.Equal(t, 10*time.Second, m.TTL("seckill:risk:{u:u3}:beh"))
}

func TestBehaviourCheckDecisions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		flag  int64
		deny  int64
		only  bool // BehaviourConfig.FlagOnly
		want  []Action
		flags []bool
	}{
		{"challenge then deny", 2, 3, false, []Action{Allow, Allow, Challenge, Deny, Deny}, []bool{false, false, true, false, false}},
		{"flag only", 2, 3, true, []Action{Allow, Allow, Allow, Deny}, []bool{false, false, true, false}},
		{"flag == deny disables flagging", 2, 2, false, []Action{Allow, Allow, Deny}, []bool{false, false, false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rdb, _ := testenv.Miniredis(t)
			b, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Hour, FlagAt: c.flag, DenyAt: c.deny, FlagOnly: c.only})
			require.NoError(t, err)
			for i, want := range c.want {
				d, err := b.Check(bg, Subject{UserID: "u"})
				require.NoError(t, err)
				assert.Equal(t, want, d.Action, "call %d", i+1)
				assert.Equal(t, c.flags[i], len(d.Flags) > 0, "call %d flags %v", i+1, d.Flags)
				if want == Deny {
					assert.True(t, d.Throttled)
					assert.Equal(t, ReasonTooFrequent, d.Reason)
					assert.Greater(t, d.RetryAfter, time.Duration(0))
				}
				if want == Challenge {
					assert.Equal(t, ReasonSuspicious, d.Reason)
				}
			}
			d, err := b.Check(bg, Subject{IP: netipMust("1.2.3.4")})
			require.NoError(t, err)
			assert.Equal(t, Allow, d.Action, "no user: skipped, IPs never counted")
		})
	}
	rdb, _ := testenv.Miniredis(t)
	for _, bad := range [][3]int64{{0, 1, 1}, {1000, 0, 1}, {1000, 3, 2}} {
		_, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Duration(bad[0]) * time.Millisecond, FlagAt: bad[1], DenyAt: bad[2]})
		assert.ErrorIs(t, err, ErrInvalidConfig, "%v", bad)
	}
	_, err := NewBehaviour(nil, BehaviourConfig{Window: time.Second, FlagAt: 1, DenyAt: 1})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	b, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Second, FlagAt: 1, DenyAt: 1})
	require.NoError(t, err)
	_, err = b.Record(bg, "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

func TestBehaviourAutoBlacklist(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	t0 := testenv.Epoch() // miniredis TIME only: no real clock involved
	m.SetTime(t0)
	bl, err := NewBlacklist(rdb, BlacklistConfig{BanBase: time.Minute, BanMax: time.Hour, BanFactor: 2})
	require.NoError(t, err)
	b, err := NewBehaviour(rdb, BehaviourConfig{Window: 10 * time.Second, FlagAt: 3, DenyAt: 3, AutoBlacklist: bl})
	require.NoError(t, err)

	bans := 0
	for i := 0; i < 20; i++ {
		r, err := b.Record(bg, "bot")
		require.NoError(t, err)
		if r.Ban != nil {
			bans++
			assert.Equal(t, time.Minute, r.Ban.Duration)
			assert.Equal(t, ReasonTooFrequent, r.Ban.Reason)
			assert.Equal(t, time.Minute, r.RetryAfter)
		}
	}
	assert.Equal(t, 1, bans, "banned once per crossing, not per request")
	ban, banned, err := bl.Banned(bg, KindUser, "bot")
	require.NoError(t, err)
	require.True(t, banned)
	assert.EqualValues(t, 1, ban.Offence)

	// Second crossing after the window: escalated.
	m.SetTime(t0.Add(time.Minute))
	var second *Ban
	for i := 0; i < 5; i++ {
		r, err := b.Record(bg, "bot")
		require.NoError(t, err)
		if r.Ban != nil {
			second = r.Ban
		}
	}
	require.NotNil(t, second)
	assert.EqualValues(t, 2, second.Offence)
	assert.Equal(t, 2*time.Minute, second.Duration)

	// The ban failing does not turn a deny into an allow.
	m.SetTime(t0.Add(2 * time.Minute))
	for i := 0; i < 3; i++ {
		_, err := b.Check(bg, Subject{UserID: "other"})
		require.NoError(t, err)
	}
	require.NoError(t, m.Set("seckill:risk:{bl:u:other}:n", "not-a-number"))
	r, err := b.Record(bg, "other")
	require.Error(t, err, "INCR on a non-integer fails the ban")
	assert.True(t, r.Denied)
	require.NoError(t, m.Set("seckill:risk:{bl:u:other2}:n", "not-a-number"))
	for i := 0; i < 3; i++ {
		_, err := b.Check(bg, Subject{UserID: "other2"})
		require.NoError(t, err)
	}
	d, err := b.Check(bg, Subject{UserID: "other2"})
	require.NoError(t, err)
	assert.Equal(t, Deny, d.Action)
}

func TestBehaviourAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		b, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Hour, FlagAt: 10, DenyAt: 20, KeyPrefix: prefix})
		require.NoError(t, err)
		// Concurrent events of one user are all counted, exactly.
		var wg sync.WaitGroup
		for g := 0; g < 10; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2; i++ {
					_, err := b.Record(bg, "hot")
					assert.NoError(t, err)
				}
			}()
		}
		wg.Wait()
		r, err := b.Record(bg, "hot")
		require.NoError(t, err)
		assert.EqualValues(t, 21, r.Count)
		assert.True(t, r.Denied)
		assert.True(t, r.Crossed)
		assert.Greater(t, r.RetryAfter, 59*time.Minute)
		for u := 0; u < 5; u++ {
			r, err := b.Record(bg, fmt.Sprint("cold", u))
			require.NoError(t, err)
			assert.EqualValues(t, 1, r.Count)
		}
	})
}

func TestBehaviourDown(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	b, err := NewBehaviour(rdb, BehaviourConfig{Window: time.Second, FlagAt: 1, DenyAt: 2})
	require.NoError(t, err)
	m.SetError("ERR boom")
	_, err = b.Check(bg, Subject{UserID: "u"})
	assert.Error(t, err)
}
