package main

import (
	"encoding/json"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"flashsale/internal/testsupport"
)

// appContract is deploy/app.json: what a deployment must know of the app
// (the variables it reads, its default port, the paths an orchestrator
// probes). The Helm chart's checks (deploy/helm) read it instead of a copy
// of their own; this test keeps it equal to the code.
type appContract struct {
	Port            int      `json:"port"`
	Listen          string   `json:"listen"`
	Drain           string   `json:"drain"`
	ShutdownTimeout string   `json:"shutdown_timeout"`
	Liveness        string   `json:"liveness"`
	Readiness       string   `json:"readiness"`
	Metrics         string   `json:"metrics"`
	Env             []string `json:"env"`
}

func readContract(t *testing.T) appContract {
	t.Helper()
	var c appContract
	if err := json.Unmarshal([]byte(testsupport.Read(t, "deploy/app.json")), &c); err != nil {
		t.Fatalf("deploy/app.json: %v", err)
	}
	return c
}

// Every variable parseConfig asks the environment for, and no other, is in
// the list; the port is the default -addr's.
func TestAppContractMatchesConfig(t *testing.T) {
	c := readContract(t)
	asked := map[string]bool{}
	if _, err := parseConfig([]string{"flashsale"}, func(k string) string { asked[k] = true; return "" }, io.Discard); err != nil {
		t.Fatalf("parseConfig with an empty environment: %v", err)
	}
	want := slices.Sorted(maps.Keys(asked))
	if !slices.Equal(c.Env, want) {
		j, _ := json.MarshalIndent(want, "  ", "  ")
		t.Errorf("deploy/app.json env is %q; the app reads\n  %s", c.Env, j)
	}
	for _, v := range []string{c.Listen, c.Drain, c.ShutdownTimeout} {
		if !asked[v] {
			t.Errorf("deploy/app.json names %q, which the app does not read", v)
		}
	}
	def, err := parseConfig([]string{"flashsale"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(def.addr)
	if strconv.Itoa(c.Port) != port {
		t.Errorf("deploy/app.json port %d, the default -addr is %s", c.Port, def.addr)
	}
}

// The paths the contract names for probes and scraping answer 200 on a
// running app.
func TestAppContractPathsAnswer(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	c := readContract(t)
	nodes := testsupport.Redis(t, 3)
	app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t))
	for _, p := range []string{c.Liveness, c.Readiness, c.Metrics} {
		if !strings.HasPrefix(p, "/") {
			t.Errorf("deploy/app.json path %q is not a path", p)
			continue
		}
		app.mustCall("GET", p, "", 200)
	}
}
