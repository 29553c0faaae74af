package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// helmVersion is the helm .ci/run builds; a test that finds another one
// says so, since lint and template rules change between releases.
const helmVersion = "v3.22.0"

// kubeVersion is the cluster the chart is rendered for: a helm built with
// go install assumes v1.20, older than Chart.yaml's kubeVersion allows.
const kubeVersion = "1.34.0"

// A rendering: a release of the chart under a name, a namespace and values.
type release struct {
	name      string
	namespace string
	args      []string // values files and --set, relative to deploy/helm
	apis      []string // --api-versions: what the cluster would have
}

// The releases every check runs on. defaults gives the one value the chart
// cannot default (where the orders live); production is production.yaml,
// rendered as on a cluster with the Prometheus Operator; trial runs the
// in-chart PostgreSQL.
var releases = map[string]release{
	"defaults":   {"shop", "shop", []string{"--set", "database.url=postgres://flashsale:pw@db.example:5432/flashsale"}, nil},
	"production": {"flashsale", "sales", []string{"-f", "production.yaml"}, operatorAPIs},
	"trial":      {"try", "default", []string{"--set", "postgres.enabled=true", "--set", "postgres.password=try-it"}, nil},
}

// operatorAPIs tells helm template the Prometheus Operator's CRDs exist.
var operatorAPIs = []string{"--api-versions", "monitoring.coreos.com/v1/PrometheusRule", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}

// helmBin is the helm binary: $HELM, else helm on PATH, else the one
// `go install` put in GOPATH/bin. Missing, the tests fail in CI and skip
// elsewhere.
func helmBin(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if h, err := exec.LookPath("helm"); err == nil {
		return h
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		h := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(h); err == nil {
			return h
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no helm binary (HELM, PATH, GOPATH/bin); .ci/run builds it")
	}
	t.Skip("no helm binary; go install helm.sh/helm/v3/cmd/helm@" + helmVersion)
	return ""
}

// helm runs helm in deploy/helm and returns its standard output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if args[0] == "template" || args[0] == "lint" {
		args = append(args, "--kube-version", kubeVersion)
	}
	cmd := exec.Command(helmBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// scheme knows the core Kubernetes API groups and the Prometheus
// Operator's: a kind outside them does not decode.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// strict decodes YAML into the registered type of its apiVersion and kind,
// refusing an unknown or duplicated field and a value of the wrong type,
// as the API server's strict field validation does.
var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits helm template's output into objects, each decoded strictly.
func decode(rendered string) ([]object, error) {
	var objs []object
	for _, doc := range docSep.Split(rendered, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%w in\n%s", err, doc)
		}
		o, ok := obj.(object)
		if !ok {
			return nil, fmt.Errorf("%v is not an object with metadata", gvk)
		}
		o.GetObjectKind().SetGroupVersionKind(*gvk)
		objs = append(objs, o)
	}
	return objs, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// object is what every rendered document decodes to: a typed API object
// with metadata.
type object interface {
	runtime.Object
	metav1.Object
}

// rendered is one release's objects, rendered and decoded once per run.
type rendered struct {
	id string // its key in releases
	release
	objs []object
}

var (
	renderMu    sync.Mutex
	renderCache = map[string]*rendered{}
)

// render renders and decodes a release of releases, once per test binary.
func render(t *testing.T, name string) *rendered {
	t.Helper()
	renderMu.Lock()
	defer renderMu.Unlock()
	if r, ok := renderCache[name]; ok {
		return r
	}
	rel := releases[name]
	out, err := helm(t, append([]string{"template", rel.name, "./flashsale", "--namespace", rel.namespace}, append(rel.args, rel.apis...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r := &rendered{name, rel, objs}
	renderCache[name] = r
	return r
}

// eachRelease runs check as a subtest on each release's objects.
func eachRelease(t *testing.T, check func(t *testing.T, r *rendered)) {
	for _, name := range releaseNames {
		t.Run(name, func(t *testing.T) { check(t, render(t, name)) })
	}
}

// find is the rendered object of kind T named name, or nil.
func find[T object](r *rendered, name string) T {
	var zero T
	for _, o := range r.objs {
		if x, ok := o.(T); ok && o.GetName() == name {
			return x
		}
	}
	return zero
}

// all is every rendered object of kind T.
func all[T object](r *rendered) []T {
	var out []T
	for _, o := range r.objs {
		if x, ok := o.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// toAny is v as encoding/json sees it: maps, slices, strings, numbers.
func toAny(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
