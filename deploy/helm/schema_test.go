package helm

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// templateWith renders the defaults with more arguments.
func templateWith(t *testing.T, args ...string) (string, error) {
	t.Helper()
	rel := releases["defaults"]
	all := append([]string{"template", rel.name, "./flashsale", "--namespace", rel.namespace}, rel.args...)
	return helm(t, append(all, args...)...)
}

// values.schema.json refuses at install what would render and then fail,
// or run wrongly, in the cluster; each refusal names the value.
func TestSchemaRefuses(t *testing.T) {
	for _, c := range []struct {
		what  string
		set   []string
		names string // in helm's error
	}{
		{"a TTL without a unit", []string{"--set-string", "app.lockTTL=2"}, "lockTTL"},
		{"a TTL as a number", []string{"--set", "app.lockTTL=2"}, "lockTTL"},
		{"a drain without a unit", []string{"--set-string", "app.drain=5"}, "drain"},
		{"a lock wait in words", []string{"--set-string", "app.lockWait=one second"}, "lockWait"},
		{"an even node count", []string{"--set", "redis.nodes=4"}, "nodes"},
		{"no nodes", []string{"--set", "redis.nodes=0"}, "nodes"},
		{"one node", []string{"--set", "redis.nodes=1"}, "nodes"},
		{"redis:latest", []string{"--set", "redis.image=redis:latest"}, "image"},
		{"redis:7", []string{"--set", "redis.image=redis:7"}, "image"},
		{"redis without a tag", []string{"--set", "redis.image=redis"}, "image"},
		{"postgres:latest", []string{"--set", "postgres.image=postgres:latest"}, "image"},
		{"the app's latest", []string{"--set", "image.tag=latest"}, "tag"},
		{"a misspelled extraEnv name", []string{"--set-string", "app.extraEnv.FLASHSALE_BACTH=true"}, "extraEnv"},
		{"a variable the chart sets, in extraEnv", []string{"--set-string", "app.extraEnv.FLASHSALE_LOCK_TTL=5s"}, "extraEnv"},
		{"other Redis nodes, in extraEnv", []string{"--set-string", "app.extraEnv.FLASHSALE_LOCAL_NODES=5"}, "extraEnv"},
		{"a misspelled value", []string{"--set", "redis.node=5"}, "node"},
		{"an unknown appendfsync", []string{"--set", "redis.appendfsync=sometimes"}, "appendfsync"},
		{"an unknown spread rule", []string{"--set", "redis.zoneSpread.whenUnsatisfiable=Never"}, "whenUnsatisfiable"},
		{"an unknown rollout policy", []string{"--set", "rollout.onSharedChange=roll"}, "onSharedChange"},
		{"a database that is not PostgreSQL", []string{"--set", "database.url=mysql://x"}, "url"},
	} {
		t.Run(c.what, func(t *testing.T) {
			_, err := templateWith(t, c.set...)
			if err == nil {
				t.Fatalf("%v rendered; want a refusal", c.set)
			}
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), c.names) {
				t.Errorf("%v: refused, but not by the schema naming %s: %v", c.set, c.names, err)
			}
		})
	}
	// And what it must take.
	for _, ok := range [][]string{
		{"--set", "redis.nodes=7"},
		{"--set", "redis.image=registry.example.com:5000/redis:7.2.11"},
		{"--set", "redis.image=redis@sha256:" + strings.Repeat("ab", 32)},
		{"--set-string", "app.lockTTL=1m30s"},
		{"--set-string", "app.extraEnv.FLASHSALE_NAMESPACE=shop:"},
		{"--set", "app.extraEnv.FLASHSALE_BATCH=true"},
	} {
		if _, err := templateWith(t, ok...); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
}

// The schema's extraEnv names are the app's variables (deploy/app.json)
// that the chart does not set itself; the rest are left out on purpose.
func TestSchemaExtraEnvIsTheAppsVariables(t *testing.T) {
	b, err := os.ReadFile("flashsale/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			App struct {
				Properties struct {
					ExtraEnv struct {
						PropertyNames struct {
							Enum []string `json:"enum"`
						} `json:"propertyNames"`
					} `json:"extraEnv"`
				} `json:"properties"`
			} `json:"app"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	extra := schema.Properties.App.Properties.ExtraEnv.PropertyNames.Enum
	// Other Redis than the chart's masters: in-process nodes (each replica
	// would lock against itself) or Sentinel.
	notHere := []string{"FLASHSALE_LOCAL_AOF", "FLASHSALE_LOCAL_FSYNC", "FLASHSALE_LOCAL_NODES", "FLASHSALE_REDIS_SENTINEL"}
	_, ctr := app(t, render(t, "defaults"))
	set := envOf(t, ctr)
	for _, name := range appContract(t).Env {
		_, chart := set[name]
		in := slices.Contains(extra, name)
		switch {
		case chart && in:
			t.Errorf("%s is set by the chart and taken in extraEnv: it would be set twice", name)
		case slices.Contains(notHere, name) && in:
			t.Errorf("%s is taken in extraEnv", name)
		case !chart && !in && !slices.Contains(notHere, name):
			t.Errorf("the app reads %s; the schema's extraEnv does not take it", name)
		}
	}
	for _, name := range extra {
		if !slices.Contains(appContract(t).Env, name) {
			t.Errorf("the schema's extraEnv takes %s, which the app does not read", name)
		}
	}
}

// sharedAnnotation is the shared-settings hash a rendering carries.
func sharedAnnotation(t *testing.T, out string) (string, *appsv1.Deployment) {
	t.Helper()
	objs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := app(t, &rendered{objs: objs})
	h := d.Annotations["flashsale.io/shared-settings"]
	if h == "" || d.Spec.Template.Annotations["flashsale.io/shared-settings"] != h {
		t.Fatalf("the Deployment carries shared settings %q, its pods %q", h, d.Spec.Template.Annotations["flashsale.io/shared-settings"])
	}
	return h, d
}

// An upgrade that changes what every replica must share cannot roll: it
// is refused, or with rollout.onSharedChange=recreate it stops every old
// replica before a new one starts. Settings a replica may hold alone roll
// as before.
func TestSharedSettingsChangeDoesNotRoll(t *testing.T) {
	out, err := templateWith(t)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := sharedAnnotation(t, out)
	prev := []string{"--set", "rollout.previousSharedSettings=" + before}
	for _, c := range []struct {
		what   string
		set    []string
		shared bool
	}{
		{"five masters to seven", []string{"--set", "redis.nodes=7"}, true},
		{"another port", []string{"--set", "redis.port=6380"}, true},
		{"single-node lock to Redlock's", []string{"--set", "app.lock=lua"}, true},
		{"-production", []string{"--set", "app.production=true"}, true},
		{"another key namespace", []string{"--set-string", "app.extraEnv.FLASHSALE_NAMESPACE=shop2:"}, true},
		{"TLS to the masters", []string{"--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=t"}, true},
		{"a log level", []string{"--set", "app.logLevel=debug"}, false},
		{"more replicas", []string{"--set", "app.replicas=5"}, false},
		{"a longer drain", []string{"--set-string", "app.drain=8s"}, false},
		{"nothing", nil, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			set := append(slices.Clone(prev), c.set...)
			out, err := templateWith(t, set...)
			if c.shared {
				if err == nil || !strings.Contains(err.Error(), "rollout.onSharedChange=recreate") {
					t.Fatalf("an upgrade changing %s was not refused (%v)", c.what, err)
				}
				out, err = templateWith(t, append(set, "--set", "rollout.onSharedChange=recreate")...)
				if err != nil {
					t.Fatal(err)
				}
				after, d := sharedAnnotation(t, out)
				if after == before {
					t.Errorf("%s leaves the shared settings' hash as it was", c.what)
				}
				if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
					t.Errorf("with onSharedChange=recreate the strategy is %s, want Recreate", d.Spec.Strategy.Type)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			after, d := sharedAnnotation(t, out)
			if after != before {
				t.Errorf("%s changes the shared settings' hash", c.what)
			}
			if s := d.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
				t.Errorf("an unchanged hash does not roll one new replica ready before an old one goes: %+v", s)
			}
		})
	}
}
