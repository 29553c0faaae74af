package cli

import (
	"slices"
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
