package dbx

import (
	"errors"
	"fmt"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
)

type sqlStateErr string

func (e sqlStateErr) Error() string    { return "pg: " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

// IsRetryable: the deadlocks and serialization failures a database rolls a
// transaction back for, wrapped or not; nothing else.
func TestIsRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysqldrv.MySQLError{Number: 1213, Message: "Deadlock found"}, true},
		{fmt.Errorf("order: pay 1: %w", &mysqldrv.MySQLError{Number: 1213}), true},
		{sqlStateErr("40P01"), true},
		{fmt.Errorf("wrapped: %w", sqlStateErr("40001")), true},
		{&mysqldrv.MySQLError{Number: 1062}, false},
		{sqlStateErr("23505"), false},
		{errors.New("Deadlock found when trying to get lock"), false}, // text alone is not trusted
		{nil, false},
	} {
		if got := IsRetryable(tc.err); got != tc.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
