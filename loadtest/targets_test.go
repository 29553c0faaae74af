package loadtest_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"
	"flashsale/loadtest"
	"flashsale/loadtest/cluster"
)

// -targets against a running instance with a 2 s lease TTL: a run that
// names another TTL is refused before any traffic, and one that names none
// sizes its pause faults for the instance's 2 s, so lua under a pause in the
// critical section breaks as it must, never a false NO-DEMO from a pause
// shorter than the lease.
func TestTargetsUseTheInstancesLockTTL(t *testing.T) {
	testsupport.RequireRedis(t)
	if testing.Short() {
		t.Skip("starts a real app instance and attacks it for seconds")
	}
	mod, err := cluster.FindModule(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := testsupport.TestLog(t, slog.LevelWarn)
	const ttl = 2 * time.Second
	local, err := cluster.StartLocal(ctx, cluster.LocalConfig{Instances: 1, Nodes: 1, ModuleDir: mod, Dir: t.TempDir(), LockTTL: ttl, LockWait: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := local.Close(); err != nil {
			t.Error(err)
		}
	})
	cfg := loadtest.Config{
		Targets: local.Bases(), AdminToken: local.Token(), RedisURLs: local.RedisURLs(),
		Variants: []string{"lua"}, Cells: []string{"lua/pause-in-critical-section"},
		Rate: 100, Duration: 5 * time.Second, Seed: 1, WarmUp: -1, Logger: log,
	}

	refused := cfg
	refused.LockTTL = 500 * time.Millisecond
	if _, err := loadtest.Run(ctx, refused); err == nil || !strings.Contains(err.Error(), "2s lock TTL") {
		t.Errorf("-lock-ttl 500ms against a 2s instance: %v, want a refusal naming its 2s TTL", err)
	}
	wrongVariant := cfg
	wrongVariant.Variants, wrongVariant.Cells = []string{"no-such-rung"}, nil
	if _, err := loadtest.Run(ctx, wrongVariant); err == nil {
		t.Error("a variant the runner does not know was accepted")
	}

	var seen loadtest.Outcome
	for try := 1; try <= 2 && seen != loadtest.Breaks; try++ {
		rep, err := loadtest.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Settings.LockTTL != ttl {
			t.Fatalf("the run took lock TTL %v, the instance says %v", rep.Settings.LockTTL, ttl)
		}
		if !hasNote(rep.Notes, "resets the sale") {
			t.Errorf("the report does not say that the run resets the instances' sale: %q", rep.Notes)
		}
		if len(rep.Scenarios) != 1 || len(rep.Scenarios[0].Faults) != 1 {
			t.Fatalf("scenarios %+v, want pause-in-critical-section alone", rep.Scenarios)
		}
		if ms := rep.Scenarios[0].Faults[0].MS; time.Duration(ms)*time.Millisecond <= ttl {
			t.Fatalf("the pause is %d ms, not past the instance's %v lease", ms, ttl)
		}
		c := rep.Cells[0]
		seen = c.Seen
		t.Logf("try %d: %s × %s %s %s (%s; faults fired %v)", try, c.Variant, c.Scenario, c.Seen, c.Verdict, strings.Join(c.Reasons, "; "), c.FaultsFired)
		if c.Verdict == loadtest.VerdictBug || c.Verdict == loadtest.VerdictError {
			t.Fatalf("%s: %v", c.Verdict, c.Reasons)
		}
	}
	if seen != loadtest.Breaks {
		t.Errorf("lua × pause-in-critical-section held twice against a 2s instance: a NO-DEMO")
	}
}

func hasNote(notes []string, part string) bool {
	for _, n := range notes {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}
