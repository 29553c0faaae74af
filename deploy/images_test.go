package deploy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The compose test must test the code in the tree: docker-compose does not
// rebuild an image that exists (`run` never does, `up` only with --build),
// so an image left by an earlier checkout would be run as if it were this
// one. Every image with a `build:` is therefore built by the test, labelled
// with a digest of the build context, and checked before it runs.

// digestLabel is the image label the Dockerfile sets from its
// SOURCE_DIGEST build argument.
const digestLabel = "flashsale.source-digest"

// sourceDigest is a digest of the build context docker is sent: every file
// under the module root that .dockerignore lets through, by path and
// content.
func sourceDigest(t *testing.T) string {
	t.Helper()
	ignore := dockerignore(t)
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignored(ignore, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the build context: %v", err)
	}
	slices.Sort(files)
	h := sha256.New()
	for _, rel := range files {
		f, err := os.Open(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(h, rel+"\x00")
		_, err = io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// dockerignore is the patterns of .dockerignore. Only the forms it uses are
// understood (a name, a glob, a leading / or **/); anything else fails the
// test rather than being read wrong.
func dockerignore(t *testing.T) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(read(t, ".dockerignore")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := strings.TrimPrefix(line, "/")
		if strings.HasPrefix(p, "!") || strings.Contains(strings.TrimPrefix(p, "**/"), "**") {
			t.Fatalf(".dockerignore: %q is a form this test does not read; teach sourceDigest it", line)
		}
		out = append(out, p)
	}
	return out
}

// ignored reports whether a slash-separated path relative to the root
// matches a pattern, as docker reads it: from the root, a directory's
// match covering everything under it, **/ matching at any depth.
func ignored(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		anywhere := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(p, "**/")
		depth := strings.Count(p, "/") + 1
		// A match of the leading parts covers everything under them.
		for start := 0; start+depth <= len(parts) && (start == 0 || anywhere); start++ {
			if ok, _ := path.Match(p, strings.Join(parts[start:start+depth], "/")); ok {
				return true
			}
		}
	}
	return false
}

func TestDockerignoreReading(t *testing.T) {
	patterns := []string{".git", "out", "**/*_test.go", "flashsale"}
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{".git/config", true},
		{"out/loadtest/report.json", true},
		{"lock/out/x.go", false},
		{"lock/lock_test.go", true},
		{"lock_test.go", true},
		{"lock/lock.go", false},
		{"flashsale", true},
		{"cmd/flashsale", false},
		{"main.go", false},
	} {
		if got := ignored(patterns, c.rel); got != c.want {
			t.Errorf("ignored(%q) = %v, want %v", c.rel, got, c.want)
		}
	}
}

// build builds every service of the project that has a `build:` (the load
// runner's profile included); the compose file passes the stack's
// SOURCE_DIGEST on as the label.
func (s *stack) build() {
	s.t.Helper()
	start := time.Now()
	s.must(30*time.Minute, "--profile", "loadtest", "build")
	s.t.Logf("build (sources %s): %s", s.digest, time.Since(start).Round(time.Second))
	s.fromTree(slices.Sorted(maps.Keys(s.builtImages()))...)
}

// builtImages is the image of every service with a `build:`, by service.
func (s *stack) builtImages() map[string]string {
	s.t.Helper()
	svcs, err := loadCompose(s.t, composeEnv)
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]string{}
	for name, svc := range svcs {
		if svc["build"] != nil {
			out[name] = str(svc["image"])
		}
	}
	if len(out) == 0 {
		s.t.Fatal("no service of docker-compose.yml has a build:")
	}
	return out
}

// fromTree fails the test unless every named service's image carries this
// tree's digest, and every container of theirs runs that very image.
func (s *stack) fromTree(services ...string) {
	s.t.Helper()
	images := s.builtImages()
	for _, svc := range services {
		img, ok := images[svc]
		if !ok {
			s.t.Fatalf("service %s has no build: in docker-compose.yml", svc)
		}
		id := s.docker("image", "inspect", "-f", "{{.Id}}", img)
		got := s.docker("image", "inspect", "-f", `{{index .Config.Labels "`+digestLabel+`"}}`, img)
		if got != s.digest {
			s.t.Fatalf("image %s of %s was built from other sources (label %s=%q, this tree is %q): "+
				"a stale image would test old code; build it from this tree (docker compose build)", img, svc, digestLabel, got, s.digest)
		}
		out, _ := s.run(time.Minute, s.composeArgs("ps", "-q", svc)...)
		for _, c := range strings.Fields(out) {
			if running := s.docker("inspect", "-f", "{{.Image}}", c); running != id {
				s.t.Fatalf("container %s of %s runs image %s, not %s built from this tree", c[:12], svc, running, id)
			}
		}
	}
}
