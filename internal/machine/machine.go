// Package machine says what the benchmarks report of the machine they ran
// on, so every report reads it the same way.
package machine

import (
	"os"
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
