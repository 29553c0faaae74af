package redisinfo

import "testing"

func TestField(t *testing.T) {
	const info = "# Server\r\nredis_version:7.0.15\r\nrun_id:8e92\r\nuptime_in_seconds: 277 \r\nconfig_file:\r\n\r\n# Replication\r\nrole:master"
	tests := []struct {
		field, want string
		ok          bool
	}{
		{"run_id", "8e92", true},
		{"uptime_in_seconds", "277", true},
		{"config_file", "", true}, // present, empty
		{"role", "master", true},  // last line, no CRLF
		{"uptime", "", false},     // a prefix of a field is not the field
		{"Server", "", false},     // a heading is not a field
		{"master_host", "", false},
	}
	for _, tc := range tests {
		got, ok := Field(info, tc.field)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Field(%q) = %q, %v; want %q, %v", tc.field, got, ok, tc.want, tc.ok)
		}
		if v := Value(info, tc.field); v != tc.want {
			t.Errorf("Value(%q) = %q, want %q", tc.field, v, tc.want)
		}
	}
}

func TestCPUSeconds(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		want       float64
		ok         bool
	}{
		{"both", "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500000\r\nused_cpu_sys_children:9.000000\r\n", 1.75, true},
		{"user missing", "# CPU\r\nused_cpu_sys:1.250000\r\n", 0, false},
		{"not a number", "used_cpu_sys:x\r\nused_cpu_user:0.5\r\n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CPUSeconds(tc.info)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("CPUSeconds = %v, %v; want %v, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}
