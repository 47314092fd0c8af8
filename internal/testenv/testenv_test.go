package testenv

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedisEveryKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for kind, c := range AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			key := Prefix(t) + "{x}:k"
			require.NoError(t, c.Set(ctx, key, "v", time.Minute).Err())
			got, err := c.Get(ctx, key).Result()
			require.NoError(t, err)
			assert.Equal(t, "v", got)
		})
	}
}

func TestPrefixUniquePerTest(t *testing.T) {
	t.Parallel()
	var a, b string
	t.Run("a", func(t *testing.T) { a = Prefix(t) })
	t.Run("b", func(t *testing.T) { b = Prefix(t) })
	assert.NotEqual(t, a, b)
	assert.Equal(t, Prefix(t), Prefix(t))
	// A second run of the same name (as with -count=N) starts clean.
	var again string
	t.Run("a", func(t *testing.T) { again = Prefix(t) })
	assert.NotEqual(t, a, again)
}

func TestRealPrefixCleaned(t *testing.T) {
	t.Parallel()
	if Kind() == KindMiniredis {
		t.Skip("needs a real Redis: cleanup of the prefix is only done there")
	}
	ctx := context.Background()
	var key string
	var probe redis.UniversalClient
	t.Run("writer", func(t *testing.T) {
		c := Redis(t)
		key = Prefix(t) + "{y}:k"
		require.NoError(t, c.Set(ctx, key, "v", time.Minute).Err())
	})
	probe = Redis(t)
	n, err := probe.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the subtest's prefix must be deleted at its cleanup")
}

type row struct {
	ID   int64 `gorm:"primaryKey"`
	Name string
}

func TestDB(t *testing.T) {
	t.Parallel()
	db := DB(t)
	require.NoError(t, db.AutoMigrate(&row{}))
	require.NoError(t, db.Create(&row{ID: 1, Name: "a"}).Error)
	var n int64
	require.NoError(t, db.Model(&row{}).Count(&n).Error)
	assert.EqualValues(t, 1, n)
	// A second database for another test starts empty.
	db2 := DB(t)
	require.NoError(t, db2.AutoMigrate(&row{}))
	require.NoError(t, db2.Model(&row{}).Count(&n).Error)
	assert.Zero(t, n)
}

// AllDB hands out one fresh database per available kind, each of the kind
// it claims to be, and DB keeps returning SQLite or MySQL only.
func TestAllDB(t *testing.T) {
	t.Parallel()
	all := AllDB(t)
	want := []DBKind{KindSQLite}
	if os.Getenv(EnvMySQLDSN) != "" {
		want = append(want, KindMySQL)
	}
	if os.Getenv(EnvPostgresDSN) != "" {
		want = append(want, KindPostgres)
	}
	assert.ElementsMatch(t, want, slices.Collect(maps.Keys(all)))
	dialect := map[DBKind]string{KindSQLite: "sqlite", KindMySQL: "mysql", KindPostgres: "postgres"}
	for kind, db := range all {
		t.Run(string(kind), func(t *testing.T) {
			assert.Equal(t, dialect[kind], db.Dialector.Name())
			require.NoError(t, db.AutoMigrate(&row{}))
			require.NoError(t, db.Create(&row{ID: 1, Name: "a"}).Error)
			var n int64
			require.NoError(t, db.Model(&row{}).Count(&n).Error)
			assert.EqualValues(t, 1, n)
		})
	}
	assert.NotEqual(t, KindPostgres, DBKindInUse())
	assert.NotEqual(t, "postgres", DB(t).Dialector.Name())
}

// Postgres gives each test its own database and drops it at cleanup, even
// with a connection still open.
func TestPostgresFreshAndDropped(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvPostgresDSN) == "" {
		t.Skipf("%s not set: no real PostgreSQL", EnvPostgresDSN)
	}
	var name string
	t.Run("owner", func(t *testing.T) {
		db := Postgres(t)
		require.NoError(t, db.Raw("SELECT current_database()").Scan(&name).Error)
		require.NoError(t, db.AutoMigrate(&row{}))
		require.NoError(t, db.Create(&row{ID: 1, Name: "a"}).Error)
		// A second database for the same test starts empty.
		other := Postgres(t)
		var n int64
		require.NoError(t, other.Raw("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n).Error)
		assert.Zero(t, n)
		// A transaction left open holds a connection to the database:
		// the drop must not wait for it.
		require.NoError(t, db.Begin().Exec("SELECT 1").Error)
	})
	require.NotEmpty(t, name)
	probe := Postgres(t)
	var n int64
	require.NoError(t, probe.Raw("SELECT COUNT(*) FROM pg_database WHERE datname = ?", name).Scan(&n).Error)
	assert.Zero(t, n, "database %s dropped at the owner's cleanup", name)
}

func TestKafkaRoundTrip(t *testing.T) {
	t.Parallel()
	brokers := Kafka(t, 3, "testenv")
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer(brokers, cfg)
	require.NoError(t, err)
	defer p.Close()
	part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: "testenv", Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("hello")})
	require.NoError(t, err)

	c, err := sarama.NewConsumer(brokers, cfg)
	require.NoError(t, err)
	defer c.Close()
	pc, err := c.ConsumePartition("testenv", part, off)
	require.NoError(t, err)
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		assert.Equal(t, "hello", string(m.Value))
	case <-time.After(10 * time.Second):
		t.Fatal("no message from kfake within 10s")
	}
}

func TestParseEpoch(t *testing.T) {
	t.Parallel()
	wall := time.Date(2031, 5, 6, 7, 8, 9, 500, time.UTC)
	now := func() time.Time { return wall }
	for in, want := range map[string]time.Time{
		"":                     DefaultEpoch,
		"default":              DefaultEpoch,
		"past":                 PastEpoch,
		" FUTURE ":             time.Date(2071, 5, 6, 7, 7, 7, 0, time.UTC),
		"now":                  wall.Truncate(time.Second),
		"2044-02-29T23:59:59Z": time.Date(2044, 2, 29, 23, 59, 59, 0, time.UTC),
	} {
		got, err := parseEpoch(in, now)
		require.NoError(t, err, in)
		assert.True(t, want.Equal(got), "%q: %v, want %v", in, got, want)
	}
	_, err := parseEpoch("yesterday", now)
	require.ErrorContains(t, err, EpochEnv)
	future, err := parseEpoch("future", time.Now)
	require.NoError(t, err)
	assert.True(t, PastEpoch.Before(time.Now()) && future.After(time.Now().AddDate(futureYears-1, 0, 0)),
		"the guard epochs stand on both sides of today")
}
