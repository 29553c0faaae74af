package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"flashsale/internal/machine"
	"flashsale/loadtest/traffic"
)

// Run is one side of the comparison: a run, or several reruns of it, each
// a file.
type Run struct {
	Files []string `json:"files"`
	Kind  string   `json:"kind"`
	// Load is each file's load average before and after it ran, Cores the
	// machine's cores (0 where a report does not say): a load above the
	// cores means the run shared a busy machine.
	Load  []string `json:"load_average"`
	Cores int      `json:"cores,omitempty"`
	// Busy is true when a load average of the run exceeded its cores.
	Busy bool `json:"busy"`
	// Settings are the first file's recorded settings, flattened to
	// name → value.
	Settings map[string]string `json:"settings"`
	// cells are each cell's figures, one per rerun that has it.
	cells map[string][]Side
}

// busy reports whether a load average of the run exceeded its cores.
func (r *Run) busy() bool {
	for _, l := range r.Load {
		for f := range strings.FieldsSeq(strings.NewReplacer(",", " ", "→", " ").Replace(l)) {
			if v, err := strconv.ParseFloat(f, 64); err == nil && r.Cores > 0 && v > float64(r.Cores) {
				return true
			}
		}
	}
	return false
}

// file is the part of report.json and sweep.json that compare reads; the
// rest of the file's top level is read as raw values for its settings.
type file struct {
	Cells []struct {
		Variant  string          `json:"variant"`
		Scenario string          `json:"scenario"`
		Verdict  string          `json:"verdict"`
		Seen     string          `json:"seen"`
		Summary  traffic.Summary `json:"vegeta"`
	} `json:"cells"`
	Steps []struct {
		Variant string          `json:"variant"`
		Rate    int             `json:"rate"`
		Summary traffic.Summary `json:"vegeta"`
		Err     string          `json:"error"`
	} `json:"steps"`
	machine.Load
}

// notSettings are the top-level fields of a report that are its results or
// its moment, not how it was run.
var notSettings = []string{"cells", "steps", "bare", "spikes", "capacity", "started", "finished", "command", "cores",
	"load_average_before", "load_average_after", "latency_note", "variants", "scenarios", "notes", "redlock_vs_none",
	"bugs", "no_demos", "errors", "skipped", "disagreements", "declared_disagreements"}

// loadRun reads the comma-separated files of one side.
func loadRun(paths string) (*Run, error) {
	r := &Run{cells: map[string][]Side{}}
	for p := range strings.SplitSeq(paths, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var f file
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		kind, cells, settings := "", map[string]Side{}, top
		switch {
		case len(f.Cells) > 0:
			kind = "matrix report"
			for _, c := range f.Cells {
				cells[c.Variant+" × "+c.Scenario] = side(c.Summary, c.Verdict, c.Seen)
			}
			settings = map[string]json.RawMessage{}
			_ = json.Unmarshal(top["settings"], &settings) // a report without settings has none to compare
		case len(f.Steps) > 0:
			kind = "sweep"
			for _, st := range f.Steps {
				verdict := ""
				if st.Err != "" {
					verdict = "ERROR"
				}
				cells[fmt.Sprintf("%s × %d/s", st.Variant, st.Rate)] = side(st.Summary, verdict, "")
			}
		default:
			return nil, errors.New(p + ": neither a report.json (cells) nor a sweep.json (steps)")
		}
		if r.Kind != "" && r.Kind != kind {
			return nil, fmt.Errorf("%s is a %s, %s a %s: compare like with like", r.Files[0], r.Kind, p, kind)
		}
		if r.Kind == "" {
			r.Kind, r.Cores, r.Settings = kind, f.Cores, flatten("", settings)
		}
		r.Files = append(r.Files, p)
		r.Load = append(r.Load, fmt.Sprintf("%s → %s", orUnknown(f.LoadBefore), orUnknown(f.LoadAfter)))
		for name, s := range cells {
			r.cells[name] = append(r.cells[name], s)
		}
	}
	if len(r.Files) == 0 {
		return nil, errors.New("no file named")
	}
	r.Busy = r.busy()
	return r, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// flatten turns a report's settings into name → value: nested objects by
// dotted names, durations (fields named …_ns) as durations, the rest as
// their JSON.
func flatten(prefix string, m map[string]json.RawMessage) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if prefix == "" && slices.Contains(notSettings, k) {
			continue
		}
		name := prefix + k
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) == nil {
			maps.Copy(out, flatten(name+".", sub))
			continue
		}
		var ns int64
		if strings.HasSuffix(k, "_ns") && json.Unmarshal(v, &ns) == nil {
			out[strings.TrimSuffix(name, "_ns")] = time.Duration(ns).String()
			continue
		}
		out[name] = string(v)
	}
	return out
}

// SettingDiff is a setting the two runs were run with differently.
type SettingDiff struct {
	Name string `json:"name"`
	A    string `json:"a"`
	B    string `json:"b"`
}

// settingsDiffer lists the settings of a and b that differ, by name; one
// only one run records is listed with "—" for the other.
func settingsDiffer(a, b map[string]string) []SettingDiff {
	var out []SettingDiff
	for _, name := range slices.Sorted(maps.Keys(mergeKeys(a, b))) {
		va, okA := a[name]
		vb, okB := b[name]
		if va == vb && okA == okB {
			continue
		}
		if !okA {
			va = "—"
		}
		if !okB {
			vb = "—"
		}
		out = append(out, SettingDiff{Name: name, A: va, B: vb})
	}
	return out
}

func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
