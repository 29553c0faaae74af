package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashsale/internal/redisacl"
	"flashsale/internal/testsupport"
	"flashsale/loadtest/opfuzz"
)

// TestMain lets the test binary be a holder too: the command re-executes
// its own binary, which under go test is this one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == holderCommand {
		if err := opfuzz.HolderMain(context.Background(), os.Args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testsupport.Main(m))
}

// envInt is an integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// fuzz runs the command with args plus -out and returns its exit code and
// its JSON report.
func fuzz(t *testing.T, within time.Duration, args ...string) (int, opfuzz.Report) {
	t.Helper()
	return fuzzEnv(t, within, os.Getenv, args...)
}

// fuzzEnv is fuzz with the command's environment read from getenv.
func fuzzEnv(t *testing.T, within time.Duration, getenv func(string) string, args ...string) (int, opfuzz.Report) {
	t.Helper()
	testsupport.RequireRedis(t)
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	code := run(ctx, append(args, "-out", out), getenv, &stdout, &stderr)
	t.Logf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	if code != 0 && code != 1 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep opfuzz.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return code, rep
}

// A short search on the lock as it is reports its result in JSON: the
// seed, every sequence with its grants, the double grants counted as the
// findings say, and an exit code that says whether any run failed.
func TestFuzzReportsJSON(t *testing.T) {
	d := 45 * time.Second
	if testing.Short() {
		d = 15 * time.Second
	}
	code, rep := fuzz(t, d+2*time.Minute, "-seed", "11", "-duration", d.String(), "-shrink-runs", "0")
	if rep.Seed != 11 || len(rep.Sequences) == 0 {
		t.Fatalf("seed %d, %d sequences", rep.Seed, len(rep.Sequences))
	}
	grants, unsafe, failed := 0, 0, 0
	for i, s := range rep.Sequences {
		if s.Seed != 11+int64(i) || s.Sequence == "" {
			t.Errorf("sequence %d: seed %d, %q", i, s.Seed, s.Sequence)
		}
		grants += s.Grants
		unsafe += s.Unsafe
		if s.Unsafe > 0 {
			failed++
		}
	}
	if grants == 0 {
		t.Fatal("no holder was granted anything: the search saw nothing")
	}
	if unsafe != rep.Unsafe || failed != rep.Failed || failed != len(rep.Findings) || (code == 1) != (failed > 0) {
		t.Fatalf("double grants %d (report %d), failed runs %d (report %d), %d findings, exit %d",
			unsafe, rep.Unsafe, failed, rep.Failed, len(rep.Findings), code)
	}
}

// appUserEnv is the environment that runs the command with the app's ACL
// on the nodes: the holders as the app's user, the operator as the admin.
func appUserEnv(k string) string {
	if k == "OPFUZZ_APP_ACL" {
		return "1"
	}
	return os.Getenv(k)
}

// A search as the app's user: the nodes run the app's ACL (the default
// user off), so a holder is granted a lease only by connecting as the app's
// user with its password, and the operator's actions run as the admin (an
// action refused would be an action error).
func TestFuzzAsAppUser(t *testing.T) {
	_, rep := fuzzEnv(t, 3*time.Minute, appUserEnv, "-seed", "5", "-sequences", "1", "-duration", "2m", "-shrink-runs", "0")
	grants := 0
	for _, s := range rep.Sequences {
		grants += s.Grants
		for _, e := range s.Errors {
			if strings.Contains(e, "NOPERM") || strings.Contains(e, "WRONGPASS") || strings.Contains(e, "NOAUTH") {
				t.Errorf("seed %d: %s", s.Seed, e)
			}
		}
	}
	if len(rep.Sequences) != 1 || grants == 0 {
		t.Fatalf("%d sequences, %d grants: the holders were not granted anything as %s", len(rep.Sequences), grants, redisacl.AppUser)
	}
}

// The lock closes every hole the search can reach: a search over every op
// finds no double grant. OPFUZZ_SEED, OPFUZZ_MINUTES (default 1) and
// OPFUZZ_PARALLEL (default 1) set the search; a long one is
// OPFUZZ_MINUTES=10. OPFUZZ_APP_USER=1 runs it as the app's user (the app's
// ACL file on the nodes).
func TestFuzzFindsNoDoubleGrant(t *testing.T) {
	testsupport.Long(t, "a minute's search on five nodes")
	seed := envInt(t, "OPFUZZ_SEED", 1)
	d := time.Duration(envInt(t, "OPFUZZ_MINUTES", 1)) * time.Minute
	par := envInt(t, "OPFUZZ_PARALLEL", 1)
	getenv := os.Getenv
	if os.Getenv("OPFUZZ_APP_USER") == "1" {
		getenv = appUserEnv
	}
	_, rep := fuzzEnv(t, d+5*time.Minute, getenv, "-seed", strconv.Itoa(seed), "-duration", d.String(), "-parallel", strconv.Itoa(par))
	if len(rep.Sequences) == 0 || rep.Unsafe > 0 {
		t.Fatalf("%d sequences, %d double grants: %+v", len(rep.Sequences), rep.Unsafe, rep.Findings)
	}
}

// No known attack grants the lock twice: each of attacks.txt replayed
// OPFUZZ_ATTACK_RUNS times (default 2; 20 for the measurement in
// docs/design.md).
func TestAttacksGrantNoLockTwice(t *testing.T) {
	testsupport.Long(t, "every known attack replayed on five nodes")
	attacks, err := opfuzz.Attacks()
	if err != nil {
		t.Fatal(err)
	}
	runs := envInt(t, "OPFUZZ_ATTACK_RUNS", 2)
	for _, a := range attacks {
		t.Run(a.Name, func(t *testing.T) {
			_, rep := fuzz(t, time.Duration(runs)*time.Minute, "-replay", a.Sequence.String(), "-runs", strconv.Itoa(runs))
			if len(rep.Sequences) != runs || rep.Unsafe > 0 {
				t.Fatalf("%d of %d runs, %d double grants: %+v", len(rep.Sequences), runs, rep.Unsafe, rep.Findings)
			}
		})
	}
}
