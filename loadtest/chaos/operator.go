package chaos

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// OperatorAction is one thing an operator can do to a live Redis node that
// removes, rolls back or hides keys, or takes away what the lock reads
// there, without stopping the node: a command, and the one that undoes it
// at the end of the fault (none for a command whose effect is done at once).
type OperatorAction struct {
	Name string
	Do   [][]any
	Undo [][]any
}

// OperatorActions are the actions a NodeOperator fault draws from: those of
// the lock's list that a node of the run can take (no DEBUG, which the
// run's nodes do not enable; no REPLICAOF or FAILOVER, which need a server
// outside the set: the lock's tests run those). The eviction sets a memory
// limit of one byte under allkeys-random, so the next write evicts every key.
var OperatorActions = []OperatorAction{
	{Name: "FLUSHALL", Do: [][]any{{"FLUSHALL"}}},
	{Name: "FLUSHALL ASYNC", Do: [][]any{{"FLUSHALL", "ASYNC"}}},
	{Name: "FLUSHDB", Do: [][]any{{"FLUSHDB"}}},
	{Name: "SWAPDB", Do: [][]any{{"SWAPDB", "0", "1"}}, Undo: [][]any{{"SWAPDB", "0", "1"}}},
	{Name: "eviction", Do: [][]any{{"CONFIG", "SET", "maxmemory-policy", "allkeys-random"}, {"CONFIG", "SET", "maxmemory", "1"}},
		Undo: [][]any{{"CONFIG", "SET", "maxmemory", "0"}, {"CONFIG", "SET", "maxmemory-policy", "noeviction"}}},
	{Name: "SCRIPT FLUSH", Do: [][]any{{"SCRIPT", "FLUSH"}}},
	{Name: "ACL takes INFO away", Do: [][]any{{"ACL", "SETUSER", "default", "-info"}}, Undo: [][]any{{"ACL", "SETUSER", "default", "+info"}}},
	{Name: "notifications off", Do: [][]any{{"CONFIG", "SET", "notify-keyspace-events", ""}}, Undo: [][]any{{"CONFIG", "SET", "notify-keyspace-events", "Kgx"}}},
	{Name: "CLIENT KILL", Do: [][]any{{"CLIENT", "KILL", "TYPE", "normal"}}},
}

// operate runs the action named name on the node at url, and returns what
// undoes it (nil if nothing does) and a line for the log.
func operate(ctx context.Context, url, name string) (undo func(context.Context) error, detail string, err error) {
	var a *OperatorAction
	for i := range OperatorActions {
		if OperatorActions[i].Name == name {
			a = &OperatorActions[i]
		}
	}
	if a == nil {
		return nil, "", fmt.Errorf("unknown operator action %q", name)
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", err
	}
	run := func(ctx context.Context, cmds [][]any) error {
		rdb := redis.NewClient(o)
		defer rdb.Close()
		for _, c := range cmds {
			if err := rdb.Do(ctx, c...).Err(); err != nil {
				return fmt.Errorf("%v: %w", c, err)
			}
		}
		return nil
	}
	var words []string
	for _, c := range a.Do {
		words = append(words, strings.TrimSpace(fmt.Sprintln(c...)))
	}
	detail = "operator: " + strings.Join(words, "; ")
	if err := run(ctx, a.Do); err != nil {
		return nil, detail, err
	}
	if a.Undo == nil {
		return nil, detail, nil
	}
	return func(ctx context.Context) error { return run(ctx, a.Undo) }, detail, nil
}
