package lock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The RESP2 wire format, as much of it as the Redlock votes need: commands
// are arrays of bulk strings; replies are simple strings, errors, integers,
// bulk strings (nil included) and arrays of those.

// appendCommand appends args as one RESP command to b.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// serverError is an error reply (-ERR …): the node answered, and said no
// to the command itself. The connection stays usable.
type serverError string

func (e serverError) Error() string { return "redis: " + string(e) }

// errProtocol means the node sent something that is not RESP2; the
// connection cannot be trusted after it.
var errProtocol = errors.New("redis protocol error")

// readReply reads one reply: int64, string, nil, []any or serverError. An
// error return means the connection is broken, not that the command failed.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: bad line %q", errProtocol, line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return string(body), nil
	case '-':
		return serverError(body), nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad integer %q", errProtocol, body)
		}
		return n, nil
	case '$':
		n, err := length(body, "bulk")
		if err != nil || n == -1 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := length(body, "array")
		if err != nil || n == -1 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown reply type %q", errProtocol, kind)
}

// length reads a bulk string's or array's length; -1 is nil.
func length(body []byte, what string) (int, error) {
	n, err := strconv.Atoi(string(body))
	if err != nil || n < -1 {
		return 0, fmt.Errorf("%w: bad %s length %q", errProtocol, what, body)
	}
	return n, nil
}

// replyInt reads an integer reply; a nil reply counts as 0 (a SET NX that
// did not set).
func replyInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case nil:
		return 0, nil
	case serverError:
		return 0, v
	}
	return 0, fmt.Errorf("%w: want an integer, got %T", errProtocol, v)
}

// replyOK reads the answer to SET … NX: "OK" if set, nil if the key exists.
func replyOK(v any) (bool, error) {
	switch v := v.(type) {
	case string:
		return v == "OK", nil
	case nil:
		return false, nil
	case serverError:
		return false, v
	}
	return false, fmt.Errorf("%w: want OK or nil, got %T", errProtocol, v)
}
