package curriculum

import (
	"embed"
	"flashsale/inventory"
	"flashsale/lock"
	"flashsale/lock/ladder"
	"slices"
	"strings"
	"unicode/utf8"
)

// Lesson is one rung of lock's ladder with what the workshop teaches about
// it and what the load and chaos runners expect of it.
type Lesson struct {
	// Variant is the rung as package lock declares it: its name (as in the
	// X-Lock-Variant header), file, guard, fencing and correctness.
	ladder.Rung
	// StoreGuarded lessons take no Redis lock: the store keeps the sale
	// right (inventory.Designs).
	StoreGuarded bool

	// Reference is the file of the correct rung this one is read beside,
	// named as Variant.File is. A broken rung's file differs from its
	// reference by its flaw; a fenced rung's file holds only what fencing
	// adds to the rung it builds on; a store-guarded rung is correct on its
	// own and is its own reference.
	Reference string
	// ShowsWith is the matrix column (a scenario name) the workshop shows
	// the rung under: the one that breaks it, or, for a correct rung, the
	// one that breaks the rung before it.
	ShowsWith string
	// Why is the workshop's paragraph on the rung (why/<rung>.md): why it
	// breaks, or why it holds. WhyZh is the same paragraph in Chinese
	// (why/zh/<rung>.md), for a room that reads Chinese: rung names,
	// commands, keys and numbers as in Why.
	Why   string
	WhyZh string

	// Breaks are the matrix columns in which the rung breaks; Either are
	// those where it may go either way, with why; NoClaim those where it is
	// run and shown but promised nothing. It holds in every other column
	// that applies to it.
	Breaks  []string
	Either  map[string]string
	NoClaim []string
	// JudgedAs names the rung whose row of the matrix this one is judged
	// by, when it is not its own; the rung's own Either cells go either
	// way all the same.
	JudgedAs string
	// Skips are the matrix columns the rung has no cell in, with why.
	Skips map[string]string
	// Disagrees says why porcupine's verdict on the history its shoppers
	// saw and the audit may differ for this rung by its design; "" when
	// they may not, and a disagreement fails a strict run.
	Disagrees string

	// Chaos is what the chaos runner expects of the rung under its
	// nemesis; nil: it is run and shown there, promised nothing.
	Chaos *ChaosClaim
}

//go:embed why/*.md why/zh/*.md
var whyFiles embed.FS

// taught is every lesson in teaching order, each joined with its rung and
// its paragraph.
var taught = join(rungs())

// rungs are lock's ladder with the store's designs (inventory.Designs),
// which take no Redis lock, right after the fenced locks: the designs that
// need no lock at all come after every lock that needs the store's help,
// and before the Redlocks read beside ours.
func rungs() []ladder.Rung {
	all := ladder.Rungs()
	at := slices.IndexFunc(all, func(r ladder.Rung) bool { return r.Name == lock.RedlockFence }) + 1
	var designs []ladder.Rung
	for _, d := range inventory.Designs() {
		designs = append(designs, ladder.Rung{Name: d.Name, File: d.File, Correct: d.Correct})
	}
	return slices.Insert(all, at, designs...)
}

// Names lists every rung's name in teaching order: the names a request may
// carry in its X-Lock-Variant header.
func Names() []string {
	out := make([]string, len(taught))
	for i, l := range taught {
		out[i] = l.Name
	}
	return out
}

// join is the lesson of every rung, in the rungs' order. A rung without an
// entry in lessons, or without a paragraph, gets an empty one: the tests
// name it.
func join(rungs []ladder.Rung) []Lesson {
	out := make([]Lesson, len(rungs))
	for i, r := range rungs {
		out[i] = lessons[r.Name]
		out[i].Rung = r
		out[i].StoreGuarded = slices.ContainsFunc(inventory.Designs(), func(d inventory.Design) bool { return d.Name == r.Name })
		out[i].Why = why(r.Name)
		out[i].WhyZh = whyZh(r.Name)
	}
	return out
}

// why is the rung's paragraph: its Markdown file, one paragraph whose
// line breaks are spaces, as Markdown reads them (a checkout with CRLF
// line endings reads the same).
func why(rung string) string {
	b, err := whyFiles.ReadFile("why/" + rung + ".md")
	if err != nil {
		return ""
	}
	text := strings.ReplaceAll(strings.TrimSpace(string(b)), "\r\n", "\n")
	return strings.ReplaceAll(text, "\n", " ")
}

// whyZh is the rung's paragraph in Chinese (why/zh/<rung>.md), one
// paragraph: a line break between two Chinese characters joins them (Chinese
// puts no space between words); one beside Latin text is a space, as in why.
func whyZh(rung string) string {
	b, err := whyFiles.ReadFile("why/zh/" + rung + ".md")
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.ReplaceAll(strings.TrimSpace(string(b)), "\r\n", "\n"), "\n")
	var out strings.Builder
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if i > 0 {
			prev, _ := utf8.DecodeLastRuneInString(out.String())
			next, _ := utf8.DecodeRuneInString(line)
			if prev < utf8.RuneSelf || next < utf8.RuneSelf {
				out.WriteByte(' ')
			}
		}
		out.WriteString(line)
	}
	return out.String()
}

// Lessons lists every rung's lesson in the ladder's teaching order.
func Lessons() []Lesson { return slices.Clone(taught) }

// Find is the lesson of the rung named name.
func Find(name string) (Lesson, bool) {
	i := slices.IndexFunc(taught, func(l Lesson) bool { return l.Name == name })
	if i < 0 {
		return Lesson{}, false
	}
	return taught[i], true
}
