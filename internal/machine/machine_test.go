package machine

import (
	"os"
	"regexp"
	"testing"
)

// TestLoadAverage reads the real machine: three numbers where the system
// has /proc/loadavg, "unknown" where it has not.
func TestLoadAverage(t *testing.T) {
	got := LoadAverage()
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		if got != "unknown" {
			t.Fatalf("no /proc/loadavg, got %q", got)
		}
		return
	}
	if !regexp.MustCompile(`^[0-9.]+, [0-9.]+, [0-9.]+$`).MatchString(got) {
		t.Fatalf("load average %q is not three numbers", got)
	}
}
