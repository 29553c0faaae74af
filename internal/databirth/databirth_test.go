package databirth_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/databirth"
	"flashsale/internal/testsupport"
)

// The ledger a vote's check reads (Ledger, over INFO commandstats) is the
// one the marker script writes, on a real node, before and after operator
// commands move it: a check that parsed it differently would call every
// vote a loss, or none.
func TestLedgerIsTheScripts(t *testing.T) {
	c := testsupport.Redis(t, 1)
	rdb := redis.NewClient(testsupport.Options(t, c)[0])
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ledgers := map[string]bool{}
	for _, op := range [][]any{
		{"PING"},
		{"CONFIG", "SET", "notify-keyspace-events", "Kgx"},
		{"FLUSHDB"},
		{"SWAPDB", "0", "1"},
		{"SWAPDB", "0", "1"},
		{"FLUSHALL"},
	} {
		if err := rdb.Do(ctx, op...).Err(); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		born, err := redis.NewScript(databirth.Script).Run(ctx, rdb, []string{databirth.Key, databirth.SeenKey}).Slice()
		if err != nil || len(born) != 4 {
			t.Fatalf("marker script: %v %v", born, err)
		}
		stats, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := databirth.Ledger(stats); got != born[2] {
			t.Errorf("after %v: Ledger reads %q, the marker script wrote %q", op, got, born[2])
		}
		ledgers[born[2].(string)] = true
	}
	if len(ledgers) != 6 { // PING moves nothing; each operator command does
		t.Errorf("the ledger took %d values, want one before and one after each of five operator commands: %v", len(ledgers), ledgers)
	}
}

// A reset of the node's counts (CONFIG RESETSTAT, which a monitoring job
// may run) could hide an operator command that moved the ledger before it:
// the total of calls then goes back below the largest one the node (or a
// client, passing it in) has seen, and the marker script marks the data
// anew. A control without the reset keeps the birth.
func TestMarkerSeesAResetOfTheCounts(t *testing.T) {
	c := testsupport.Redis(t, 1)
	rdb := redis.NewClient(testsupport.Options(t, c)[0])
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mark := func(args ...any) (born, calls int64) {
		t.Helper()
		v, err := redis.NewScript(databirth.Script).Run(ctx, rdb, []string{databirth.Key, databirth.SeenKey}, args...).Slice()
		if err != nil || len(v) != 4 {
			t.Fatalf("marker script: %v %v", v, err)
		}
		return v[0].(int64), v[3].(int64)
	}
	must := func(cmd ...any) {
		t.Helper()
		if err := rdb.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	must("CONFIG", "RESETSTAT") // as a monitoring job did before anyone met the node
	born, _ := mark()
	for range 20 {
		must("SET", "some:key", "v")
	}
	if again, _ := mark(); again != born {
		t.Fatalf("control: the marker moved without a reset (%d, then %d)", born, again)
	}
	// The operator's change and the reset that hides it: the ledger reads
	// as it did at the first marking.
	must("CONFIG", "SET", "maxmemory-policy", "volatile-ttl")
	must("CONFIG", "SET", "maxmemory-policy", "noeviction")
	must("CONFIG", "RESETSTAT")
	if again, _ := mark(); again == born {
		t.Error("the counts were reset after an operator command, and the data kept their birth")
	}

	// A client that saw a larger total on these data passes it in: a reset
	// the node's own record missed (rolled back with the data) still shows.
	for range 50 {
		must("SET", "some:key", "v")
	}
	born, calls := mark()
	must("CONFIG", "RESETSTAT")
	must("DEL", databirth.SeenKey)
	if again, _ := mark(calls, born); again == born {
		t.Error("a reset the caller saw did not mark the data anew")
	}
	born2, calls2 := mark()
	if again, _ := mark(calls2+1000, born2-1); again != born2 {
		t.Error("a total read on older data (another birth) marked the data anew")
	}
}
