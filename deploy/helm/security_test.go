package helm

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// pods is every pod the release would run, by the name of what makes it:
// Deployments, StatefulSets, Jobs and bare Pods (helm test's).
func pods(r *rendered) map[string]*corev1.PodSpec {
	out := map[string]*corev1.PodSpec{}
	for _, o := range r.objs {
		switch x := o.(type) {
		case *appsv1.Deployment:
			out["Deployment/"+x.Name] = &x.Spec.Template.Spec
		case *appsv1.StatefulSet:
			out["StatefulSet/"+x.Name] = &x.Spec.Template.Spec
		case *batchv1.Job:
			out["Job/"+x.Name] = &x.Spec.Template.Spec
		case *corev1.Pod:
			out["Pod/"+x.Name] = &x.Spec
		}
	}
	return out
}

// restrictedVolumes are the volume types the "restricted" Pod Security
// level admits.
var restrictedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}

// Every pod of every release passes the "restricted" Pod Security level,
// rule by rule as the admission controller checks them (Kubernetes'
// pod-security-standards, restricted and the baseline it includes).
func TestRestrictedPodSecurity(t *testing.T) {
	eachRelease(t, func(t *testing.T, r *rendered) {
		all := pods(r)
		if len(all) < 2 {
			t.Fatalf("%d pods rendered, want the app's and the masters' at least", len(all))
		}
		for name, p := range all {
			for _, v := range restrictedViolations(p) {
				t.Errorf("%s: %s", name, v)
			}
		}
	})
}

// restrictedViolations lists what in p the restricted level refuses.
func restrictedViolations(p *corev1.PodSpec) []string {
	var bad []string
	if p.HostNetwork || p.HostPID || p.HostIPC {
		bad = append(bad, "shares a host namespace")
	}
	for _, v := range p.Volumes {
		typ := volumeType(v)
		if !slices.Contains(restrictedVolumes, typ) {
			bad = append(bad, "volume "+v.Name+" is of type "+typ)
		}
	}
	psc := p.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		bad = append(bad, "the pod runs as UID 0")
	}
	for _, c := range append(slices.Clone(p.InitContainers), p.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil {
			nonRoot = psc.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot {
			bad = append(bad, c.Name+": runAsNonRoot is not true")
		}
		uid := sc.RunAsUser
		if uid == nil {
			uid = psc.RunAsUser
		}
		if uid == nil || *uid == 0 {
			bad = append(bad, c.Name+": no non-root UID (runAsUser)")
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost {
			bad = append(bad, c.Name+": seccompProfile is neither RuntimeDefault nor Localhost")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad = append(bad, c.Name+": allowPrivilegeEscalation is not false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			bad = append(bad, c.Name+": privileged")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			bad = append(bad, c.Name+": capabilities do not drop ALL")
		} else {
			for _, add := range sc.Capabilities.Add {
				if add != "NET_BIND_SERVICE" {
					bad = append(bad, c.Name+": adds capability "+string(add))
				}
			}
		}
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				bad = append(bad, c.Name+": a host port")
			}
		}
	}
	return bad
}

// volumeType is the source field a volume sets, as the API names it.
func volumeType(v corev1.Volume) string {
	s := v.VolumeSource
	switch {
	case s.ConfigMap != nil:
		return "configMap"
	case s.CSI != nil:
		return "csi"
	case s.DownwardAPI != nil:
		return "downwardAPI"
	case s.EmptyDir != nil:
		return "emptyDir"
	case s.Ephemeral != nil:
		return "ephemeral"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case s.Projected != nil:
		return "projected"
	case s.Secret != nil:
		return "secret"
	case s.HostPath != nil:
		return "hostPath"
	}
	return "another type"
}

// The check itself refuses what the level refuses: a pod that passes it,
// changed in one rule at a time, fails it.
func TestRestrictedCheckRefuses(t *testing.T) {
	yes, no, uid, root := true, false, int64(10001), int64(0)
	ok := func() *corev1.PodSpec {
		return &corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		}
	}
	if v := restrictedViolations(ok()); len(v) != 0 {
		t.Fatalf("a restricted pod: %v", v)
	}
	for what, change := range map[string]func(p *corev1.PodSpec){
		"no runAsNonRoot":      func(p *corev1.PodSpec) { p.SecurityContext.RunAsNonRoot = nil },
		"UID 0":                func(p *corev1.PodSpec) { p.SecurityContext.RunAsUser = &root },
		"no seccomp profile":   func(p *corev1.PodSpec) { p.SecurityContext.SeccompProfile = nil },
		"privilege escalation": func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil },
		"capabilities kept":    func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Capabilities = nil },
		"an added capability": func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		},
		"a hostPath volume": func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		},
		"host network":         func(p *corev1.PodSpec) { p.HostNetwork = true },
		"init container as is": func(p *corev1.PodSpec) { p.InitContainers = []corev1.Container{{Name: "i"}} },
		"a host port": func(p *corev1.PodSpec) {
			p.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		},
		"a privileged container": func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Privileged = &yes },
	} {
		p := ok()
		change(p)
		if v := restrictedViolations(p); len(v) == 0 {
			t.Errorf("%s: passed the check", what)
		}
	}
}

// The Ingress does not take /metrics to the app: the figures are for the
// cluster's Prometheus, not for the internet.
func TestIngressHidesMetrics(t *testing.T) {
	r := render(t, "production")
	d, _ := app(t, r)
	shop := serviceFor(t, r, d.Spec.Template.Labels)
	ings := all[*networkingv1.Ingress](r)
	if len(ings) != 1 {
		t.Fatalf("%d Ingresses in production.yaml's rendering, want 1", len(ings))
	}
	var closed bool
	for _, rule := range ings[0].Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			if p.Path == appContract(t).Metrics && p.PathType != nil && *p.PathType == networkingv1.PathTypeExact {
				svc := find[*corev1.Service](r, p.Backend.Service.Name)
				closed = svc != nil && svc.Name != shop.Name && len(svc.Spec.Selector) == 0
			}
		}
	}
	if !closed {
		t.Error("the Ingress has no exact /metrics path to a Service without pods: the app's figures would be public")
	}
}
