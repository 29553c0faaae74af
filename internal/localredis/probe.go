package localredis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"flashsale/internal/redisinfo"
)

// probe asks the server on addr whether it is up and, when wantPID > 0,
// whether it is the process we started: a node that lost the race for its port
// must not be mistaken for whoever won it. It speaks just enough RESP for
// AUTH, PING and INFO, so readiness checks need no client pool and log nothing.
func probe(ctx context.Context, addr string, who credentials, wantPID int) error {
	call, done, err := session(ctx, addr, who)
	if err != nil {
		return err
	}
	defer done()
	if pong, err := call("PING"); err != nil {
		return fmt.Errorf("PING: %w", err)
	} else if pong != "PONG" {
		return fmt.Errorf("PING: unexpected reply %q", pong)
	}
	if wantPID <= 0 {
		return nil
	}
	info, err := call("INFO", "server")
	if err != nil {
		return fmt.Errorf("INFO server: %w", err)
	}
	if v, ok := redisinfo.Field(info, "process_id"); !ok {
		return errors.New("INFO server: no process_id")
	} else if v != strconv.Itoa(wantPID) {
		return fmt.Errorf("%s is served by pid %s, not by our pid %d", addr, v, wantPID)
	}
	return nil
}

// uptime is how long the server on addr has been up, in whole seconds, as
// its INFO server section says.
func uptime(ctx context.Context, addr string, who credentials) (time.Duration, error) {
	call, done, err := session(ctx, addr, who)
	if err != nil {
		return 0, err
	}
	defer done()
	info, err := call("INFO", "server")
	if err != nil {
		return 0, fmt.Errorf("INFO server: %w", err)
	}
	v, _ := redisinfo.Field(info, "uptime_in_seconds")
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("INFO server: no uptime_in_seconds: %w", err)
	}
	return time.Duration(secs) * time.Second, nil
}

// session opens a short connection to addr, authenticated as who when it
// has a password, and returns a call function for one command at a time on
// it.
func session(ctx context.Context, addr string, who credentials) (call func(args ...string) (string, error), done func(), err error) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, nil, err
	}
	// Unblock a read at once when the caller gives up (e.g. our process died
	// while something else holds the port and never answers).
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	done = func() {
		stop()
		conn.Close()
	}
	r := bufio.NewReader(conn)
	call = func(args ...string) (string, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := io.WriteString(conn, b.String()); err != nil {
			return "", err
		}
		return readReply(r)
	}
	if who.password != "" {
		auth := []string{"AUTH", who.password}
		if who.user != "" {
			auth = []string{"AUTH", who.user, who.password}
		}
		if _, err := call(auth...); err != nil {
			done()
			return nil, nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return call, done, nil
}

// readReply reads one simple-string, error, integer or bulk reply, or an
// array of them, flattened one element a line (enough for the sentinels'
// replies, whose elements hold no newline).
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad array length %q", line)
		}
		elems := make([]string, 0, max(n, 0))
		for range n {
			e, err := readReply(r)
			if err != nil {
				return "", err
			}
			elems = append(elems, e)
		}
		return strings.Join(elems, "\n"), nil
	default:
		return "", fmt.Errorf("unsupported reply %q", line)
	}
}

// pairs reads a flattened field/value reply (readReply) into a map.
func pairs(flat string) map[string]string {
	f := strings.Split(flat, "\n")
	out := make(map[string]string, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		out[f[i]] = f[i+1]
	}
	return out
}

// checkRole checks INFO replication's role of the node on addr.
func checkRole(ctx context.Context, addr, role string) error {
	info, err := command(ctx, addr, "INFO", "replication")
	if err != nil {
		return err
	}
	if !hasField(info, "role", role) {
		return fmt.Errorf("%s is not a %s yet", addr, role)
	}
	return nil
}

func hasField(info, field, want string) bool {
	v, ok := redisinfo.Field(info, field)
	return ok && v == want
}

// command runs one command on a short connection to addr.
func command(ctx context.Context, addr string, args ...string) (string, error) {
	call, done, err := session(ctx, addr, credentials{})
	if err != nil {
		return "", err
	}
	defer done()
	return call(args...)
}
