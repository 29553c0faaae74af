package helm

import (
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// redisSet is the release's StatefulSet of Redlock masters.
func redisSet(t *testing.T, r *rendered) *appsv1.StatefulSet {
	t.Helper()
	for _, s := range all[*appsv1.StatefulSet](r) {
		if s.Labels["app.kubernetes.io/component"] == "redis" {
			return s
		}
	}
	t.Fatal("no StatefulSet labelled app.kubernetes.io/component: redis")
	return nil
}

// The app's FLASHSALE_REDIS names every master by its stable name, in
// ordinal order; no two masters may share a machine; each keeps its AOF on
// a volume and never evicts; a rollout restarts one at a time and waits
// out a lock TTL between them.
func TestRedisMasters(t *testing.T) {
	eachRelease(t, func(t *testing.T, r *rendered) {
		s := redisSet(t, r)
		_, ctr := app(t, r)
		env := envOf(t, ctr)
		n := int(*s.Spec.Replicas)
		if n < 3 || n%2 == 0 {
			t.Errorf("%d masters: Redlock wants an odd number, at least 3", n)
		}
		urls := strings.Split(env["FLASHSALE_REDIS"], ",")
		if len(urls) != n {
			t.Fatalf("FLASHSALE_REDIS lists %d nodes, the StatefulSet runs %d", len(urls), n)
		}
		svc := serviceFor(t, r, s.Spec.Template.Labels)
		if svc.Name != s.Spec.ServiceName || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("the masters' Service %s (clusterIP %q) is not the StatefulSet's headless service %s", svc.Name, svc.Spec.ClusterIP, s.Spec.ServiceName)
		}
		redis := s.Spec.Template.Spec.Containers[0]
		port := containerPort(t, redis, "redis")
		for i, u := range urls {
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatalf("FLASHSALE_REDIS %q: %v", u, err)
			}
			want := fmt.Sprintf("%s-%d.%s.%s.svc:%d", s.Name, i, s.Spec.ServiceName, r.namespace, port)
			if pu.Scheme != "redis" && pu.Scheme != "rediss" || pu.Host != want {
				t.Errorf("node %d is %s, want redis://%s (its stable name)", i, u, want)
			}
		}

		aa := s.Spec.Template.Spec.Affinity
		if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
			t.Fatal("the masters have no required pod anti-affinity: two could share a machine and fall together")
		}
		var apart bool
		for _, term := range aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel := term.LabelSelector
			if term.TopologyKey == corev1.LabelHostname && sel != nil && len(sel.MatchExpressions) == 0 &&
				labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(s.Spec.Template.Labels)) {
				apart = true
			}
		}
		if !apart {
			t.Errorf("no required anti-affinity term keeps the masters on distinct %s", corev1.LabelHostname)
		}

		args := redis.Args
		for _, want := range [][2]string{{"--maxmemory-policy", "noeviction"}, {"--appendonly", "yes"}, {"--save", ""}} {
			if v, ok := flagValue(args, want[0]); !ok || v != want[1] {
				t.Errorf("redis %s is %q (set: %v), want %q", want[0], v, ok, want[1])
			}
		}
		dir, _ := flagValue(args, "--dir")
		var onVolume bool
		for _, m := range redis.VolumeMounts {
			for _, claim := range s.Spec.VolumeClaimTemplates {
				onVolume = onVolume || m.Name == claim.Name && m.MountPath == dir
			}
		}
		if !onVolume {
			t.Errorf("the AOF directory %q is not a volume claimed per master", dir)
		}
		ttl := duration(t, "FLASHSALE_LOCK_TTL", env["FLASHSALE_LOCK_TTL"])
		if got := time.Duration(s.Spec.MinReadySeconds) * time.Second; got <= ttl {
			t.Errorf("minReadySeconds %v is not past the lock TTL %v: a rollout could restart a second master while the first sits out", got, ttl)
		}
		if p := pdbFor(t, r, s.Spec.Template.Labels); p == nil || p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("the masters' disruption budget is %v, want maxUnavailable 1", p)
		}
	})
}

// flagValue is the argument after name in args.
func flagValue(args []string, name string) (string, bool) {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// pinned says whether an image is named by digest, or by a tag naming a
// release (major.minor at least): never a moving tag such as redis:7 or
// latest, nor none.
func pinned(image string) bool {
	if regexp.MustCompile(`@sha256:[a-f0-9]{64}$`).MatchString(image) {
		return true
	}
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	return ok && regexp.MustCompile(`^[0-9]+\.[0-9]+`).MatchString(tag)
}

// redisFixed is the first release of each line with the fixes for
// CVE-2025-21605 (an unauthenticated client grows its output buffer without
// bound; 7.2.8, 7.4.3) and CVE-2025-49844 (a Lua script's use-after-free,
// remote code execution; 7.2.11, 7.4.6, 8.0.4, 8.2.2). A line not listed
// has none.
var redisFixed = map[string]int{"7.2": 11, "7.4": 6, "8.0": 4, "8.2": 2}

// redisPatched says whether a redis image's tag is a release with both
// fixes: 8.4 and later lines came after them.
func redisPatched(image string) bool {
	m := regexp.MustCompile(`:([0-9]+)\.([0-9]+)\.([0-9]+)`).FindStringSubmatch(image)
	if m == nil {
		return false
	}
	var major, minor, patch int
	fmt.Sscan(m[1], &major)
	fmt.Sscan(m[2], &minor)
	fmt.Sscan(m[3], &patch)
	if first, ok := redisFixed[m[1]+"."+m[2]]; ok {
		return patch >= first
	}
	return major > 8 || major == 8 && minor > 2
}

func TestRedisPatchedKnowsTheReleases(t *testing.T) {
	for image, want := range map[string]bool{
		"redis:7.2.7": false, "redis:7.2.10": false, "redis:7.2.11": true, "redis:7.2.12-bookworm": true,
		"redis:7.4.5": false, "redis:7.4.6": true, "redis:8.0.3": false, "redis:8.2.2": true, "redis:8.4.0": true,
		"redis:7.0.15": false, "redis:6.2.20": false, "redis:7": false, "redis:latest": false,
	} {
		if got := redisPatched(image); got != want {
			t.Errorf("redisPatched(%q) = %v, want %v", image, got, want)
		}
	}
}

// Every container runs a pinned image: a release's tag or a digest, never
// a moving tag; Redis a release with the fixes above.
func TestImagesPinned(t *testing.T) {
	eachRelease(t, func(t *testing.T, r *rendered) {
		for name, spec := range pods(r) {
			for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				if !pinned(c.Image) {
					t.Errorf("%s/%s runs %q: pin a release's tag or a digest", name, c.Name, c.Image)
				}
			}
		}
		s := redisSet(t, r)
		for _, c := range append(slices.Clone(s.Spec.Template.Spec.InitContainers), s.Spec.Template.Spec.Containers...) {
			if !redisPatched(c.Image) {
				t.Errorf("%s/%s runs %q: a release without the fixes for CVE-2025-49844 and CVE-2025-21605", s.Name, c.Name, c.Image)
			}
		}
	})
	for image, want := range map[string]bool{
		"redis:7": false, "redis:latest": false, "redis": false, "flashsale:main": false, "registry:5000/redis": false,
		"redis:7.2.11": true, "registry:5000/redis:7.2.11": true, "postgres:16.6": true,
		"redis@sha256:" + strings.Repeat("0f", 32): true,
	} {
		if pinned(image) != want {
			t.Errorf("pinned(%q) = %v, want %v", image, !want, want)
		}
	}
	if _, err := helm(t, "template", "x", "./flashsale"); err == nil || !strings.Contains(err.Error(), "database.url") {
		t.Errorf("without a database the chart rendered (%v); want a refusal naming database.url", err)
	}
}

// The PrometheusRule is deploy/prometheus/rules.yml, the file compose's
// Prometheus loads; the ServiceMonitor scrapes the app's metrics path as
// the job the rules select.
func TestMonitoring(t *testing.T) {
	r := render(t, "production")
	d, ctr := app(t, r)
	rules := all[*monitoringv1.PrometheusRule](r)
	if len(rules) != 2 {
		t.Fatalf("%d PrometheusRules rendered where the CRD exists, want 2 (the app's, the masters')", len(rules))
	}
	master := find[*monitoringv1.PrometheusRule](r, redisSet(t, r).Name)
	if master == nil || len(master.Spec.Groups) != 1 || len(master.Spec.Groups[0].Rules) != 1 {
		t.Fatalf("no PrometheusRule %s with the one alert on the masters", redisSet(t, r).Name)
	}
	if expr := master.Spec.Groups[0].Rules[0].Expr.String(); !strings.Contains(expr, fmt.Sprintf(`statefulset="%s"`, redisSet(t, r).Name)) || !strings.Contains(expr, fmt.Sprintf(`namespace="%s"`, r.namespace)) || !strings.Contains(expr, "> 0") {
		t.Errorf("the masters' alert does not fire on one master of this StatefulSet not ready: %s", expr)
	}
	rules = slices.DeleteFunc(rules, func(p *monitoringv1.PrometheusRule) bool { return p == master })
	// kube-prometheus-stack's Prometheus selects rules and monitors by
	// production.yaml's monitoring.labels.
	for _, o := range []object{rules[0], master} {
		if o.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("%s lacks the label release: kube-prometheus-stack (monitoring.labels)", o.GetName())
		}
	}
	b, err := os.ReadFile("../prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		t.Fatalf("deploy/prometheus/rules.yml as a PrometheusRule spec: %v", err)
	}
	if got, want := toAny(t, rules[0].Spec), toAny(t, file); !reflect.DeepEqual(got, want) {
		t.Errorf("the PrometheusRule differs from deploy/prometheus/rules.yml:\n got %v\nwant %v", got, want)
	}

	c := appContract(t)
	svc := serviceFor(t, r, d.Spec.Template.Labels)
	mons := all[*monitoringv1.ServiceMonitor](r)
	if len(mons) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(mons))
	}
	m := mons[0]
	if m.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("the ServiceMonitor lacks the label release: kube-prometheus-stack (monitoring.labels)")
	}
	if !labels.SelectorFromSet(m.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor does not select the app's Service %s", svc.Name)
	}
	job := regexp.MustCompile(`up\{job="([^"]+)"\}`).FindSubmatch(b)
	if job == nil || svc.Labels[m.Spec.JobLabel] != string(job[1]) {
		t.Errorf("scraped as job %q (label %s), the rules select %q", svc.Labels[m.Spec.JobLabel], m.Spec.JobLabel, job)
	}
	for _, e := range m.Spec.Endpoints {
		if e.Path != c.Metrics {
			t.Errorf("scrapes %s, the app serves %s", e.Path, c.Metrics)
		}
		for _, sp := range svc.Spec.Ports {
			if sp.Name == e.Port && resolvePort(ctr, sp.TargetPort) != containerPort(t, ctr, "http") {
				t.Errorf("scrape port %s does not reach the app", e.Port)
			}
		}
	}

	for _, name := range []string{"defaults", "trial"} {
		if n := len(all[*monitoringv1.PrometheusRule](render(t, name))); n != 0 {
			t.Errorf("%s: a PrometheusRule rendered without the CRD", name)
		}
	}
}

// helm lint --strict passes on both values files.
func TestLint(t *testing.T) {
	for _, name := range []string{"defaults", "production"} {
		args := append([]string{"lint", "--strict", "./flashsale"}, releases[name].args...)
		if out, err := helm(t, args...); err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}

// Only the app's pods reach the masters, on top of their passwords: a stray
// client's DEL of a lock key is outside every lock's model.
func TestRedisOnlyFromTheApp(t *testing.T) {
	eachRelease(t, func(t *testing.T, r *rendered) {
		s := redisSet(t, r)
		d, _ := app(t, r)
		var guarded bool
		for _, p := range all[*networkingv1.NetworkPolicy](r) {
			if !labels.SelectorFromSet(p.Spec.PodSelector.MatchLabels).Matches(labels.Set(s.Spec.Template.Labels)) {
				continue
			}
			guarded = true
			for _, rule := range p.Spec.Ingress {
				if len(rule.From) == 0 {
					t.Errorf("NetworkPolicy %s lets every pod in", p.Name)
				}
				for _, peer := range rule.From {
					if peer.PodSelector == nil || peer.NamespaceSelector != nil || peer.IPBlock != nil ||
						!labels.SelectorFromSet(peer.PodSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) ||
						labels.SelectorFromSet(peer.PodSelector.MatchLabels).Matches(labels.Set(s.Spec.Template.Labels)) {
						t.Errorf("NetworkPolicy %s lets in more than the app's pods: %+v", p.Name, peer)
					}
				}
			}
		}
		if !guarded {
			t.Error("no NetworkPolicy guards the masters")
		}
	})
}
