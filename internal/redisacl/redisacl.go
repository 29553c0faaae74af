// Package redisacl holds the Redis users of flashsale, written once: the
// app's user, which can run only the commands the lock, the store and the
// live updates send, and the operator's admin user, which can run the rest
// (flushes, CONFIG, DEBUG, replication, ACL changes …). The local nodes,
// the compose stack and the Helm chart install the same rules (Rules), each
// with passwords of its own.
package redisacl

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The users the rules name.
const (
	AppUser   = "flashsale"
	AdminUser = "flashsale-admin"
)

// The variables in Rules that stand for the two passwords.
const (
	AppPasswordVar   = "FLASHSALE_REDIS_APP_PASSWORD"
	AdminPasswordVar = "FLASHSALE_REDIS_ADMIN_PASSWORD"
)

// Rules is the ACL file with comments and with the passwords as
// ${FLASHSALE_REDIS_APP_PASSWORD} and ${FLASHSALE_REDIS_ADMIN_PASSWORD}.
//
//go:embed users.acl
var Rules string

// ErrPassword reports a password Redis could not take in an ACL file.
var ErrPassword = errors.New("redisacl: a password must be non-empty and hold no space, '#' or newline")

// File is Rules as Redis reads it: the comments and blank lines taken out,
// the two passwords filled in.
func File(appPassword, adminPassword string) ([]byte, error) {
	for _, p := range []string{appPassword, adminPassword} {
		if p == "" || strings.ContainsAny(p, " \t\r\n#") {
			return nil, ErrPassword
		}
	}
	var b strings.Builder
	for _, line := range strings.Split(Rules, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var unknown []string
		line = os.Expand(line, func(name string) string {
			switch name {
			case AppPasswordVar:
				return appPassword
			case AdminPasswordVar:
				return adminPassword
			}
			unknown = append(unknown, name)
			return ""
		})
		if len(unknown) > 0 {
			return nil, fmt.Errorf("redisacl: unknown variable %s in the rules", strings.Join(unknown, ", "))
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return []byte(b.String()), nil
}
