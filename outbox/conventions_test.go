package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// TestOptionsBelongToConstructor: an option implements the option
// interface of exactly the constructors that read it, so a relay-only
// option given to NewWriter (or the writer-only one to NewRelay) does not
// compile.
func TestOptionsBelongToConstructor(t *testing.T) {
	t.Parallel()
	check := func(name string, opt any, writer, relay bool) {
		t.Helper()
		_, w := opt.(WriterOption)
		_, r := opt.(RelayOption)
		assert.Equal(t, [2]bool{writer, relay}, [2]bool{w, r}, name)
	}
	for name, o := range map[string]any{
		"WithClock": WithClock(nil), "WithLogger": WithLogger(nil), "WithObserver": WithObserver(nil),
		"WithTable": WithTable("t"),
	} {
		check(name, o, true, true)
	}
	check("WithStoreTimeout", WithStoreTimeout(time.Second), true, false)
	for name, o := range map[string]any{
		"WithBatchSize": WithBatchSize(1), "WithPollInterval": WithPollInterval(1), "WithLease": WithLease(1),
		"WithMaxAttempts": WithMaxAttempts(1), "WithBackoff": WithBackoff(1, 1), "WithJitter": WithJitter(0),
		"WithMarkTimeout": WithMarkTimeout(1), "WithRetention": WithRetention(1, 1),
		"WithoutCleanup": WithoutCleanup(), "WithPublishConcurrency": WithPublishConcurrency(1),
		"WithClaimMode": WithClaimMode(ClaimAuto), "WithOnSent": WithOnSent(nil), "WithOnRetry": WithOnRetry(nil),
		"WithOnFailed": WithOnFailed(nil), "WithOnError": WithOnError(nil),
		"WithBacklogInterval": WithBacklogInterval(1),
	} {
		check(name, o, false, true)
	}
}

// TestNilOptionsAndCollaborators: nil options (untyped or typed) are
// ignored; a nil collaborator, including a typed nil publisher, is an
// error wrapping the package's sentinel and stores nothing.
func TestNilOptionsAndCollaborators(t *testing.T) {
	t.Parallel()
	db := migratedDB(t, testenv.KindSQLite)
	w, err := NewWriter(nil, Option(nil), WriterOption(nil), TableOption(nil))
	require.NoError(t, err)
	r, err := NewRelay(db, newRecorder(), nil, Option(nil), RelayOption(nil), TableOption(nil))
	require.NoError(t, err)
	assert.Equal(t, defaultTable, r.table, "a nil TableOption leaves the default")

	var nilRec *recorder
	_, err = NewRelay(nil, newRecorder())
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewRelay(db, nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewRelay(db, nilRec)
	require.ErrorIs(t, err, ErrInvalidConfig, "a typed nil publisher is a nil collaborator")
	_, err = NewSaramaPublisher(nil)
	require.ErrorIs(t, err, ErrInvalidConfig)

	// At a call, a nil collaborator is a bad argument.
	msg := Message{Topic: "orders", Key: "u1", Payload: []byte("{}")}
	_, err = w.SendOrStore(context.Background(), db, nilRec, msg)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = w.SendOrStore(context.Background(), nil, newRecorder(), msg)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, w.Write(context.Background(), nil, msg), ErrInvalidArgument)
	for _, err := range []error{ErrInvalidConfig, ErrInvalidArgument} {
		assert.NotErrorIs(t, err, ErrDuplicateMsgID)
	}
	assert.Empty(t, allRows(t, db), "nothing stored for a refused call")
}
