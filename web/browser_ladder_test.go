package web

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"flashsale/internal/testsupport"

	"github.com/chromedp/chromedp"
)

// The whole ladder from one button: the page loads the sequence from the
// server, runs it through the real runner (a short one here, chosen in the
// page's address; a node scenario among it) and fills the table cell by
// cell as each result arrives.
//
// In English it runs three cells, one a node scenario; in Chinese, reached
// by the page's own switch, two, and then the storefront, which the browser
// keeps in Chinese. Either way, once the ladder has run no sentence of the
// other language is left on the page (lang.go's check).
func TestBrowserWholeLadder(t *testing.T) {
	testsupport.Long(t, "drives Chromium through a whole sale or ladder")
	testsupport.Need(t, "redis-server", "the sequence starts Redis nodes of its own")
	for _, tc := range []struct {
		lang  string
		cells [][2]string
		seen  []string
	}{
		{"en", [][2]string{{"none", "clean"}, {"lua", "clean"}, {"redlock", "node-down"}}, []string{"breaks", "holds", "holds"}},
		{"zh", [][2]string{{"none", "clean"}, {"db-guard", "pause-in-critical-section"}}, []string{"breaks", "holds"}},
	} {
		t.Run(tc.lang, func(t *testing.T) { wholeLadder(t, tc.lang, tc.cells, tc.seen) })
	}
}

func wholeLadder(t *testing.T, lang string, cells [][2]string, want []string) {
	app := startApp(t)
	tab := newTab(t, startBrowser(t), false)
	var only []string
	for _, c := range cells {
		only = append(only, c[0]+"/"+c[1])
	}
	do(t, tab, "open the workshop",
		chromedp.Navigate(app.base+"/workshop?only="+strings.Join(only, ",")),
		waitJS(`document.querySelector("#w-ladder") !== null && document.documentElement.lang === "en"`, stepTimeout))
	if lang == "zh" {
		do(t, tab, "switch to Chinese", js(`window.beforeSwitch = true; document.querySelector("#lang-switch").click()`))
		afterReload(t, tab, "the page in Chinese",
			`!window.beforeSwitch && document.documentElement.lang === "zh-CN" && document.querySelector("#src-why").textContent.length > 0`)
		if why := eval[string](t, tab, `document.querySelector("#src-why").textContent`); !hasHan(why) {
			t.Errorf("in Chinese the rung's paragraph reads %q", why)
		}
	}
	n := len(cells)
	do(t, tab, "start the ladder",
		chromedp.SendKeys(chromedp.ID("w-token"), app.token),
		// Each time a row of the ladder fills, note how many have: filled
		// live, the counts climb one at a time.
		js(`window.fills = []; new MutationObserver(() => {
			const n = document.querySelectorAll('#ladder-body tr[data-state="done"]').length;
			if (n && window.fills[window.fills.length - 1] !== n) window.fills.push(n);
		}).observe(document.querySelector("#ladder-body"), {childList: true, subtree: true})`),
		chromedp.Click(chromedp.ID("w-ladder")),
		waitJS(fmt.Sprintf(`document.querySelectorAll("#ladder-body tr[data-step]").length === %d`, n), stepTimeout))
	if note := eval[string](t, tab, `document.querySelector("#w-ladder-nodes").textContent`); lang == "en" && !strings.Contains(note, "Node scenarios run") {
		t.Errorf("the page says %q about node scenarios; this instance started its own nodes", note)
	}
	shot(t, tab, "01-ladder-started-"+lang)
	ctx, cancel := context.WithTimeout(tab, 4*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, waitJS(`!document.querySelector("#w-ladder").disabled && ["ok", "warn"].includes(document.querySelector("#outcome").dataset.kind)`, 4*time.Minute)); err != nil {
		shot(t, tab, "failed-ladder")
		t.Fatalf("the ladder never finished: %v; the page says %q", err, eval[string](t, tab, `document.querySelector("#outcome").textContent`))
	}
	shot(t, tab, "02-ladder-done-"+lang)
	var one []int
	for i := range n {
		one = append(one, i+1)
	}
	if fills := eval[[]int](t, tab, `window.fills`); !slices.Equal(fills, one) {
		t.Errorf("rows filled as %v, want one at a time %v", fills, one)
	}
	rows := eval[[]string](t, tab, `[...document.querySelectorAll("#ladder-body tr")].map((tr) => tr.textContent)`)
	for i, want := range cells {
		if i >= len(rows) || !strings.Contains(rows[i], want[0]) || !strings.Contains(rows[i], want[1]) {
			t.Errorf("row %d is not %s × %s: rows %q", i+1, want[0], want[1], rows)
		}
	}
	// The audit decides what each row saw; a row that broke links the
	// picture of its history, which porcupine found not linearizable.
	for i, want := range want {
		seen := eval[string](t, tab, fmt.Sprintf(`document.querySelectorAll('#ladder-body tr')[%d].querySelectorAll('td')[4]?.querySelector('span')?.dataset.verdict || ""`, i))
		if seen != want {
			t.Errorf("row %d: seen %q, want %q (rows %q)", i+1, seen, want, rows)
		}
		linked := eval[bool](t, tab, fmt.Sprintf(`!!document.querySelectorAll('#ladder-body tr')[%d].querySelector('td a.history-link')`, i))
		if linked != (want == "breaks") {
			t.Errorf("row %d (%s): a link to the history's picture = %v, want %v", i+1, want, linked, want == "breaks")
		}
	}
	if n := eval[int](t, tab, `document.querySelectorAll("#ladder-body tr.mismatch").length`); n != 0 {
		t.Errorf("%d rows did not do what the matrix expects", n)
	}
	runLog(t, tab, lang, cells)
	// A finished run beside the ladder, its row, chart and timeline drawn.
	do(t, tab, "one run",
		choose("#w-variant", "lua"), choose("#w-scenario", "clean"),
		chromedp.SetValue(chromedp.ID("w-duration"), "1"),
		chromedp.Click(chromedp.ID("w-run")))
	if err := chromedp.Do(ctx, waitJS(`document.querySelector('#runs-body tr[data-state="done"] td.verdict') && document.querySelector("#timeline svg")`, time.Minute)); err != nil {
		shot(t, tab, "failed-run")
		t.Fatalf("the run's row never filled: %v", err)
	}
	otherLanguage(t, tab, lang, "the workshop")
	runLog(t, tab, lang, [][2]string{{"lua", "clean"}})
	if lang != "zh" {
		return
	}
	// The storefront, with no ?lang, is Chinese too: the browser kept it.
	do(t, tab, "open the storefront",
		chromedp.Navigate(app.base+"/"),
		waitJS(`document.documentElement.lang === "zh-CN" && document.querySelectorAll("#products .product").length > 0 && document.querySelectorAll("#seatmap .seat").length > 0`, stepTimeout),
		chromedp.SendKeys(chromedp.ID("user"), "ada"),
		js(`document.querySelector("#products .product button[type=submit]").click()`),
		waitJS(`document.querySelector("#outcome").dataset.kind === "ok" && document.querySelectorAll("#orders li").length > 0`, stepTimeout))
	shot(t, tab, "03-storefront")
	otherLanguage(t, tab, lang, "the storefront")
	// The numbers sit where Chinese puts them, and the confirmation's
	// punctuation is Chinese: "（订单 #12，锁 lua，栅栏令牌 3）".
	if said := eval[string](t, tab, `document.querySelector("#outcome").textContent`); !regexp.MustCompile(`（订单 #\d+，锁 [a-z+-]+(，栅栏令牌 \d+)?）`).MatchString(said) {
		t.Errorf("the order's confirmation reads %q", said)
	}
	for _, stock := range eval[[]string](t, tab, `[...document.querySelectorAll("#products .product .stock")].map((p) => p.textContent)`) {
		if !regexp.MustCompile(`^(剩余 \d+ 件，共 \d+ 件|0 件（已售罄）|-\d+ 件——超卖 \d+ 件：.*)$`).MatchString(stock) {
			t.Errorf("a product's stock reads %q", stock)
		}
	}
}

// otherLanguage fails the test on a sentence of the other language left on
// the page: in English any Chinese, in Chinese three English words in a row
// (names, commands and numbers are not sentences). What an element marked
// with its own lang says (the switch, the runner's notes) and the code
// panes are not the page's words.
func otherLanguage(t *testing.T, tab context.Context, lang, page string) {
	t.Helper()
	left := eval[[]string](t, tab, fmt.Sprintf(`(() => {
		const zh = %t;
		const other = zh ? /(?=[A-Za-z]{2})[A-Za-z]*[a-z][A-Za-z]*(?:[ ,]+(?=[A-Za-z]{2})[A-Za-z]*[a-z][A-Za-z]*){2,}/ : /\p{Script=Han}/u;
		const own = (el) => {
			const marked = el && el.closest("[lang]");
			return !marked || marked === document.documentElement || marked.lang.slice(0, 2) === (zh ? "zh" : "en");
		};
		const out = [];
		const walk = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			const el = n.parentElement;
			if (!el || el.closest("pre, script, style") || !own(el)) continue;
			const m = other.exec(n.textContent);
			if (m) out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + ": " + n.textContent.trim().slice(0, 120));
		}
		for (const el of document.querySelectorAll("[title], [aria-label], [placeholder], [alt]")) {
			if (!own(el)) continue;
			for (const a of ["title", "aria-label", "placeholder", "alt"]) {
				const v = el.getAttribute(a);
				if (v && other.test(v)) out.push(el.tagName.toLowerCase() + "[" + a + "]: " + v.slice(0, 120));
			}
		}
		return out;
	})()`, lang == "zh"))
	for _, s := range left {
		t.Errorf("%s in %s still reads the other language: %s", page, lang, s)
	}
	if len(left) > 0 {
		shot(t, tab, "other-language")
	}
}

// runLog checks the run log (运行记录): every cell of the last run has its
// line, in Chinese from the note's fields (not the terminal's English
// "cell done variant=…"), in English as the terminal prints it.
func runLog(t *testing.T, tab context.Context, lang string, cells [][2]string) {
	t.Helper()
	lines := eval[[]string](t, tab, `[...document.querySelectorAll("#w-notes li")].map((li) => li.textContent)`)
	for _, c := range cells {
		english := fmt.Sprintf("cell done variant=%s scenario=%s ", c[0], c[1])
		chinese := fmt.Sprintf("%s × %s 跑完：预期", c[0], c[1])
		found := slices.IndexFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, map[bool]string{true: chinese, false: english}[lang == "zh"])
		})
		if found < 0 {
			t.Errorf("in %s the run log has no line for %s × %s: %q", lang, c[0], c[1], lines)
		}
	}
	if lang == "zh" {
		for _, l := range lines {
			if strings.HasPrefix(l, "cell done") || strings.HasPrefix(l, "localredis:") {
				t.Errorf("in Chinese the run log still reads the terminal's English: %q", l)
			}
		}
	}
}

// afterReload waits for a page that reloads itself to reach a state: while
// it reloads, reading it fails, and that is waited out too.
func afterReload(t *testing.T, tab context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithTimeout(tab, 2*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			shot(t, tab, "failed-"+what)
			t.Fatalf("%s: %s never held (last error %v)", what, expr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
