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
)

// probe asks the server on addr whether it is up and, when wantPID > 0,
// whether it is the process we started: a node that lost the race for its port
// must not be mistaken for whoever won it. It speaks just enough RESP for
// AUTH, PING and INFO, so readiness checks need no client pool and log nothing.
func probe(ctx context.Context, addr, password string, wantPID int) error {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	// Unblock a read at once when the caller gives up (e.g. our process died
	// while something else holds the port and never answers).
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	r := bufio.NewReader(conn)
	call := func(args ...string) (string, error) {
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
	if password != "" {
		if _, err := call("AUTH", password); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
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
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != strconv.Itoa(wantPID) {
				return fmt.Errorf("%s is served by pid %s, not by our pid %d", addr, v, wantPID)
			}
			return nil
		}
	}
	return errors.New("INFO server: no process_id")
}

// readReply reads one simple-string, error, integer or bulk reply.
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
	default:
		return "", fmt.Errorf("unsupported reply %q", line)
	}
}
