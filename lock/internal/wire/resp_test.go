package wire

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
)

// An EVAL names how many of its arguments are keys.
func TestEval(t *testing.T) {
	got := Eval("return 1", []string{"k1", "k2"}, "a")
	want := []string{"EVAL", "return 1", "2", "k1", "k2", "a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Eval = %q, want %q", got, want)
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(AppendCommand(nil, "SET", "k", "", "PX", "2000"))
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
		{"error reply", "-ERR wrong\r\n", ServerError("ERR wrong"), nil},
		{"integer", ":42\r\n", int64(42), nil},
		{"negative", ":-2\r\n", int64(-2), nil},
		{"bulk", "$5\r\nhe\r\no\r\n", "he\r\no", nil},
		{"empty bulk", "$0\r\n\r\n", "", nil},
		{"nil bulk", "$-1\r\n", nil, nil},
		{"array", "*2\r\n$3\r\nkey\r\n:1\r\n", []any{"key", int64(1)}, nil},
		{"nil array", "*-1\r\n", nil, nil},
		{"unknown type", "?x\r\n", nil, ErrProtocol},
		{"bad integer", ":x\r\n", nil, ErrProtocol},
		{"bad bulk length", "$-5\r\n", nil, ErrProtocol},
		{"no CR", "+OK\n", nil, ErrProtocol},
		{"bulk past the limit", "$1048577\r\n", nil, ErrProtocol},
		{"array past the limit", "*1025\r\n", nil, ErrProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadReply(bufio.NewReader(strings.NewReader(tc.wire)))
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
	if ok, err := OK("OK"); !ok || err != nil {
		t.Errorf("SET NX granted: got %v, %v", ok, err)
	}
	if ok, err := OK(nil); ok || err != nil {
		t.Errorf("SET NX refused: got %v, %v", ok, err)
	}
	if _, err := OK(ServerError("NOPERM")); err == nil {
		t.Error("an error reply must be an error")
	}
	if n, err := Int(int64(7)); n != 7 || err != nil {
		t.Errorf("integer: got %v, %v", n, err)
	}
	if _, err := Int("7"); !errors.Is(err, ErrProtocol) {
		t.Errorf("a string where an integer belongs: got %v, want ErrProtocol", err)
	}
}

// Which replies fit which commands: a reply that does not fit means the
// replies on that connection no longer line up with its commands.
func TestReplyShapes(t *testing.T) {
	cases := []struct {
		name  string
		want  Shape
		reply any
		fits  bool
	}{
		{"SET NX granted", OKOrNil, "OK", true},
		{"SET NX refused", OKOrNil, nil, true},
		{"SET NX gets CONFIG GET's array", OKOrNil, []any{"notify-keyspace-events", "Kgx"}, false},
		{"SET NX gets a script's integer", OKOrNil, int64(1), false},
		{"SET NX gets INFO's text", OKOrNil, "# Server\r\nrun_id:x", false},
		{"SET NX gets an error reply", OKOrNil, ServerError("NOPERM"), true},
		{"script gets an integer", Integer, int64(0), true},
		{"script gets SET's OK", Integer, "OK", false},
		{"script gets nil", Integer, nil, false},
		{"INFO gets text", Bulk, "# Server", true},
		{"INFO gets an integer", Bulk, int64(3), false},
		{"GET gets nil", BulkOrNil, nil, true},
		{"CONFIG GET gets an array", Array, []any{"a", "b"}, true},
		{"CONFIG GET gets OK", Array, "OK", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Fits(tc.want, tc.reply); got != tc.fits {
				t.Fatalf("fits = %v, want %v", got, tc.fits)
			}
		})
	}
}

// A reply that does not fit the oldest waiting command breaks the whole
// connection: that command and every one queued behind it get an error, and
// none of them is handed a reply meant for another.
func TestMisfitReplyBreaksTheConnection(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := &pipeConn{p: &Pipe{cfg: Config{Addr: "test"}}, nc: client, ready: true}
	type got struct {
		v   any
		err error
	}
	answers := make(chan got, 3)
	for _, want := range []Shape{OKOrNil, OKOrNil, Integer} {
		c.queue = append(c.queue, waiting{want: want, done: func(v any, _ string, err error) { answers <- got{v, err} }})
	}
	go c.read(bufio.NewReader(client))
	// The reply owed to an earlier CONFIG GET, then the replies the two SETs
	// would get: read in step, the first SET would be handed the array and
	// the second the first SET's OK.
	if _, err := server.Write([]byte("*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nKgx\r\n+OK\r\n$-1\r\n")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a := <-answers
		if !errors.Is(a.err, ErrProtocol) {
			t.Fatalf("command %d: got reply %#v, err %v; want ErrProtocol", i, a.v, a.err)
		}
	}
	if !c.broken() {
		t.Fatal("the connection is still in use after a reply that did not fit")
	}
}

// FuzzReadReply feeds arbitrary bytes to the reply reader: it must never
// panic or allocate without bound, and whatever it returns must be one of
// the reply types the pipe understands.
func FuzzReadReply(f *testing.F) {
	for _, seed := range []string{"+OK\r\n", "-ERR x\r\n", ":42\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*2\r\n:1\r\n$1\r\nx\r\n", "*-1\r\n", "*1\r\n*1\r\n+OK\r\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		v, err := ReadReply(bufio.NewReader(bytes.NewReader(wire)))
		if err != nil {
			return
		}
		var check func(v any)
		check = func(v any) {
			switch v := v.(type) {
			case nil, string, int64, ServerError:
			case []any:
				for _, e := range v {
					check(e)
				}
			default:
				t.Fatalf("reply of type %T", v)
			}
		}
		check(v)
	})
}
