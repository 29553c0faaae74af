package deploy

import (
	"os"
	"testing"

	"flashsale/internal/testsupport"
)

// root is the module root, where docker-compose.yml and the Dockerfile live.
const root = ".."

func TestMain(m *testing.M) {
	code := testsupport.Main(m)
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// read is the text of a file of the repository.
var read = testsupport.Read

// cleanEnv is the test's environment without anything that would change what
// the compose file or the binaries see (FLASHSALE_*, the compose variables).
func cleanEnv() []string { return testsupport.CleanEnv(composeVars...) }

// composeVars are the variables of the compose file that are not FLASHSALE_*.
var composeVars = []string{"LOADTEST_", "COMPOSE_", "APPENDFSYNC", "POSTGRES_PASSWORD", "PUBLISH_", "SOURCE_DIGEST"}
