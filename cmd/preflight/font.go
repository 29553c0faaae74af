package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// installCJK says how to get a font that covers Chinese.
const installCJK = "Debian/Ubuntu: sudo apt-get install fonts-wqy-microhei (or fonts-noto-cjk), then reload the page; " +
	"macOS ships PingFang SC and needs nothing; only a room that reads the pages in 中文 (?lang=zh) needs one"

// FontCheck asks fontconfig for the fonts that cover Chinese
// (fc-list :lang=zh): without one, the workshop page and the storefront in
// Chinese show empty boxes where the characters should be. A note, not a
// failure: an English room needs none.
func FontCheck(ctx context.Context, env Env) Check {
	c := Check{Name: "CJK font", Level: Optional}
	path, err := env.LookPath("fc-list")
	if err != nil {
		c.Says = "fc-list (fontconfig) is not on PATH, so no font could be checked: " + installCJK
		return c
	}
	out, err := env.Output(ctx, path, ":lang=zh", "family")
	if err != nil {
		c.Says = fmt.Sprintf("fc-list :lang=zh failed (%v: %s): %s", err, lastLines(out, 1), installCJK)
		return c
	}
	// A family may carry its name in several languages, one line each:
	// "WenQuanYi Micro Hei,文泉驿微米黑". The first names it.
	var families []string
	for line := range strings.Lines(out) {
		if name, _, _ := strings.Cut(strings.TrimSpace(line), ","); name != "" && !slices.Contains(families, name) {
			families = append(families, name)
		}
	}
	if len(families) == 0 {
		c.Says = "no font covers Chinese (fc-list :lang=zh lists none): the pages in 中文 would show empty boxes; " + installCJK
		return c
	}
	c.OK = true
	c.Says = fmt.Sprintf("%d font families cover Chinese (fc-list :lang=zh), %s among them: the pages in 中文 show their characters", len(families), families[0])
	return c
}
