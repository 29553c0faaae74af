package loadtest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"flashsale/loadtest/storefront"
	"flashsale/loadtest/traffic"
)

// The matrix as docs/design.md writes it, row by row, so a change to either one
// shows up here.
func TestExpectedIsDesignMatrix(t *testing.T) {
	h, b := Holds, Breaks
	design := map[string][]Outcome{ // clean, crash, pause-release, pause-cs, node-down, node-restart
		"none":          {b, b, b, b, b, b},
		"setnx-expire":  {h, b, h, b, h, b},
		"get-del":       {h, h, b, b, h, b},
		"plain-del":     {h, h, h, b, h, b},
		"lua":           {h, h, h, b, h, b},
		"lua+fence":     {h, h, h, h, h, h},
		"redlock":       {h, h, h, b, h, h},
		"redlock+fence": {h, h, h, h, h, h},
	}
	cols := []string{Clean, CrashBetweenSteps, PauseBetweenReleaseSteps, PauseInCriticalSection, NodeDown, NodeRestart}
	for v, row := range design {
		for i, want := range row {
			if EitherWhy(v, cols[i]) != "" {
				want = Either // timing decides; docs/design.md's figure is the usual outcome
			}
			if got, ok := Expected(v, cols[i]); !ok || got != want {
				t.Errorf("%s × %s: %q (in matrix: %v), docs/design.md says %q", v, cols[i], got, ok, want)
			}
		}
		got, ok := Expected(v, NodeRestartUnaware)
		switch v {
		case "redlock":
			if got != Breaks {
				t.Errorf("redlock without restart awareness: %q, docs/design.md says breaks", got)
			}
		case "redlock+fence":
			if got != NoClaim {
				t.Errorf("redlock+fence without restart awareness: %q, want no claim", got)
			}
		default:
			if ok {
				t.Errorf("%s has an unaware cell; only Redlock has restart awareness", v)
			}
		}
	}
	// The turn-2 columns: past Redlock's assumptions.
	past := map[string][]Outcome{ // clock-jump, network-delay, partition (Redlock only)
		"none":          {b, b},
		"setnx-expire":  {b, b},
		"get-del":       {b, b},
		"plain-del":     {b, b},
		"lua":           {b, b},
		"lua+fence":     {h, h},
		"redlock":       {b, h, h},
		"redlock+fence": {h, h, h},
	}
	for v, row := range past {
		for i, sc := range []string{ClockJump, NetworkDelay, Partition} {
			got, ok := Expected(v, sc)
			if i >= len(row) {
				if ok {
					t.Errorf("%s × %s is in the matrix; the partition column is Redlock's only", v, sc)
				}
				continue
			}
			if !ok || got != row[i] {
				t.Errorf("%s × %s: %q (in matrix: %v), docs/design.md says %q", v, sc, got, ok, row[i])
			}
		}
	}
	if got, _ := Expected("setnx-expire", PauseBetweenReleaseSteps); got != Either || EitherWhy("setnx-expire", PauseBetweenReleaseSteps) == "" {
		t.Errorf("setnx-expire × pause-between-release-steps: %q; a wait deadline between SETNX and EXPIRE makes it timing's call", got)
	}
	if _, ok := Expected("mutex", Clean); ok {
		t.Error("an unknown variant is in the matrix")
	}
}

func TestJudge(t *testing.T) {
	sold := traffic.Summary{Counts: traffic.Counts{Requests: 10, Created: 5}, Sales: 5}
	cases := []struct {
		name     string
		cell     Cell
		seen     Outcome
		verdict  Verdict
		inReason string
	}{
		{"holds as expected", Cell{Expected: Holds, Summary: sold}, Holds, VerdictOK, ""},
		{"oversold where it must hold", Cell{Expected: Holds, Summary: sold, Audit: storefront.Audit{OversoldUnits: 2}}, Breaks, VerdictBug, "oversold 2"},
		{"stuck lock where it must break", Cell{Expected: Breaks, Summary: sold, StuckLocks: 1}, Breaks, VerdictOK, "stuck"},
		{"holds where it must break", Cell{Expected: Breaks, Summary: sold}, Holds, VerdictNoDemo, ""},
		{"invented order", Cell{Expected: Holds, Summary: sold, CrossCheck: []string{"invented orders: …"}}, Breaks, VerdictBug, "cross-check"},
		{"double booking", Cell{Expected: Holds, Summary: sold, Audit: storefront.Audit{DoubleBookedSeats: 1}}, Breaks, VerdictBug, "double-booked"},
		{"lost update", Cell{Expected: Holds, Summary: sold, Audit: storefront.Audit{LostUpdates: 3}}, Breaks, VerdictBug, "lost updates"},
		{"no claim", Cell{Expected: NoClaim, Summary: sold, Audit: storefront.Audit{LostUpdates: 3}}, Breaks, VerdictOK, ""},
		{"nothing sold", Cell{Expected: Holds, Summary: traffic.Summary{Counts: traffic.Counts{Requests: 10}}}, "", VerdictError, "nothing was sold"},
		{"no answers", Cell{Expected: Holds, Summary: traffic.Summary{Counts: traffic.Counts{Requests: 10, Transport: 2}, Sales: 3},
			Unanswered: []Unanswered{{Request: "order of 2 × hot by u7, key k7", Waited: 30 * time.Second}}}, "", VerdictError, "u7, key k7 waited 30s"},
		{"no answers where it breaks anyway", Cell{Expected: Breaks, Summary: traffic.Summary{Counts: traffic.Counts{Requests: 10, Transport: 2}, Sales: 3},
			Audit: storefront.Audit{OversoldUnits: 1}}, "", VerdictError, "2 requests got no answer"},
		{"no answers where no claim is made", Cell{Expected: NoClaim, Summary: traffic.Summary{Counts: traffic.Counts{Requests: 10, Transport: 1}, Sales: 3}}, "", VerdictError, "no answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cell
			c.judge()
			if c.Seen != tc.seen || c.Verdict != tc.verdict {
				t.Errorf("seen %q verdict %q, want %q %q (reasons %q)", c.Seen, c.Verdict, tc.seen, tc.verdict, c.Reasons)
			}
			if tc.inReason != "" && !strings.Contains(strings.Join(c.Reasons, ";"), tc.inReason) {
				t.Errorf("reasons %q do not mention %q", c.Reasons, tc.inReason)
			}
		})
	}
}

func sampleReport() *Report {
	r := &Report{
		Started:   time.Unix(1_700_000_000, 0),
		Settings:  Settings{Rate: 300, Duration: 4 * time.Second, LockTTL: 500 * time.Millisecond, Instances: 3, Nodes: 5},
		Variants:  []string{"none", "redlock", "lua<&>"},
		Scenarios: Scenarios(500 * time.Millisecond)[:2],
		plots:     map[string][]byte{Clean: []byte(`<!doctype html><html><body><script>var x = "</b>";</script></body></html>`)},
	}
	sold := traffic.Summary{Counts: traffic.Counts{Requests: 100, Created: 60, Conflict: 30, Unavailable: 10}, Sales: 60, SalesPerSecond: 20, P50: 3 * time.Millisecond, P99: 40 * time.Millisecond}
	add := func(v, sc string, exp Outcome, a storefront.Audit) {
		c := Cell{Variant: v, Scenario: sc, Expected: exp, Summary: sold, Audit: a, HotSKU: "hot", Initial: 100}
		c.judge()
		r.Cells = append(r.Cells, c)
	}
	add("none", Clean, Breaks, storefront.Audit{OversoldUnits: 12, LostUpdates: 30})
	add("redlock", Clean, Holds, storefront.Audit{})
	add("none", CrashBetweenSteps, Breaks, storefront.Audit{OversoldUnits: 3})
	add("redlock", CrashBetweenSteps, Holds, storefront.Audit{LostUpdates: 1})
	r.Cells = append(r.Cells, Cell{Variant: "lua<&>", Scenario: Clean, Verdict: VerdictSkipped})
	r.summarise()
	return r
}

func TestReportText(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"breaks ✓", "BREAKS ✗", "oversold 12 units", "redlock 20.0/s vs none 20.0/s = 1.00×", "1 bugs"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if !r.Failed(false) || r.Bugs != 1 {
		t.Errorf("a broken holds cell must fail the run: bugs %d", r.Bugs)
	}
	var j map[string]any
	b.Reset()
	if err := r.WriteJSON(&b); err != nil || json.Unmarshal(b.Bytes(), &j) != nil {
		t.Fatalf("JSON report: %v", err)
	}
}

// The HTML report must open offline: nothing it shows may come from the
// network, and the plot's own markup must stay inside its frame.
func TestReportHTMLSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//|<link\b|@import|url\(\s*["']?https?:`)
	if m := external.FindString(page); m != "" {
		t.Errorf("the report loads %q from elsewhere", m)
	}
	for _, want := range []string{"<svg", "oversold units", `srcdoc="&lt;!doctype html&gt;`, "lua&lt;&amp;&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, `var x = "</b>"`) {
		t.Error("the plot's markup was not escaped into srcdoc")
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	for m, label := range map[*Metric]string{&MetricOversold: ">12<", &MetricLost: ">30<"} {
		svg := sampleReport().Chart(*m)
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("%s chart is not well-formed XML: %v", m.Name, err)
				}
				break
			}
		}
		if !strings.Contains(svg, label) {
			t.Errorf("%s chart has no bar labelled %s", m.Name, label)
		}
	}
}

// TestAgreement: the audit's oversales, lost updates and double bookings
// and porcupine's verdict must say the same; where they do not, the cell
// says so, the report counts it, and the run fails on it unless the
// curriculum declares why the rung's design lets them differ: where the
// curriculum makes a claim always, elsewhere under -strict. Stuck locks
// are no part of it.
func TestAgreement(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name                 string
		variant              string
		expected             Outcome
		audit                storefront.Audit
		stuck                int
		lin                  *bool
		disagree, declared   bool
		fails, failsStrictly bool
	}{
		{"both find nothing", "lua", Holds, storefront.Audit{}, 0, &yes, false, false, false, false},
		{"both find a lost update", "lua", Breaks, storefront.Audit{LostUpdates: 2}, 0, &no, false, false, false, false},
		{"the audit finds an oversale the history hides", "lua", Breaks, storefront.Audit{OversoldUnits: 1}, 0, &yes, true, false, true, true},
		{"the history is not linearizable, the audit clean", "lua", Holds, storefront.Audit{}, 0, &no, true, false, true, true},
		{"a disagreement where the curriculum claims nothing", "lua", Either, storefront.Audit{}, 0, &no, true, false, false, true},
		{"a disagreement the curriculum declares", "redis-stock", Holds, storefront.Audit{}, 0, &no, true, true, false, false},
		{"a stuck lock is not the sale's data", "lua", Breaks, storefront.Audit{}, 1, &yes, false, false, false, false},
		{"a check that ran out agrees with nothing", "lua", Holds, storefront.Audit{DoubleBookedSeats: 1}, 0, nil, false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Cell{Variant: tt.variant, Expected: tt.expected, Verdict: VerdictOK, Audit: tt.audit, StuckLocks: tt.stuck, Linearizable: tt.lin}
			c.agree()
			if (c.Disagreement != "") != tt.disagree || (c.DisagreementDeclared != "") != tt.declared {
				t.Fatalf("disagreement %q, declared %q; want one: %v, declared: %v", c.Disagreement, c.DisagreementDeclared, tt.disagree, tt.declared)
			}
			r := Report{Cells: []Cell{c}}
			r.summarise()
			if r.Disagreements != b2i(tt.disagree && !tt.declared) || r.DeclaredDisagreements != b2i(tt.declared) {
				t.Fatalf("%d disagreements, %d declared counted", r.Disagreements, r.DeclaredDisagreements)
			}
			if r.Failed(false) != tt.fails || r.Failed(true) != tt.failsStrictly {
				t.Fatalf("failed %v, strictly %v; want %v, %v", r.Failed(false), r.Failed(true), tt.fails, tt.failsStrictly)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
