package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The install in docs/operations.md ("Run it on Kubernetes") runs as written
// up to the cluster: its helm lint and helm template lines pass, from the
// repository's root, with the helm under test.
func TestOperationsInstallRenders(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Run it on Kubernetes\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## Run it on Kubernetes"`)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("the Kubernetes section has no sh block")
	}
	helmDir, err := filepath.Abs(filepath.Dir(helmBin(t)))
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if !strings.HasPrefix(line, "helm lint ") && !strings.HasPrefix(line, "helm template ") {
			continue
		}
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		cmd := exec.Command("sh", "-ec", line)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "PATH="+helmDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("%s: %v\n%s", line, err, out.String())
		}
		ran = append(ran, strings.Fields(line)[1])
	}
	if strings.Join(ran, " ") != "lint template" {
		t.Errorf("the install runs helm %v, want lint and then template", ran)
	}
}
