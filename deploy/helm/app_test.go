package helm

import (
	"encoding/json"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// contract is deploy/app.json: the storefront's variables, default port and
// probe paths, kept equal to its code by the storefront's own test. The
// storefront's contract_test.go reads the same fields: this module imports
// nothing of the storefront's, whose dependencies it would then carry.
type contract struct {
	Port            int      `json:"port"`
	Listen          string   `json:"listen"`
	Drain           string   `json:"drain"`
	ShutdownTimeout string   `json:"shutdown_timeout"`
	Liveness        string   `json:"liveness"`
	Readiness       string   `json:"readiness"`
	Metrics         string   `json:"metrics"`
	Env             []string `json:"env"`
}

func appContract(t *testing.T) contract {
	t.Helper()
	b, err := os.ReadFile("../app.json")
	if err != nil {
		t.Fatal(err)
	}
	var c contract
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("deploy/app.json: %v", err)
	}
	return c
}

// releaseNames in a fixed order, for subtests.
var releaseNames = []string{"defaults", "production", "trial"}

// app is the release's storefront Deployment and its one container.
func app(t *testing.T, r *rendered) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	for _, d := range all[*appsv1.Deployment](r) {
		if d.Labels["app.kubernetes.io/component"] == "app" {
			if n := len(d.Spec.Template.Spec.Containers); n != 1 {
				t.Fatalf("%s has %d containers, want the storefront alone", d.Name, n)
			}
			return d, d.Spec.Template.Spec.Containers[0]
		}
	}
	t.Fatal("no Deployment labelled app.kubernetes.io/component: app")
	return nil, corev1.Container{}
}

// envOf is the container's variables by name; values from a Secret are
// "secret:<name>/<key>".
func envOf(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s is set twice (the later one wins, silently)", e.Name)
		}
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom != nil:
			t.Errorf("%s comes from neither a value nor a Secret", e.Name)
		default:
			env[e.Name] = e.Value
		}
	}
	return env
}

// helperVar says whether a variable the app does not read is there for
// another reason: SSL_CERT_FILE, which Go's TLS reads (the masters' CA), or
// one from a Secret that only another variable's $(NAME) uses (the Redis
// password inside FLASHSALE_REDIS).
func helperVar(name string, env map[string]string) bool {
	if name == "SSL_CERT_FILE" {
		return true
	}
	if !strings.HasPrefix(env[name], "secret:") {
		return false
	}
	for k, v := range env {
		if k != name && strings.Contains(v, "$("+name+")") {
			return true
		}
	}
	return false
}

// The app gets only variables it reads, the ones it needs, its secrets from
// a Secret, and listens on the port its probes and Service use.
func TestAppEnvironmentAndPort(t *testing.T) {
	c := appContract(t)
	eachRelease(t, func(t *testing.T, r *rendered) {
		d, ctr := app(t, r)
		env := envOf(t, ctr)
		for k := range env {
			if !slices.Contains(c.Env, k) && !helperVar(k, env) {
				t.Errorf("%s sets %s, which the app does not read (deploy/app.json)", d.Name, k)
			}
		}
		for _, must := range []string{c.Listen, "FLASHSALE_REDIS", "FLASHSALE_DB", "FLASHSALE_ADMIN_TOKEN", c.Drain, c.ShutdownTimeout} {
			if env[must] == "" {
				t.Errorf("%s does not set %s", d.Name, must)
			}
		}
		for _, secret := range []string{"FLASHSALE_DB", "FLASHSALE_ADMIN_TOKEN"} {
			ref, ok := strings.CutPrefix(env[secret], "secret:")
			if !ok {
				t.Errorf("%s: %s is a plain value; it carries a secret", d.Name, secret)
				continue
			}
			checkSecretKey(t, r, ref)
		}

		_, port, err := net.SplitHostPort(env[c.Listen])
		if err != nil {
			t.Fatalf("%s=%q: %v", c.Listen, env[c.Listen], err)
		}
		http := containerPort(t, ctr, "http")
		if strconv.Itoa(int(http)) != port {
			t.Errorf("%s listens on %s, the container port http is %d", d.Name, env[c.Listen], http)
		}
		if r.id == "defaults" && int(http) != c.Port {
			t.Errorf("default container port %d, the app's default port is %d", http, c.Port)
		}
		for _, p := range []struct {
			what  string
			probe *corev1.Probe
			path  string
		}{{"readiness", ctr.ReadinessProbe, c.Readiness}, {"liveness", ctr.LivenessProbe, c.Liveness}, {"startup", ctr.StartupProbe, c.Liveness}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s probe", d.Name, p.what)
				continue
			}
			if p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s probe asks %s, the app serves %s", p.what, p.probe.HTTPGet.Path, p.path)
			}
			if got := resolvePort(ctr, p.probe.HTTPGet.Port); got != http {
				t.Errorf("%s probe asks port %s (%d), the app listens on %d", p.what, p.probe.HTTPGet.Port.String(), got, http)
			}
		}
		svc := serviceFor(t, r, d.Spec.Template.Labels)
		for _, sp := range svc.Spec.Ports {
			if got := resolvePort(ctr, sp.TargetPort); got != http {
				t.Errorf("Service %s port %s targets %s (%d), the app listens on %d", svc.Name, sp.Name, sp.TargetPort.String(), got, http)
			}
		}
	})
}

// Stopping a replica: preStop, then -drain, then -shutdown-timeout, all
// within the grace period; the kubelet itself sees the draining replica
// unready within -drain.
func TestAppDrainTimings(t *testing.T) {
	c := appContract(t)
	eachRelease(t, func(t *testing.T, r *rendered) {
		d, ctr := app(t, r)
		env := envOf(t, ctr)
		drain := duration(t, c.Drain, env[c.Drain])
		shutdown := duration(t, c.ShutdownTimeout, env[c.ShutdownTimeout])
		var preStop time.Duration
		if h := ctr.Lifecycle; h == nil || h.PreStop == nil || h.PreStop.Exec == nil {
			t.Errorf("%s has no preStop sleep: the endpoints are dropped while it already refuses", d.Name)
		} else if cmd := h.PreStop.Exec.Command; len(cmd) != 2 || cmd[0] != "sleep" {
			t.Errorf("preStop %q, want [sleep N]", cmd)
		} else {
			preStop = duration(t, "preStop", cmd[1]+"s")
		}
		grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
		if grace == nil {
			t.Fatalf("%s has no terminationGracePeriodSeconds", d.Name)
		}
		need := preStop + drain + shutdown
		if got := time.Duration(*grace) * time.Second; got <= need {
			t.Errorf("terminationGracePeriodSeconds %v, not past preStop %v + drain %v + shutdown timeout %v: in-flight sales would be killed", got, preStop, drain, shutdown)
		}
		if p := ctr.ReadinessProbe; drain > 0 && p != nil {
			if seen := time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second; seen > drain {
				t.Errorf("readiness sees a draining replica after %v, past the drain of %v", seen, drain)
			}
		}
		if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s requests no CPU or no memory: the scheduler and the autoscaler size by them", d.Name)
		}
		if !ctr.Resources.Limits.Cpu().IsZero() {
			t.Errorf("%s has a CPU limit: throttling stretches a lock holder past its lease", d.Name)
		}
	})
}

// A disruption budget covers the replicas; the autoscaler, when on, scales
// this Deployment and leaves its replica count to it.
func TestAppDisruptionBudget(t *testing.T) {
	eachRelease(t, func(t *testing.T, r *rendered) {
		d, _ := app(t, r)
		if pdbFor(t, r, d.Spec.Template.Labels) == nil {
			t.Errorf("no PodDisruptionBudget selects %s's pods", d.Name)
		}
		hpas := all[*autoscalingv2.HorizontalPodAutoscaler](r)
		for _, h := range hpas {
			if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
				t.Errorf("the autoscaler scales %s %s, not %s", ref.Kind, ref.Name, d.Name)
			}
		}
		if len(hpas) > 0 && d.Spec.Replicas != nil {
			t.Errorf("%s sets replicas beside an autoscaler: every upgrade would reset its count", d.Name)
		}
		if r.id == "production" && len(hpas) != 1 {
			t.Errorf("production.yaml: %d autoscalers, want 1", len(hpas))
		}
	})
}

func duration(t *testing.T, what, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
	return d
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, name)
	return 0
}

// resolvePort is the number a named or numbered port means in c.
func resolvePort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// checkSecretKey fails unless "name/key" is a rendered Secret's key, or a
// Secret the values say the operator manages.
func checkSecretKey(t *testing.T, r *rendered, ref string) {
	t.Helper()
	name, key, _ := strings.Cut(ref, "/")
	s := find[*corev1.Secret](r, name)
	if s == nil {
		if !slices.Contains(r.args, "production.yaml") {
			t.Errorf("Secret %s is neither rendered nor named by the values", name)
		}
		return
	}
	if _, ok := s.StringData[key]; !ok {
		if _, ok := s.Data[key]; !ok {
			t.Errorf("Secret %s has no key %s", name, key)
		}
	}
}

// serviceFor is the rendered Service selecting pods with these labels.
func serviceFor(t *testing.T, r *rendered, pod map[string]string) *corev1.Service {
	t.Helper()
	for _, s := range all[*corev1.Service](r) {
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod)) {
			return s
		}
	}
	t.Fatalf("no Service selects pods labelled %v", pod)
	return nil
}

// pdbFor is the rendered PodDisruptionBudget selecting these pods, or nil.
func pdbFor(t *testing.T, r *rendered, pod map[string]string) *policyv1.PodDisruptionBudget {
	t.Helper()
	for _, p := range all[*policyv1.PodDisruptionBudget](r) {
		if sel := p.Spec.Selector; sel != nil && labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(pod)) {
			return p
		}
	}
	return nil
}
