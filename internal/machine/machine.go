// Package machine says what the benchmarks report of the machine they ran
// on, so every report reads it the same way.
package machine

import (
	"os"
	"runtime"
	"strings"
)

// LoadAverage is the 1, 5 and 15 minute load average as uptime prints it
// ("0.52, 0.61, 0.70"), where the system tells it (/proc/loadavg), else
// "unknown". A benchmark's figures are only as quiet as the machine was.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "unknown"
}

// Load is how busy the machine was around a run, as the reports record it:
// its cores, and the load average before and after. A load average above
// the cores means the run shared the machine with other work.
type Load struct {
	Cores      int    `json:"cores"`
	LoadBefore string `json:"load_average_before"`
	LoadAfter  string `json:"load_average_after"`
}

// Before is the Load of a run that starts now: the cores, and the load
// average before it.
func Before() Load { return Load{Cores: runtime.NumCPU(), LoadBefore: LoadAverage()} }

// Done records the load average after the run.
func (l *Load) Done() { l.LoadAfter = LoadAverage() }
