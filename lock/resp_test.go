package lock

import (
	"bufio"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestAppendCommand(t *testing.T) {
	got := string(appendCommand(nil, "SET", "k", "", "PX", "2000"))
	want := "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$2\r\nPX\r\n$4\r\n2000\r\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestReadReply(t *testing.T) {
	cases := []struct {
		name, wire string
		want       any
		broken     error // nil: the connection is still usable
	}{
		{"simple", "+OK\r\n", "OK", nil},
		{"error reply", "-ERR wrong\r\n", serverError("ERR wrong"), nil},
		{"integer", ":42\r\n", int64(42), nil},
		{"negative", ":-2\r\n", int64(-2), nil},
		{"bulk", "$5\r\nhe\r\no\r\n", "he\r\no", nil},
		{"empty bulk", "$0\r\n\r\n", "", nil},
		{"nil bulk", "$-1\r\n", nil, nil},
		{"array", "*2\r\n$3\r\nkey\r\n:1\r\n", []any{"key", int64(1)}, nil},
		{"nil array", "*-1\r\n", nil, nil},
		{"unknown type", "?x\r\n", nil, errProtocol},
		{"bad integer", ":x\r\n", nil, errProtocol},
		{"bad bulk length", "$-5\r\n", nil, errProtocol},
		{"no CR", "+OK\n", nil, errProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readReply(bufio.NewReader(strings.NewReader(tc.wire)))
			if !errors.Is(err, tc.broken) {
				t.Fatalf("err = %v, want %v", err, tc.broken)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestReplyReaders(t *testing.T) {
	if ok, err := replyOK("OK"); !ok || err != nil {
		t.Errorf("SET NX granted: got %v, %v", ok, err)
	}
	if ok, err := replyOK(nil); ok || err != nil {
		t.Errorf("SET NX refused: got %v, %v", ok, err)
	}
	if _, err := replyOK(serverError("NOPERM")); err == nil {
		t.Error("an error reply must be an error")
	}
	if n, err := replyInt(int64(7)); n != 7 || err != nil {
		t.Errorf("integer: got %v, %v", n, err)
	}
	if _, err := replyInt("7"); !errors.Is(err, errProtocol) {
		t.Errorf("a string where an integer belongs: got %v, want errProtocol", err)
	}
}
