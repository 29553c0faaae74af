package ladder

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/lock"
)

// step is called at each point between two steps of an operation
// (lock.Protocol); its error ends the operation there.
type step = func(ctx context.Context, point string) error

// down wraps err, from rdb, as the node being unavailable.
func down(rdb *redis.Client, err error) error {
	return fmt.Errorf("%w: node %s: %w", lock.ErrUnavailable, rdb.Options().Addr, err)
}

// ms is d in whole milliseconds, as PX and PEXPIRE take it.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
