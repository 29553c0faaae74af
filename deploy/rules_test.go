package deploy

import (
	"flashsale/curriculum"
	"flashsale/internal/testsupport"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"flashsale/internal/locktap"
)

// The alert rules.

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func rules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal([]byte(read(t, "deploy/prometheus/rules.yml")), &f); err != nil {
		t.Fatalf("rules.yml: %v", err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("rules.yml has no rules")
	}
	return out
}

var (
	metricRef  = regexp.MustCompile(`\b(flashsale_[a-z0-9_]+|up)\b`)
	selector   = regexp.MustCompile(`\b(flashsale_[a-z0-9_]+|up)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	targetOnly = map[string]bool{"instance": true, "job": true} // added by Prometheus at scrape time
)

// checkExpr reports what in a PromQL expression does not match the scrape:
// unknown metrics, labels no such metric has, label values that cannot occur.
func checkExpr(expr string, s scrape, job string) []string {
	var problems []string
	labelsInExpr := map[string]bool{}
	for _, m := range metricRef.FindAllString(expr, -1) {
		if m == "up" {
			continue
		}
		labels, ok := s.samples[m]
		if !ok {
			problems = append(problems, fmt.Sprintf("metric %s is not exported", m))
			continue
		}
		for l := range labels {
			labelsInExpr[l] = true
		}
	}
	outcomes := []string{string(locktap.Acquired), string(locktap.Busy), string(locktap.Unavailable), string(locktap.Crashed)}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		name := sel[1]
		for _, mt := range matcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := mt[1], mt[2], mt[3]
			if name == "up" {
				if label == "job" && value != job {
					problems = append(problems, fmt.Sprintf("up{job=%q}, but prometheus.yml scrapes the app as job %q", value, job))
				}
				continue
			}
			if !s.samples[name][label] && !targetOnly[label] {
				problems = append(problems, fmt.Sprintf("%s has no label %q (it has %v)", name, label, keys(s.samples[name])))
				continue
			}
			if op == "=~" || op == "!~" {
				continue
			}
			switch label {
			case "outcome":
				if !slices.Contains(outcomes, value) {
					problems = append(problems, fmt.Sprintf("%s{outcome=%q}: the outcomes are %v", name, value, outcomes))
				}
			case "variant":
				if !slices.Contains(curriculum.Names(), value) {
					problems = append(problems, fmt.Sprintf("%s{variant=%q}: no such variant", name, value))
				}
			case "route":
				if !s.values["route"][value] {
					problems = append(problems, fmt.Sprintf("%s{route=%q}: no such route template in the scrape", name, value))
				}
			case "code":
				if !regexp.MustCompile(`^[1-5][0-9][0-9]$`).MatchString(value) {
					problems = append(problems, fmt.Sprintf("%s{code=%q}: not a status code", name, value))
				}
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || targetOnly[l] || labelsInExpr[l] {
				continue
			}
			problems = append(problems, fmt.Sprintf("groups by %q, which no metric of the expression has", l))
		}
	}
	return problems
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6}\s+(.+)$`).FindAllStringSubmatch(md, -1) {
		out[githubAnchor(m[1])] = true
	}
	return out
}

func TestRulesAreWellFormed(t *testing.T) {
	ops := read(t, "docs/operations.md")
	heads := anchors(ops)
	seen := map[string]bool{}
	for _, r := range rules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, sev)
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s: no summary annotation", r.Alert)
		}
		want := "docs/operations.md#" + strings.ToLower(r.Alert)
		if r.Annotations["runbook"] != want {
			t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
		}
		if !heads[strings.ToLower(r.Alert)] {
			t.Errorf("%s: docs/operations.md has no heading %q to explain it", r.Alert, r.Alert)
		}
		if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
			t.Errorf("%s: unbalanced parentheses in %q", r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"FlashsaleLockAcquireFailureRate", "FlashsaleSlowLockAcquire", "FlashsaleStaleFenceRejections", "FlashsaleAuditNotOK"} {
		if !seen[want] {
			t.Errorf("rules.yml has no alert %s", want)
		}
	}
	// Every alert heading of operations.md is a real alert.
	for _, m := range regexp.MustCompile(`(?m)^###\s+(Flashsale[A-Za-z]+)\s*$`).FindAllStringSubmatch(ops, -1) {
		if !seen[m[1]] {
			t.Errorf("docs/operations.md explains alert %s, which rules.yml does not define", m[1])
		}
	}
	// Prometheus's config loads the rules and scrapes the app replicas.
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "deploy/prometheus/prometheus.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.RuleFiles, "rules.yml") {
		t.Errorf("prometheus.yml rule_files %v does not load rules.yml", cfg.RuleFiles)
	}
	svcs, _ := loadCompose(t, composeEnv)
	targets := map[string][]string{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets[sc.JobName] = append(targets[sc.JobName], st.Targets...)
		}
	}
	var want []string
	for _, a := range appServices(svcs) {
		want = append(want, a+":8080")
	}
	if !slices.Equal(targets["flashsale"], want) {
		t.Errorf("prometheus.yml's job flashsale scrapes %v, want the app replicas %v", targets["flashsale"], want)
	}
	// The balancer's exporter, at the port its stats frontend binds.
	if _, ok := svcs["balancer"]; !ok || !slices.Equal(targets["balancer"], []string{"balancer:8404"}) {
		t.Errorf("prometheus.yml's job balancer scrapes %v, want [balancer:8404]", targets["balancer"])
	}
	if len(targets) != 2 {
		t.Errorf("prometheus.yml has jobs %v, want flashsale and balancer", slices.Sorted(maps.Keys(targets)))
	}
}

// promtool, when installed, checks the PromQL itself and runs the rules'
// unit tests (deploy/prometheus/rules_test.yml).
func TestPromtool(t *testing.T) {
	tool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus); the other tests check the rules' metric names")
	}
	dir := filepath.Join(root, "deploy/prometheus")
	for _, args := range [][]string{
		{"check", "rules", "rules.yml"},
		{"test", "rules", "rules_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(tool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The compose environment runs the real app; every metric and label the
// alert rules use is one it exports, and docs/operations.md lists exactly
// the metrics it exports, with their types and labels.
func TestComposeEnvironmentRunsTheApp(t *testing.T) {
	testsupport.Long(t, "docker-compose and the stack take minutes on a busy machine")
	a := startApp(t, composeAppEnv(t, map[string]string{"FLASHSALE_WATCHDOG": "true"}))
	exerciseApp(t, a)
	s := scrapeMetrics(t, a)

	t.Run("rules use exported metrics", func(t *testing.T) {
		var cfg struct {
			ScrapeConfigs []struct {
				JobName string `yaml:"job_name"`
			} `yaml:"scrape_configs"`
		}
		_ = yaml.Unmarshal([]byte(read(t, "deploy/prometheus/prometheus.yml")), &cfg)
		job := ""
		if len(cfg.ScrapeConfigs) > 0 {
			job = cfg.ScrapeConfigs[0].JobName
		}
		for _, r := range rules(t) {
			for _, p := range checkExpr(r.Expr, s, job) {
				t.Errorf("%s: %s", r.Alert+r.Record, p)
			}
		}
	})

	t.Run("operations.md lists the exported metrics", func(t *testing.T) {
		ops := read(t, "docs/operations.md")
		exported := map[string]bool{}
		for name := range s.samples {
			if strings.HasPrefix(name, "flashsale_") {
				exported[s.family(name)] = true
			}
		}
		documented := map[string]bool{}
		row := regexp.MustCompile("(?m)^\\|\\s*`(flashsale_[a-z0-9_]+)`\\s*\\|\\s*([a-z]+)\\s*\\|([^|]*)\\|")
		for _, m := range row.FindAllStringSubmatch(ops, -1) {
			name, typ := m[1], m[2]
			documented[name] = true
			if !exported[name] {
				t.Errorf("operations.md lists %s, which the app does not export", name)
				continue
			}
			if s.families[name] != typ {
				t.Errorf("operations.md says %s is a %s; it is a %s", name, typ, s.families[name])
			}
			var labels []string
			for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[3], -1) {
				labels = append(labels, l[1])
			}
			sort.Strings(labels)
			if got := s.familyLabels(name); !slices.Equal(labels, got) {
				t.Errorf("operations.md gives %s the labels %v; it has %v", name, labels, got)
			}
		}
		for name := range exported {
			if !documented[name] {
				t.Errorf("the app exports %s, which the metrics table of operations.md does not list", name)
			}
		}
		for _, m := range regexp.MustCompile(`flashsale_[a-z0-9_]+`).FindAllString(ops, -1) {
			if !exported[s.family(m)] && !exported[m] {
				t.Errorf("operations.md mentions %s, which the app does not export", m)
			}
		}
	})
}
