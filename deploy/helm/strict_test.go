package helm

import (
	"strings"
	"testing"
)

// The decoding the checks rely on refuses what an API server's strict
// field validation refuses: an unknown field, a duplicated one, a value of
// the wrong type, a kind no scheme knows.
func TestStrictDecodingRefuses(t *testing.T) {
	const ok = `apiVersion: v1
kind: Service
metadata:
  name: s
spec:
  ports:
    - port: 80
`
	if _, err := decode(ok); err != nil {
		t.Fatalf("a valid Service: %v", err)
	}
	for what, doc := range map[string]string{
		"unknown field":   strings.Replace(ok, "    - port: 80", "    - port: 80\n      targetPorts: http", 1),
		"duplicate field": strings.Replace(ok, "  name: s", "  name: s\n  name: t", 1),
		"wrong type":      strings.Replace(ok, "port: 80", "port: eighty", 1),
		"unknown kind":    strings.Replace(ok, "kind: Service", "kind: Servise", 1),
		"misplaced field": strings.Replace(ok, "spec:", "spec:\n  replicas: 2", 1),
	} {
		if _, err := decode(ok + "---\n" + doc); err == nil {
			t.Errorf("%s: decoded without an error", what)
		}
	}
}
