package traffic

import (
	"strings"
	"testing"
	"time"
)

// The -slo flag's forms: either part alone keeps the default of the other;
// a mistake is named with what to write instead.
func TestParseSLO(t *testing.T) {
	cases := []struct {
		in   string
		want SLO
		err  string
	}{
		{"", DefaultSLO, ""},
		{DefaultSLOFlag, DefaultSLO, ""},
		{"p99=250ms", SLO{P99: 250 * time.Millisecond, Shed: DefaultSLO.Shed}, ""},
		{"shed=5%", SLO{P99: DefaultSLO.P99, Shed: 5}, ""},
		{"shed=0.5, p99=2s", SLO{P99: 2 * time.Second, Shed: 0.5}, ""},
		{"p99=fast", DefaultSLO, "positive duration"},
		{"shed=120%", DefaultSLO, "percentage from 0 to 100"},
		{"p95=1s", DefaultSLO, `unknown target "p95"`},
		{"p99", DefaultSLO, "name=value"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSLO(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one that says %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
