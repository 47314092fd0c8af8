package stock

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

func TestClassify(t *testing.T) {
	t.Parallel()
	assert.NoError(t, classify("x", nil))
	for _, err := range []error{
		io.EOF,
		&net.OpError{Op: "dial", Err: errors.New("connection refused")},
		context.DeadlineExceeded,
		context.Canceled,
		redis.ErrClosed,
		redisErr("LOADING Redis is loading the dataset in memory"),
		redisErr("BUSY Redis is busy running a script"),
		redisErr("READONLY You can't write against a read only replica."),
		redisErr("MASTERDOWN Link with MASTER is down"),
		redisErr("CLUSTERDOWN The cluster is down"),
		redisErr("TRYAGAIN Multiple keys request during rehashing of slot"),
		redisErr("OOM command not allowed when used memory > 'maxmemory'."),
	} {
		got := classify("reserve", err)
		assert.ErrorIs(t, got, ErrUnavailable, err.Error())
		assert.ErrorIs(t, got, err, "the cause stays in the chain")
		assert.Contains(t, got.Error(), "stock: reserve:")
	}
	for _, err := range []error{
		redisErr("ERR Error running script (call to f_x): @user_script:1: oops"),
		redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"),
		redis.Nil,
	} {
		got := classify("reserve", err)
		assert.NotErrorIs(t, got, ErrUnavailable, err.Error())
		assert.ErrorIs(t, got, err)
	}
}
