package handlers

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// docs/loadtesting.md's answer table, which a load tester reads beside
// vegeta's status codes, gives every code the status the error table does.
func TestLoadTestingAnswersAreTheErrorTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/loadtesting.md")
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile("(?s)## The answers\n\n(.*?)\n\n").FindSubmatch(doc)
	if table == nil {
		t.Fatal("docs/loadtesting.md has no answer table")
	}
	n := 0
	for _, row := range regexp.MustCompile("(?m)^\\| (\\d{3}) \\| (.*?) \\|").FindAllSubmatch(table[1], -1) {
		status, _ := strconv.Atoi(string(row[1])) // three digits always parse
		for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllSubmatch(row[2], -1) {
			n++
			o, ok := errorTable[string(c[1])]
			switch {
			case !ok:
				t.Errorf("the answer table names %s, which is no error code", c[1])
			case o.status != status:
				t.Errorf("the answer table gives %s status %d, the error table %d", c[1], status, o.status)
			}
		}
	}
	if n < 5 {
		t.Errorf("the answer table names only %d codes", n)
	}
}
