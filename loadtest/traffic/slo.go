package traffic

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SLO is the target a sale's rate must meet to count as capacity: the p99
// latency of the sales alone (replays, refusals and shed answers apart) at
// most P99, and at most Shed percent of the requests shed (503, 429). A
// rate that sells fast by turning most buyers away meets no target.
type SLO struct {
	P99  time.Duration `json:"sale_p99_ns"`
	Shed float64       `json:"percent_shed"`
}

// DefaultSLO is the target when none is given: a sale answered within
// half a second at the 99th percentile, at most 1 % of buyers shed.
var DefaultSLO = SLO{P99: 500 * time.Millisecond, Shed: 1}

// DefaultSLOFlag is DefaultSLO as the -slo flag writes it.
const DefaultSLOFlag = "p99=500ms,shed=1%"

// ParseSLO reads "p99=500ms,shed=1%": either part may be left out, and
// keeps DefaultSLO's value.
func ParseSLO(s string) (SLO, error) {
	o := DefaultSLO
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		switch {
		case !ok:
			return o, fmt.Errorf("-slo %q: want name=value pairs, e.g. %s", s, DefaultSLOFlag)
		case name == "p99":
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return o, fmt.Errorf("-slo p99=%s: want a positive duration such as 500ms", value)
			}
			o.P99 = d
		case name == "shed":
			f, err := strconv.ParseFloat(strings.TrimSuffix(value, "%"), 64)
			if err != nil || f < 0 || f > 100 {
				return o, fmt.Errorf("-slo shed=%s: want a percentage from 0 to 100, such as 1%%", value)
			}
			o.Shed = f
		default:
			return o, fmt.Errorf("-slo %q: unknown target %q (p99 and shed are known)", s, name)
		}
	}
	return o, nil
}

// String is the target as a report says it.
func (o SLO) String() string {
	return fmt.Sprintf("sale p99 ≤ %v, shed ≤ %s %%", o.P99, strconv.FormatFloat(o.Shed, 'f', -1, 64))
}

// ShedPercent is the share of a summary's requests that were shed (503,
// 429), in percent.
func ShedPercent(s Summary) float64 {
	if s.Counts.Requests == 0 {
		return 0
	}
	return 100 * float64(s.Latency[OutcomeShed].Count) / float64(s.Counts.Requests)
}

// Met reports whether s sold something and met the target.
func (o SLO) Met(s Summary) bool {
	sale := s.Latency[OutcomeSale]
	return sale.Count > 0 && sale.P99 <= o.P99 && ShedPercent(s) <= o.Shed
}
