package cli

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{" a , ,b ,", []string{"a", "b"}},
	} {
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{8000}, "8000"},
		{[]int{1000, 8000, 1000}, "1000,8000,1000"},
	} {
		if got := Join(tc.in); got != tc.want {
			t.Errorf("Join(%v) = %q, want %q", tc.in, got, tc.want)
		}
		if back := Split(Join(tc.in)); len(back) != len(tc.in) {
			t.Errorf("Split(Join(%v)) = %q: %d parts, want %d", tc.in, back, len(back), len(tc.in))
		}
	}
}

func TestPick(t *testing.T) {
	known := []string{"none", "lua", "redlock"}
	for _, tc := range []struct {
		sel     string
		want    []string
		wantErr bool
	}{
		{"", known, false},
		{"all", known, false},
		{"redlock, none", []string{"none", "redlock"}, false},
		{"lua,zinc", nil, true},
		{" , ", nil, true},
	} {
		got, err := Pick(tc.sel, known)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("Pick(%q) = %q, %v; want %q (error %v)", tc.sel, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		exit     int
		ok       bool
		saysArgs bool
	}{
		{nil, 0, true, false},
		{[]string{"-n", "3"}, 0, true, false},
		{[]string{"-h"}, 0, false, false},
		{[]string{"-n", "three"}, 2, false, false},
		{[]string{"-n", "3", "extra"}, 2, false, true},
	} {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("n", 0, "a number")
		var stderr strings.Builder
		exit, ok := Parse(fs, tc.args, &stderr)
		if exit != tc.exit || ok != tc.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", tc.args, exit, ok, tc.exit, tc.ok)
		}
		if says := strings.Contains(stderr.String(), `cmd: unexpected arguments ["extra"]`); says != tc.saysArgs {
			t.Errorf("Parse(%q) said %q", tc.args, stderr.String())
		}
	}
}
