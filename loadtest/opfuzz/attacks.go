package opfuzz

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed attacks.txt
var attacksText string

// Attack is a known sequence of operator actions that granted the lock
// twice, kept to be replayed against every change of the lock.
type Attack struct {
	Name     string
	Sequence Sequence
}

// Attacks are the sequences of attacks.txt, for five nodes.
func Attacks() ([]Attack, error) {
	var out []Attack
	for line := range strings.SplitSeq(attacksText, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, text, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("attacks.txt: %q has no name", line)
		}
		seq, err := Parse(text, 5)
		if err != nil {
			return nil, fmt.Errorf("attacks.txt: %s: %w", name, err)
		}
		out = append(out, Attack{Name: strings.TrimSpace(name), Sequence: seq})
	}
	return out, nil
}
