package main

import (
	"errors"
	"slices"
	"testing"
)

func TestSentinelOptions(t *testing.T) {
	for _, tc := range []struct {
		in        string
		name      string
		sentinels []string
		password  string
		bad       bool
	}{
		{in: "redis-sentinel://127.0.0.1:26379/flashsale", name: "flashsale", sentinels: []string{"127.0.0.1:26379"}},
		{in: "redis-sentinel://:pw@10.0.0.1:26379,10.0.0.2:26380,10.0.0.3:26381/sale",
			name: "sale", sentinels: []string{"10.0.0.1:26379", "10.0.0.2:26380", "10.0.0.3:26381"}, password: "pw"},
		{in: "redis://127.0.0.1:6379/0", bad: true},
		{in: "redis-sentinel://127.0.0.1:26379", bad: true},
		{in: "redis-sentinel://127.0.0.1:26379/a/b", bad: true},
		{in: "redis-sentinel://127.0.0.1/flashsale", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			fo, err := sentinelOptions(tc.in)
			if tc.bad {
				if !errors.Is(err, errSentinelURL) {
					t.Fatalf("err = %v, want errSentinelURL", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fo.MasterName != tc.name || !slices.Equal(fo.SentinelAddrs, tc.sentinels) || fo.Password != tc.password {
				t.Fatalf("got %q %q %q, want %q %q %q", fo.MasterName, fo.SentinelAddrs, fo.Password, tc.name, tc.sentinels, tc.password)
			}
		})
	}
}
