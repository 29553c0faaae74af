package deploy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"flashsale/internal/redisacl"
)

// deploy/app.json is the one list of what a deployment must know of the
// app (its variables, port and probe paths), held equal to the code by the
// storefront's contract_test.go and read by the Helm chart's checks. Here
// compose is held to it too, without building the app.
func TestComposeFollowsTheAppContract(t *testing.T) {
	var c struct {
		Port      int      `json:"port"`
		Readiness string   `json:"readiness"`
		Env       []string `json:"env"`
	}
	if err := json.Unmarshal([]byte(read(t, "deploy/app.json")), &c); err != nil {
		t.Fatalf("deploy/app.json: %v", err)
	}
	// The Redis users' passwords are the ACL file's variables, which the
	// Redis services fill in; the app never reads them.
	acl := []string{redisacl.AppPasswordVar, redisacl.AdminPasswordVar}
	for _, f := range []string{"docker-compose.yml", "Dockerfile", "deploy/loadtest/entrypoint.sh"} {
		for _, v := range envName.FindAllString(read(t, f), -1) {
			if !slices.Contains(c.Env, v) && !slices.Contains(acl, v) {
				t.Errorf("%s uses $%s, which deploy/app.json does not list", f, v)
			}
		}
	}
	probe := fmt.Sprintf("http://127.0.0.1:%d%s", c.Port, c.Readiness)
	for _, f := range []string{"docker-compose.yml", "Dockerfile"} {
		if !strings.Contains(read(t, f), probe) {
			t.Errorf("%s's health check does not ask %s", f, probe)
		}
	}
}
