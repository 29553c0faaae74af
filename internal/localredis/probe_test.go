package localredis

import "testing"

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
