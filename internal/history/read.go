package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// ReadFiles reads every record of the given JSON-lines files. A last line
// cut short (a process killed mid-write) is skipped; any other bad line is
// an error.
func ReadFiles(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		recs, err := Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("history: %s: %w", p, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// Read reads JSON-lines records from r.
func Read(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var bad error
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		if bad != nil {
			return nil, bad // a bad line that was not the last
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			bad = fmt.Errorf("line %d: %w", line, err)
			continue
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}
