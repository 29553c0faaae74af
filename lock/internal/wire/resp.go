package wire

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

// AppendCommand appends args as one RESP command to b.
func AppendCommand(b []byte, args ...string) []byte {
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

// Eval is the command that runs the Lua script src with keys and args.
// EVAL rather than EVALSHA: Redis caches the compiled script by its hash
// either way, and a node that restarted or flushed its script cache needs
// no second trip.
func Eval(src string, keys []string, args ...string) []string {
	cmd := make([]string, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVAL", src, strconv.Itoa(len(keys)))
	cmd = append(cmd, keys...)
	return append(cmd, args...)
}

// ServerError is an error reply (-ERR …): the node answered, and said no
// to the command itself. The connection stays usable.
type ServerError string

func (e ServerError) Error() string { return "redis: " + string(e) }

// ErrProtocol means the node sent something that is not RESP2; the
// connection cannot be trusted after it.
var ErrProtocol = errors.New("redis protocol error")

// ReadReply reads one reply: int64, string, nil, []any or ServerError. An
// error return means the connection is broken, not that the command failed.
func ReadReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: bad line %q", ErrProtocol, line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return string(body), nil
	case '-':
		return ServerError(body), nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad integer %q", ErrProtocol, body)
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
			if out[i], err = ReadReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown reply type %q", ErrProtocol, kind)
}

// Limits on what a node may send: far above any reply a vote or a handshake
// gets (INFO is a few kilobytes, CONFIG GET two strings), far below what
// could exhaust memory if a node, or something posing as one, sent a
// length it never meant to fill.
const (
	maxBulk  = 1 << 20
	maxArray = 1 << 10
)

// length reads a bulk string's or array's length; -1 is nil.
func length(body []byte, what string) (int, error) {
	limit := maxBulk
	if what == "array" {
		limit = maxArray
	}
	n, err := strconv.Atoi(string(body))
	if err != nil || n < -1 || n > limit {
		return 0, fmt.Errorf("%w: bad %s length %q", ErrProtocol, what, body)
	}
	return n, nil
}

// Shape says which replies fit a command. A reply that does not fit is not
// a "no" from the node: it means replies and commands no longer line up on
// that connection (a reply owed to an earlier command, say), and nothing read
// there can be trusted any more. An error reply fits every command.
type Shape func(v any) bool

// OKOrNil fits SET … NX: +OK if set, a nil bulk string if the key exists.
func OKOrNil(v any) bool {
	s, ok := v.(string)
	return v == nil || ok && s == "OK"
}

// Integer fits the scripts, which all return an integer.
func Integer(v any) bool {
	_, ok := v.(int64)
	return ok
}

// Bulk fits INFO: a bulk string.
func Bulk(v any) bool {
	_, ok := v.(string)
	return ok
}

// BulkOrNil fits GET.
func BulkOrNil(v any) bool { return v == nil || Bulk(v) }

// Array fits CONFIG GET.
func Array(v any) bool {
	_, ok := v.([]any)
	return ok
}

// Fits reports whether v is an acceptable reply for a command of Shape s.
func Fits(s Shape, v any) bool {
	if _, ok := v.(ServerError); ok {
		return true
	}
	return s(v)
}

// Int reads an integer reply.
func Int(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case ServerError:
		return 0, v
	}
	return 0, fmt.Errorf("%w: want an integer, got %T", ErrProtocol, v)
}

// OK reads the answer to SET … NX: "OK" if set, nil if the key exists.
func OK(v any) (bool, error) {
	switch v := v.(type) {
	case string:
		if v == "OK" {
			return true, nil
		}
	case nil:
		return false, nil
	case ServerError:
		return false, v
	}
	return false, fmt.Errorf("%w: want OK or nil, got %#v", ErrProtocol, v)
}
