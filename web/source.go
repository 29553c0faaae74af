package web

import (
	"io/fs"
	"log/slog"
	"strings"

	"flashsale/curriculum"
)

// sourceView is the answer of GET /workshop/source/{variant}. Line numbers
// count from 1. Differs are the lines of Source that the reference does not
// have (under a longest-common-subsequence line diff); ReferenceDiffers the
// lines of ReferenceSource that Source does not have. For a correct variant
// the file is its own reference and both lists are empty.
type sourceView struct {
	Variant          string `json:"variant"`
	File             string `json:"file"`
	Reference        string `json:"reference"`
	Source           string `json:"source"`
	Differs          []int  `json:"differs"`
	ReferenceSource  string `json:"reference_source"`
	ReferenceDiffers []int  `json:"reference_differs"`
	Why              string `json:"why"`
	ShowsWith        string `json:"shows_with"`
	// Lang is the language Why is written in: "en", or "zh" when the
	// request asked for it (?lang=zh) and the rung has its Chinese.
	Lang  string `json:"lang"`
	whyZh string
}

// in is the view with its paragraph in the language asked for.
func (v sourceView) in(lang string) sourceView {
	if lang == "zh" && v.whyZh != "" {
		v.Why, v.Lang = v.whyZh, "zh"
	}
	return v
}

// loadSources reads the variant files and diffs each against its reference
// once, at start-up: the files are embedded, so the answers never change.
func loadSources(lockFiles, storeFiles fs.FS, log *slog.Logger) map[string]sourceView {
	out := map[string]sourceView{}
	if lockFiles == nil && storeFiles == nil {
		log.Warn("web: no lock variant sources given; the workshop will not show code")
		return out
	}
	src := curriculum.Sources(lockFiles, storeFiles)
	for _, r := range curriculum.Lessons() {
		text, err := fs.ReadFile(src, r.File)
		if err != nil {
			log.Warn("web: lock variant source missing", "variant", r.Name, "file", r.File, "err", err)
			continue
		}
		ref, err := fs.ReadFile(src, r.Reference)
		if err != nil {
			log.Warn("web: lock reference source missing", "variant", r.Name, "file", r.Reference, "err", err)
			continue
		}
		onlyA, onlyB := diffLines(splitLines(string(text)), splitLines(string(ref)))
		out[r.Name] = sourceView{
			Variant: r.Name, File: r.File, Reference: r.Reference,
			Source: string(text), Differs: onlyA,
			ReferenceSource: string(ref), ReferenceDiffers: onlyB,
			Why: r.Why, ShowsWith: r.ShowsWith, Lang: "en", whyZh: r.WhyZh,
		}
	}
	return out
}

// splitLines splits a file into lines without their line endings; a final
// newline does not start another line.
func splitLines(s string) []string {
	s = strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// diffLines is a longest-common-subsequence line diff: it returns the
// 1-based numbers of the lines of a not in the common subsequence, and those
// of b. Lines compare without trailing blanks. The files are a few hundred
// lines, so the quadratic table is small.
func diffLines(a, b []string) (onlyA, onlyB []int) {
	onlyA, onlyB = []int{}, []int{}
	n, m := len(a), len(b)
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	same := func(i, j int) bool {
		return strings.TrimRight(a[i], " \t") == strings.TrimRight(b[j], " \t")
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if same(i, j) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case same(i, j):
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			onlyA = append(onlyA, i+1)
			i++
		default:
			onlyB = append(onlyB, j+1)
			j++
		}
	}
	for ; i < n; i++ {
		onlyA = append(onlyA, i+1)
	}
	for ; j < m; j++ {
		onlyB = append(onlyB, j+1)
	}
	return onlyA, onlyB
}
