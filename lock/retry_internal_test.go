package lock

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestKeptReport: what a waiter keeps of a failed try for its final answer. A
// single node's read cut short by a deadline is not Redis down (under a
// starved process the deadline's read error can arrive before the context
// says it is done, and the try is then not the last); a refused connection
// is; Redlock's quorum errors and busy answers are kept as they are.
func TestKeptReport(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	busy := fmt.Errorf("%w: held", ErrNotAcquired)
	timeout := down(rdb, fmt.Errorf("read tcp: %w", os.ErrDeadlineExceeded))
	refused := down(rdb, fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED))
	quorum := &QuorumError{Op: "acquire", Quorum: 3, Nodes: 5, Failed: map[string]error{"n1": os.ErrDeadlineExceeded}}
	for _, tc := range []struct {
		name        string
		err, before error
		want        error
	}{
		{"a read cut by the deadline keeps what came before", timeout, busy, busy},
		{"a refused connection is kept", refused, busy, refused},
		{"a quorum error is kept", quorum, busy, quorum},
		{"busy is kept", busy, refused, busy},
	} {
		if got := errorToKeep(tc.err, tc.before); got != tc.want {
			t.Errorf("%s: errorToKeep(%v, %v) = %v, want %v", tc.name, tc.err, tc.before, got, tc.want)
		}
	}
}
