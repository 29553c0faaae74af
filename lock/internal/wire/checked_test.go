package wire

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
)

// Checked commands queued while a write is under way share one set of
// checks, written behind the last of them; each still gets its own reply
// and the replies of the checks that followed it.
func TestQueuedChecksAreShared(t *testing.T) {
	p, c, server, writing := openPipe(t, 4)
	go c.read(bufio.NewReader(c.nc))

	check := []Command{{Args: []string{"GET", "m"}, Want: BulkOrNil}}
	got := make(chan string, 3)
	send := func(key string) {
		p.SendChecked(Command{Args: []string{"INCR", key}, Want: Integer}, check, func(v any, cs []any, _ string, err error) {
			got <- fmt.Sprintf("%s=%v %v %v", key, v, cs, err)
		})
	}
	go send("a")
	<-writing // a and its check are being written: b and c queue behind
	send("b")
	send("c")

	r := bufio.NewReader(server)
	var cmds []string
	for len(cmds) < 5 {
		v, err := ReadReply(r)
		if err != nil {
			t.Fatal(err)
		}
		var words []string
		for _, w := range v.([]any) {
			words = append(words, w.(string))
		}
		cmds = append(cmds, strings.Join(words, " "))
	}
	want := []string{"INCR a", "GET m", "INCR b", "INCR c", "GET m"}
	if strings.Join(cmds, "; ") != strings.Join(want, "; ") {
		t.Fatalf("the node was sent %q, want %q", cmds, want)
	}
	if _, err := server.Write([]byte(":1\r\n$1\r\nx\r\n:2\r\n:3\r\n$1\r\ny\r\n")); err != nil {
		t.Fatal(err)
	}
	answers := map[string]bool{}
	for range 3 {
		answers[<-got] = true
	}
	for _, w := range []string{"a=1 [x] <nil>", "b=2 [y] <nil>", "c=3 [y] <nil>"} {
		if !answers[w] {
			t.Errorf("no answer %q among %v", w, answers)
		}
	}
}
