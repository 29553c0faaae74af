// Package redisinfo reads a Redis INFO reply: "field:value" lines under
// "# Section" headings, ended by CRLF. Every part of the project that asks a
// node for its run_id, uptime, role, memory policy or CPU reads the reply
// here, so that one reading serves them all.
package redisinfo

import (
	"fmt"
	"strconv"
	"strings"
)

// Field is the value of field in the INFO reply info, without surrounding
// white space, and whether the reply has the field at all: a missing field
// and an empty value are told apart.
func Field(info, field string) (string, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// Value is Field's value alone: "" when the field is missing.
func Value(info, field string) string {
	v, _ := Field(info, field)
	return v
}

// CPUSeconds is the CPU time, system and user, that a server's INFO cpu
// reply says it has used; an error if either figure is missing or not a
// number.
func CPUSeconds(info string) (float64, error) {
	var total float64
	for _, field := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, ok := Field(info, field)
		if !ok {
			return 0, fmt.Errorf("INFO cpu has no %s", field)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", field, err)
		}
		total += x
	}
	return total, nil
}
