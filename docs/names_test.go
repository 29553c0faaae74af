package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"flashsale/internal/testsupport"
	"flashsale/loadtest"
)

// What the documents name, checked against the repository and the runner.

// codeIndex is the project's own source (Go, JavaScript, HTML), by
// directory, for looking names up.
type codeIndex struct {
	byDir map[string]string // package directory → its files' text
	all   string
	files map[string]bool // every file of the repository, by path and by base name
}

func indexCode(t *testing.T) codeIndex {
	t.Helper()
	ix := codeIndex{byDir: map[string]string{}, files: map[string]bool{}}
	var all strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "out" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		ix.files[rel], ix.files[filepath.Base(rel)] = true, true
		switch filepath.Ext(path) {
		case ".go", ".js", ".html":
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			dir := filepath.ToSlash(filepath.Dir(rel))
			ix.byDir[dir] += string(b) + "\n"
			all.Write(b)
			all.WriteString("\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ix.all = all.String()
	return ix
}

// defines reports whether text declares or uses name as a whole word.
func defines(text, name string) bool {
	return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(text)
}

// external are the packages outside the module whose names the docs
// quote (`redis.Nil`, `sync.Mutex`); their members are not looked up.
var external = map[string]bool{"redis": true, "sync": true, "time": true, "context": true, "errors": true,
	"http": true, "slog": true, "flag": true, "os": true, "sql": true, "json": true, "testing": true, "fmt": true}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// A path the docs name: a top-level entry of the repository followed by
	// more, or a file with a source extension.
	pathLike = regexp.MustCompile(`^[a-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/?$`)
	// A Go name: camelCase or a Type.Member pair; plain words (`none`,
	// `lua`) and commands (`SETNX`) are not names of code.
	goName     = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(\))?$`)
	camel      = regexp.MustCompile(`^[a-z]+[A-Z]|^[A-Z][a-z0-9]+[A-Z]`)
	sourceFile = regexp.MustCompile(`\.(go|md|yml|yaml|sh)$`) // not .html, .json: the runner's outputs
)

// Every file and every function, type or method a document names in code
// spans exists: `lock/single.go`, `setnx_expire.go`, `Service.Buy`,
// `compareAndDelete`. A name that moves or disappears cannot leave a guide
// pointing at nothing.
func TestNamedFilesAndFunctionsExist(t *testing.T) {
	ix := indexCode(t)
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "out" && e.Name() != ".git" {
			top[e.Name()] = true
		}
	}
	for _, doc := range allDocs(t) {
		text := read(t, doc)
		// Code blocks show commands and other programs' code: skip them.
		text = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			span := m[1]
			switch {
			case pathLike.MatchString(span) && strings.Contains(strings.TrimSuffix(span, "/"), "/"):
				// From the root, or from the document's own directory.
				_, fromRoot := os.Stat(filepath.Join(root, span))
				_, fromDoc := os.Stat(filepath.Join(root, filepath.Dir(doc), span))
				first, _, _ := strings.Cut(span, "/")
				if fromRoot != nil && fromDoc != nil && top[first] {
					t.Errorf("%s names %s, which does not exist", doc, span)
				}
				if fromRoot != nil && fromDoc != nil && !top[first] && filepath.Dir(doc) != "." {
					if _, err := os.Stat(filepath.Join(root, filepath.Dir(doc), first)); err == nil {
						t.Errorf("%s names %s, which does not exist", doc, span)
					}
				}
			case pathLike.MatchString(span) && sourceFile.MatchString(span):
				if !ix.files[span] {
					t.Errorf("%s names %s, which no file of the repository is", doc, span)
				}
			default:
				g := goName.FindStringSubmatch(span)
				if g == nil {
					continue
				}
				owner, member := g[1], g[2]
				switch {
				case member == "" && camel.MatchString(owner):
					if !defines(ix.all, owner) {
						t.Errorf("%s names %s, which no source file declares or uses", doc, owner)
					}
				case member != "" && external[owner]:
				case member != "" && ix.byDir[owner] != "":
					if !defines(ix.byDir[owner], member) {
						t.Errorf("%s names %s.%s, which package %s does not have", doc, owner, member, owner)
					}
				case member != "" && (camel.MatchString(owner) || camel.MatchString(member) || isExported(owner)):
					if !regexp.MustCompile(`type ` + regexp.QuoteMeta(owner) + `\b`).MatchString(ix.all) {
						t.Errorf("%s names %s.%s: no type %s in the source", doc, owner, member, owner)
					} else if !regexp.MustCompile(`func \([a-z]+ \*?` + regexp.QuoteMeta(owner) + `\) ` + regexp.QuoteMeta(member) + `\(|\b` + regexp.QuoteMeta(member) + `\b`).MatchString(ix.all) {
						t.Errorf("%s names %s.%s, which type %s does not have", doc, owner, member, owner)
					}
				}
			}
		}
	}
}

func isExported(s string) bool {
	return s != "" && s[0] >= 'A' && s[0] <= 'Z' && strings.ToUpper(s) != s
}

// cellProse is how the documents restate a cell of the matrix:
// "`variant` × `scenario` **outcome**".
var cellProse = regexp.MustCompile("`([a-z+-]+)` × `([a-z-]+)` \\*\\*([a-z ]+)\\*\\*")

// Every cell any document restates in prose is the runner's: the labs, the
// run sheets, the handout, the sources table, the design.
func TestRestatedCellsAreTheRunners(t *testing.T) {
	n := 0
	for _, doc := range allDocs(t) {
		flat := strings.Join(strings.Fields(read(t, doc)), " ")
		for _, m := range cellProse.FindAllStringSubmatch(flat, -1) {
			n++
			want, ok := loadtest.Expected(m[1], m[2])
			switch {
			case !ok:
				t.Errorf("%s: %s × %s is not a cell of the runner's matrix", doc, m[1], m[2])
			case string(want) != m[3]:
				t.Errorf("%s says %s × %s %s; the runner expects %s", doc, m[1], m[2], m[3], want)
			}
		}
	}
	if n < 50 {
		t.Errorf("the documents restate only %d cells; the pattern %v no longer finds them", n, cellProse)
	}
}

// The design's second table (timing, failover, long work) is the runner's
// too: each cell starts with the outcome the runner expects, or says n/a
// where the scenario does not apply. A row may name several variants.
func TestDesignTimingTableIsTheRunners(t *testing.T) {
	design := read(t, "docs/design.md")
	_, rest, ok := strings.Cut(design, "\n### Timing, failover and long work")
	if !ok {
		t.Fatal("design.md has no section \"Timing, failover and long work\"")
	}
	table, _, _ := strings.Cut(rest, "\n### ")
	cols := [][]string{{loadtest.ClockJump}, {loadtest.NetworkDelay}, {loadtest.Partition}, {loadtest.Failover},
		{loadtest.LongWork, loadtest.LongWorkWatchdog}}
	rows := 0
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != len(cols)+1 {
			t.Errorf("design.md: %d cells in %q, want %d", len(cells), line, len(cols)+1)
			continue
		}
		for _, v := range regexp.MustCompile("`([a-z+-]+)`").FindAllStringSubmatch(strings.Split(cells[0], "(")[0], -1) {
			for j, scenarios := range cols {
				parts := strings.Split(cells[j+1], " / ")
				if len(parts) != len(scenarios) {
					t.Errorf("design.md: %s's %v cell %q does not give %d outcomes", v[1], scenarios, cells[j+1], len(scenarios))
					continue
				}
				for k, s := range scenarios {
					if err := saysOutcome(strings.TrimSpace(parts[k]), v[1], s); err != nil {
						t.Errorf("design.md: %v", err)
					}
				}
			}
		}
	}
	if rows < 5 {
		t.Fatalf("design.md's timing table has %d rows", rows)
	}
}

// saysOutcome checks one cell's text against the runner's expectation.
func saysOutcome(text, variant, scenario string) error {
	want, ok := loadtest.Expected(variant, scenario)
	switch {
	case !ok && strings.HasPrefix(text, "n/a"):
		return nil
	case !ok:
		return fmt.Errorf("%s × %s: says %q, but the runner has no such cell (write n/a)", variant, scenario, text)
	case strings.HasPrefix(text, string(want)):
		return nil
	}
	return fmt.Errorf("%s × %s: says %q, the runner expects %s", variant, scenario, text, want)
}

// Every "`file.go` lines A–B" any document gives is inside the file (the
// labs' ranges also hold their marker line: TestLabReadsExist).
func TestQuotedLineRangesExist(t *testing.T) {
	ranges := quotedRanges
	for _, doc := range allDocs(t) {
		flat := strings.Join(strings.Fields(read(t, doc)), " ")
		for _, m := range ranges.FindAllStringSubmatch(flat, -1) {
			b, err := os.ReadFile(filepath.Join(root, m[1]))
			if err != nil {
				t.Errorf("%s: %v", doc, err)
				continue
			}
			var from, to int
			fmt.Sscan(m[2], &from)
			fmt.Sscan(m[3], &to)
			if n := strings.Count(string(b), "\n") + 1; from < 1 || to < from || to > n {
				t.Errorf("%s: %s lines %d–%d, but the file has %d lines", doc, m[1], from, to, n)
			}
		}
	}
}

// quotedRanges finds "`file.go` lines a–b" in a document's text.
var quotedRanges = regexp.MustCompile("`([a-z0-9_./-]+\\.go)` lines (\\d+)–(\\d+)")

// A range a document quotes is read aloud in the room: it is whole
// declarations, each from the first line of its doc comment to its closing
// brace. Every declaration it touches lies wholly inside it, it starts on
// a declaration's first line and ends on one's last, so no reading starts
// or stops mid-function or mid-comment. The ranges are those the text gives
// ("`lock/x.go` lines 1–9", and a bare "lines 20–29" after it, which is of
// the file named last) and those of the labs' read lines.
func TestQuotedLineRangesAreWholeDeclarations(t *testing.T) {
	type quoted struct {
		doc, file string
		from, to  int
	}
	var all []quoted
	named := regexp.MustCompile("`([a-z0-9_./-]+\\.go)`")
	bare := regexp.MustCompile(`lines (\d+)–(\d+)`)
	for _, doc := range allDocs(t) {
		text := read(t, doc)
		flat := strings.Join(strings.Fields(text), " ")
		for _, m := range bare.FindAllStringSubmatchIndex(flat, -1) {
			files := named.FindAllStringSubmatch(flat[:m[0]], -1)
			if len(files) == 0 {
				continue
			}
			q := quoted{doc: doc, file: files[len(files)-1][1]}
			fmt.Sscan(flat[m[2]:m[3]], &q.from)
			fmt.Sscan(flat[m[4]:m[5]], &q.to)
			all = append(all, q)
		}
	}
	for _, l := range labs(t) {
		for _, r := range l.reads {
			all = append(all, quoted{doc: l.title + " (read line)", file: r.file, from: r.from, to: r.to})
		}
	}
	if len(all) < 40 {
		t.Fatalf("found only %d quoted ranges; the patterns no longer find them", len(all))
	}
	for _, q := range all {
		spans, err := declarationSpans(filepath.Join(root, q.file))
		if err != nil {
			t.Errorf("%s: %v", q.doc, err)
			continue
		}
		starts, ends := false, false
		for _, s := range spans {
			if s[1] < q.from || s[0] > q.to {
				continue
			}
			if s[0] < q.from || s[1] > q.to {
				t.Errorf("%s: %s lines %d–%d cut a declaration (lines %d–%d with its doc comment)", q.doc, q.file, q.from, q.to, s[0], s[1])
			}
			starts = starts || s[0] == q.from
			ends = ends || s[1] == q.to
		}
		if !starts || !ends {
			t.Errorf("%s: %s lines %d–%d do not start on a declaration's first line (its doc comment's) and end on one's closing line", q.doc, q.file, q.from, q.to)
		}
	}
}

// declarationSpans are the first and last lines of a Go file's top-level
// declarations, each with its doc comment, and of the comments that stand
// alone between them.
func declarationSpans(path string) ([][2]int, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var out [][2]int
	attached := map[*ast.CommentGroup]bool{}
	for _, n := range declarations(f) {
		start := n.Pos()
		var doc *ast.CommentGroup
		switch d := n.(type) {
		case *ast.FuncDecl:
			doc = d.Doc
		case *ast.GenDecl:
			doc = d.Doc
		case *ast.TypeSpec:
			doc = d.Doc
		case *ast.ValueSpec:
			doc = d.Doc
		}
		if doc != nil {
			start, attached[doc] = doc.Pos(), true
		}
		out = append(out, [2]int{fset.Position(start).Line, fset.Position(n.End()).Line})
	}
	// A comment standing alone between declarations (a file's "why") is
	// read whole too.
	for _, c := range f.Comments {
		if attached[c] {
			continue
		}
		inside := false
		for _, s := range out {
			inside = inside || fset.Position(c.Pos()).Line >= s[0] && fset.Position(c.End()).Line <= s[1]
		}
		if !inside {
			out = append(out, [2]int{fset.Position(c.Pos()).Line, fset.Position(c.End()).Line})
		}
	}
	return out, nil
}

// declarations are a file's top-level declarations, a grouped var, const
// or type block counting each of its specs as one.
func declarations(f *ast.File) []ast.Node {
	var out []ast.Node
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || !g.Lparen.IsValid() {
			out = append(out, d)
			continue
		}
		for _, s := range g.Specs {
			out = append(out, s)
		}
	}
	return out
}

// Every load-runner, chaos-runner, storefront and pre-flight command any
// document gives, in a code span or a code block, uses only flags its
// program has: the run sheets and the handout are copied into terminals.
func TestDocumentedCommandsUseRealFlags(t *testing.T) {
	testsupport.Long(t, "builds every command to read its flags")
	app, runner := binaries(t)
	programs := map[string]flagSet{
		"go run ./loadtest/cmd/loadtest": helpOf(t, runner),
		"go run ./loadtest/cmd/chaos":    helpOf(t, testsupport.Binary(t, "./loadtest/cmd/chaos")),
		"go run ./loadtest/cmd/targets":  helpOf(t, testsupport.Binary(t, "./loadtest/cmd/targets")),
		"go run .":                       helpOf(t, app),
		"go run ./cmd/preflight":         {takesValue: map[string]bool{"h": false, "build": false, "smoke": false, "addr": true}},
	}
	flagWord := regexp.MustCompile(`^-([a-z][a-z0-9-]*)(=.*)?$`)
	n := 0
	for _, doc := range allDocs(t) {
		for _, line := range regexp.MustCompile("`([^`\n]+)`|(?m)^(go run [^\n]+)$").FindAllStringSubmatch(read(t, doc), -1) {
			cmd := line[1] + line[2]
			for prefix, fs := range programs {
				rest, ok := strings.CutPrefix(cmd, prefix+" ")
				if !ok || prefix == "go run ." && strings.HasPrefix(rest, "/") {
					continue
				}
				n++
				for _, w := range strings.Fields(rest) {
					if w == "|" || w == "&&" || w == ";" || strings.HasPrefix(w, "#") {
						break
					}
					if m := flagWord.FindStringSubmatch(w); m != nil {
						if _, known := fs.takesValue[m[1]]; !known {
							t.Errorf("%s: %q: -%s is not a flag of %s", doc, cmd, m[1], prefix)
						}
					}
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("found only %d documented commands", n)
	}
}
