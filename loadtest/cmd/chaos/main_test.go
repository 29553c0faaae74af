package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad input is exit status 2, before anything is started; -h is 0.
func TestRunRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		say  string
	}{
		{[]string{"-h"}, 0, "-faults"},
		{[]string{"-variants", "mutex"}, 2, "unknown name"},
		{[]string{"-faults", "meteor"}, 2, "unknown name"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"-multi-share", "-0.1", "-out", t.TempDir()}, 2, "not a share between 0 and 1"},
	} {
		var stdout, stderr bytes.Buffer
		if got := run(context.Background(), tc.args, &stdout, &stderr); got != tc.want || !strings.Contains(stderr.String(), tc.say) {
			t.Errorf("%v: exit %d, want %d; stderr %q should say %q", tc.args, got, tc.want, stderr.String(), tc.say)
		}
	}
}
