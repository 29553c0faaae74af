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
		born, err := redis.NewScript(databirth.Script).Run(ctx, rdb, []string{databirth.Key}).Slice()
		if err != nil || len(born) != 3 {
			t.Fatalf("marker script: %v %v", born, err)
		}
		stats, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := databirth.Ledger(stats); got != born[2] {
			t.Errorf("after %v: Ledger reads %q, the marker script wrote %q", op, got, born[2])
		}
		ledgers[born[2].(string)] = true
	}
	if len(ledgers) != 6 { // PING moves nothing; each operator command does
		t.Errorf("the ledger took %d values, want one before and one after each of five operator commands: %v", len(ledgers), ledgers)
	}
}
