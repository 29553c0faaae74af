//go:build unix

package localredis

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestSentinelFailoverLosesHeldBackWrite: a write the master acknowledged
// after HoldBack is not on the replica the sentinels promote, a write before
// it is; Heal makes the dead master a replica of the promoted one; Stop
// leaves no process behind.
func TestSentinelFailoverLosesHeldBackWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("left out of go test -short: a Sentinel failover takes seconds")
	}
	requireRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	s, err := StartSentinel(ctx, SentinelOptions{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("StartSentinel: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Stop()
		}
	})
	if !strings.HasPrefix(s.URL(), "redis-sentinel://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/flashsale") {
		t.Fatalf("URL %q", s.URL())
	}
	master, err := s.Master(ctx)
	if err != nil || master != s.Data.Nodes[0] {
		t.Fatalf("Master = %v, %v; want node 0", master, err)
	}
	set(t, master, "before", "1")
	replica, err := s.HoldBack(ctx)
	if err != nil {
		t.Fatalf("HoldBack: %v", err)
	}
	set(t, master, "after", "1")
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	promoted, err := s.WaitFailover(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
	if promoted != replica {
		t.Fatalf("promoted node %d, want the replica %d", promoted.Index(), replica.Index())
	}
	if !exists(t, promoted, "before") {
		t.Error("a write replicated before HoldBack is missing on the promoted replica")
	}
	if exists(t, promoted, "after") {
		t.Error("a write acknowledged after HoldBack reached the replica: the hold-back did not hold")
	}

	if err := s.Heal(ctx); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	if m, err := s.Master(ctx); err != nil || m != promoted {
		t.Fatalf("after Heal the master is %v (%v), want the promoted node", m, err)
	}
	set(t, promoted, "healed", "1")
	if err := poll(ctx, func() error {
		if !exists(t, master, "healed") {
			return errors.New("not replicated yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("the old master does not replicate the new one after Heal: %v", err)
	}

	var pids []int
	for _, n := range append(s.Data.Nodes, s.Sentinels.Nodes...) {
		pids = append(pids, n.PID())
	}
	stopped = true
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
}
