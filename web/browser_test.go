package web

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"flashsale/internal/testsupport"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The browser tests drive the real pages in Debian's Chromium, headless,
// against the real app that startApp gives. A missing browser fails the test
// in CI and skips it elsewhere (testsupport.Missing).

const chromiumPath = "/usr/bin/chromium"

// browserStart is how long the browser may take to start: the first start on
// a fresh machine has taken over 20 s. Steps get much less.
const (
	browserStart = time.Minute
	stepTimeout  = 20 * time.Second
)

// startBrowser starts a headless Chromium with a fresh profile and returns
// its chromedp context; it stops with the test.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testsupport.Missing(t, "no Chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	profile := t.TempDir() // removed after the browser has stopped (cleanups run last-in first-out)
	out, err := os.Create(filepath.Join(artifacts(t), "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(out),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		out.Close()
	})
	// The first Run starts the browser, and the browser lives as long as the
	// context of that call: no timeout on it, a timer beside it instead.
	started := make(chan error, 1)
	go func() {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[string]("navigator.userAgent"))
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting Chromium: %v (its output: %s)", err, out.Name())
		}
	case <-time.After(browserStart):
		cancel()
		t.Fatalf("Chromium did not start within %v (its output: %s)", browserStart, out.Name())
	}
	return ctx
}

// newTab opens a tab; isolated gives it a browser context of its own (its
// own cookies and storage, like a second shopper). Uncaught exceptions and
// console errors on the page fail the test, network errors (a 409 is one, in
// Chromium's log) do not.
func newTab(t *testing.T, browser context.Context, isolated bool) context.Context {
	t.Helper()
	var opts []chromedp.ContextOption
	if isolated {
		opts = append(opts, chromedp.WithNewBrowserContext())
	}
	ctx, cancel := chromedp.NewContext(browser, opts...)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("true")); err != nil {
		cancel()
		t.Fatalf("opening a tab: %v", err)
	}
	var (
		mu       sync.Mutex
		problems []string
		done     = make(chan struct{})
	)
	messages := chromedp.Console(ctx)
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source != "network") {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("page console: %s", p)
		}
	})
	return ctx
}

// do runs steps in a tab under the step timeout; on failure it saves a
// screenshot of the tab first.
func do(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		shot(t, tab, "failed-"+what)
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until a JavaScript expression is truthy.
func waitJS(expr string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tgt *chromedp.Target) (chromedp.Void, error) {
		if _, err := chromedp.Poll[any](expr, chromedp.WithPollingTimeout(timeout))(ctx, tgt); err != nil {
			return chromedp.Void{}, fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return chromedp.Void{}, nil
	}
}

// eval reads a value from the page.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// js runs a statement on the page, for what a person does through widgets
// chromedp has no action for (choosing an option fires "change").
func js(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tgt *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[any](expr)(ctx, tgt)
		return chromedp.Void{}, err
	}
}

func choose(selector, value string) chromedp.Action[chromedp.Void] {
	return js(fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q;
		s.dispatchEvent(new Event("change", {bubbles: true})); })()`, selector, value))
}

// outcomeHas is true when the page's live region says text.
func outcomeHas(text string) string {
	return fmt.Sprintf(`(document.querySelector("#outcome")?.textContent || "").includes(%q)`, text)
}

// artifacts is where screenshots and logs go: $FLASHSALE_ARTIFACTS/web, or
// out/web at the module root (ignored by git), one folder per test.
// A test's folder is emptied the first time it is used in a run, so no
// screenshot of an earlier run is mistaken for this one's.
func artifacts(t *testing.T) string {
	base := os.Getenv("FLASHSALE_ARTIFACTS")
	if base == "" {
		base = filepath.Join("..", "out")
	}
	dir, err := filepath.Abs(filepath.Join(base, "web", slug(t.Name())))
	if err != nil {
		t.Fatal(err)
	}
	if _, seen := artifactDirs.LoadOrStore(dir, true); !seen {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

var artifactDirs sync.Map

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func slug(s string) string { return strings.Trim(unsafeName.ReplaceAllString(s, "-"), "-") }

// shot saves a full-page PNG of the tab and logs its path.
func shot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(artifacts(t), slug(name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("saving screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// smallSale is the catalogue the storefront tests start from: five sneakers
// sell out in three clicks.
const smallSale = `{"products":[
	{"sku":"tee","name":"Launch T-shirt","price_cents":1999,"stock":50},
	{"sku":"mug","name":"Limited mug","price_cents":1299,"stock":100},
	{"sku":"sneaker","name":"Drop sneaker","price_cents":12900,"stock":5}],"seats":40}`

func TestBrowserBuyUntilSoldOut(t *testing.T) {
	testsupport.Long(t, "drives Chromium through a whole sale or ladder")
	app := startApp(t)
	app.reset(t, smallSale)
	tab := newTab(t, startBrowser(t), false)
	card := `document.querySelector('[data-sku="sneaker"]')`
	stockIs := func(n int) string { return fmt.Sprintf(`%s?.dataset.stock === "%d"`, card, n) }

	do(t, tab, "open the storefront",
		chromedp.Navigate(app.base+"/"),
		waitJS(`document.querySelector("#live").dataset.state === "open" && `+stockIs(5), stepTimeout))
	shot(t, tab, "01-storefront")

	// Bad input: no name yet. The message says so and the focus moves there.
	do(t, tab, "buy without a name",
		chromedp.Click(chromedp.CSS(`[data-sku="sneaker"] button[type="submit"]`)),
		waitJS(outcomeHas("Bad input")+` && document.activeElement.id === "user"`, stepTimeout))

	buy := func(qty int, says string, stock int) {
		t.Helper()
		do(t, tab, fmt.Sprintf("buy %d, expecting %q", qty, says),
			chromedp.SetValue(chromedp.CSS(`[data-sku="sneaker"] input[name="qty"]`), fmt.Sprint(qty)),
			chromedp.Click(chromedp.CSS(`[data-sku="sneaker"] button[type="submit"]`)),
			waitJS(outcomeHas(says)+" && "+stockIs(stock), stepTimeout))
	}
	do(t, tab, "type a name", chromedp.SendKeys(chromedp.ID("user"), "ada"))
	buy(2, "Bought 2 × Drop sneaker", 3)
	buy(2, "Bought 2 × Drop sneaker", 1)
	buy(2, "Sold out", 1) // 409 sold_out: one left, two asked
	shot(t, tab, "02-sold-out-message")
	buy(1, "Bought 1 × Drop sneaker", 0)

	if got := eval[string](t, tab, card+`.querySelector(".stock").textContent`); !strings.Contains(got, "sold out") {
		t.Errorf("sneaker card says %q, want sold out", got)
	}
	if !eval[bool](t, tab, card+`.querySelector("button[type=submit]").disabled`) {
		t.Error("the Buy button of a sold-out product is enabled")
	}
	if n := eval[int](t, tab, `document.querySelectorAll("#orders li").length`); n != 3 {
		t.Errorf("my orders lists %d orders, want 3", n)
	}
	shot(t, tab, "03-stock-zero")

	// The name and the orders survive a reload.
	do(t, tab, "reload",
		chromedp.Reload(),
		waitJS(`document.querySelector("#user").value === "ada" && document.querySelectorAll("#orders li").length === 3 && `+stockIs(0), stepTimeout))

	// Phone-sized: one column, nothing wider than the screen.
	do(t, tab, "phone screen",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Reload(),
		waitJS(stockIs(0), stepTimeout))
	if w := eval[int](t, tab, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
		t.Errorf("on a phone-sized screen the page is %d px wider than the screen", w)
	}
	if w := eval[int](t, tab, `(m => m.scrollWidth - m.clientWidth)(document.querySelector("#seatmap"))`); w > 0 {
		t.Errorf("on a phone-sized screen the seat map is %d px wider than its box", w)
	}
	shot(t, tab, "04-phone")
}

// A busy lock gets "busy — retry", and Retry repeats the same order. The
// lock is made busy for real: setnx-expire, with a crash injected right after
// its SETNX, leaves a lock key with no TTL, so the next buyer waits out the
// lock wait and gets 503 lock_busy; a reset removes the key.
func TestBrowserBusyThenRetry(t *testing.T) {
	testsupport.Long(t, "drives Chromium through a whole sale or ladder")
	app := startApp(t)
	app.reset(t, smallSale)
	t.Cleanup(func() { app.admin(t, "PUT", "/api/admin/faults", `{"faults":[]}`) })
	tab := newTab(t, startBrowser(t), false)
	card := `document.querySelector('[data-sku="tee"]')`
	buy := chromedp.Click(chromedp.CSS(`[data-sku="tee"] button[type="submit"]`))
	do(t, tab, "open the storefront as cy with setnx-expire",
		chromedp.Navigate(app.base+"/"),
		waitJS(`document.querySelector("#live").dataset.state === "open" && `+card+`?.dataset.stock === "50"`, stepTimeout),
		chromedp.SendKeys(chromedp.ID("user"), "cy"),
		choose("#variant", "setnx-expire"))

	if status, body := app.admin(t, "PUT", "/api/admin/faults",
		`{"seed":1,"faults":[{"point":"after-acquire-step1","action":"crash","p":1}]}`); status != 200 {
		t.Fatalf("setting the crash fault: %d %s", status, body)
	}
	do(t, tab, "the holder crashes after SETNX", buy,
		waitJS(outcomeHas("Busy")+` && document.querySelector("#outcome button")?.textContent === "Retry"`, stepTimeout))
	if status, body := app.admin(t, "PUT", "/api/admin/faults", `{"faults":[]}`); status != 200 {
		t.Fatalf("clearing the faults: %d %s", status, body)
	}
	do(t, tab, "the next buyer finds the lock stuck", buy,
		waitJS(outcomeHas("Busy — retry in 1 s")+" && "+outcomeHas("Too many shoppers"), stepTimeout))
	shot(t, tab, "01-busy")

	app.reset(t, smallSale) // removes the stuck lock key
	do(t, tab, "retry the same order",
		chromedp.Click(chromedp.CSS(`#outcome button`)),
		waitJS(outcomeHas("Bought 1 × Launch T-shirt")+" && "+outcomeHas("lock setnx-expire")+" && "+card+`.dataset.stock === "49"`, stepTimeout))
	if n := eval[int](t, tab, `document.querySelectorAll("#orders li").length`); n != 1 {
		t.Errorf("my orders lists %d orders after the retry, want 1", n)
	}
	shot(t, tab, "02-retried")
}

func TestBrowserSeatTakenInSecondBrowser(t *testing.T) {
	app := startApp(t)
	app.reset(t, smallSale)
	browser := startBrowser(t)
	ada := newTab(t, browser, true)
	bob := newTab(t, browser, true)
	seat := func(label string) string {
		return fmt.Sprintf(`document.querySelector('#seatmap [data-seat="%s"]')`, label)
	}
	ready := `document.querySelector("#live").dataset.state === "open" && ` + seat("B3") + `?.dataset.state === "free"`
	do(t, ada, "ada opens the storefront", chromedp.Navigate(app.base+"/"), waitJS(ready, stepTimeout),
		chromedp.SendKeys(chromedp.ID("user"), "ada"))
	do(t, bob, "bob opens the storefront", chromedp.Navigate(app.base+"/"), waitJS(ready, stepTimeout),
		chromedp.SendKeys(chromedp.ID("user"), "bob"))

	// Ada grabs B3 with the keyboard alone: A1, right, right, down, Enter.
	do(t, ada, "ada grabs B3 by keyboard",
		chromedp.Focus(chromedp.CSS(`#seatmap [data-seat="A1"]`)),
		chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowDown),
		waitJS(`document.activeElement.dataset.seat === "B3"`, stepTimeout),
		chromedp.KeyEvent(kb.Enter),
		waitJS(outcomeHas("Seat B3 is yours")+" && "+seat("B3")+`.dataset.state === "mine"`, stepTimeout))
	shot(t, ada, "01-ada-grabbed-B3")

	// Bob's page learns it from the stream, without a reload; nobody tells
	// him by whom.
	do(t, bob, "bob sees B3 taken",
		waitJS(seat("B3")+`.dataset.state === "taken" && `+seat("B3")+`.getAttribute("aria-label") === "Seat B3, taken"`, stepTimeout))
	do(t, bob, "bob tries B3 anyway",
		chromedp.Click(chromedp.CSS(`#seatmap [data-seat="B3"]`)),
		waitJS(outcomeHas("Seat taken"), stepTimeout))
	// The refreshed map keeps the keyboard focus where it was.
	do(t, bob, "focus stays on B3", waitJS(`document.activeElement.dataset.seat === "B3"`, stepTimeout))
	shot(t, bob, "02-bob-seat-taken")

	do(t, bob, "bob grabs B4", chromedp.Click(chromedp.CSS(`#seatmap [data-seat="B4"]`)),
		waitJS(outcomeHas("Seat B4 is yours"), stepTimeout))
	do(t, ada, "ada sees B4 taken", waitJS(seat("B4")+`.dataset.state === "taken"`, stepTimeout))
	if page := eval[string](t, ada, `document.querySelector("#seatmap").innerHTML`); strings.Contains(page, "bob") {
		t.Errorf("ada's seat map names bob: %s", page)
	}
	// Her own seat stays hers after a reload: her page kept her booking.
	do(t, ada, "ada reloads", chromedp.Reload(),
		waitJS(`document.querySelector("#live").dataset.state === "open" && `+seat("B3")+`?.dataset.state === "mine"`, stepTimeout))
	if n := eval[int](t, ada, `document.querySelectorAll("#orders li").length`); n != 1 {
		t.Errorf("ada's orders list %d entries, want her seat", n)
	}
	shot(t, ada, "03-ada-sees-bob")
}

func TestBrowserWorkshopRun(t *testing.T) {
	testsupport.Long(t, "drives Chromium through a whole sale or ladder")
	app := startApp(t)
	app.reset(t, "")
	tab := newTab(t, startBrowser(t), false)
	do(t, tab, "open the workshop",
		chromedp.Navigate(app.base+"/workshop"),
		choose("#w-variant", "get-del"),
		waitJS(`document.querySelectorAll("#src-code .diff").length > 0 && document.querySelector("#src-file").textContent.includes("get_del.go")`, stepTimeout))
	if why := eval[string](t, tab, `document.querySelector("#src-why").textContent`); !strings.Contains(why, "GET") {
		t.Errorf("the paragraph for get-del is %q", why)
	}
	// A rung without a lock shows the inventory code that guards instead.
	do(t, tab, "pick db-guard",
		choose("#w-variant", "db-guard"),
		waitJS(`document.querySelector("#src-file").textContent.includes("inventory/db_guard.go")`, stepTimeout))
	if cmp := eval[string](t, tab, `document.querySelector("#src-compare").textContent`); !strings.Contains(cmp, "takes no lock") {
		t.Errorf("the comparison line for db-guard is %q", cmp)
	}

	// An admin action with the wrong token says so.
	do(t, tab, "run with a wrong token",
		chromedp.SendKeys(chromedp.ID("w-token"), "wrong"),
		chromedp.Click(chromedp.ID("w-run")),
		waitJS(outcomeHas("admin token was refused"), stepTimeout))

	do(t, tab, "run none under clean",
		js(`document.querySelector("#w-token").value = ""`),
		chromedp.SendKeys(chromedp.ID("w-token"), app.token),
		choose("#w-variant", "none"),
		choose("#w-scenario", "clean"),
		chromedp.SetValue(chromedp.ID("w-rate"), "300"),
		chromedp.SetValue(chromedp.ID("w-duration"), "2"),
		chromedp.Click(chromedp.ID("w-run")))
	ctx, cancel := context.WithTimeout(tab, 3*time.Minute) // the run itself: reset, attack, audit
	defer cancel()
	if err := chromedp.Do(ctx, waitJS(`document.querySelector("#runs-body tr[data-state]")`, stepTimeout)); err != nil {
		shot(t, tab, "failed-start")
		t.Fatalf("no row for the run: %v; the page says %q", err, eval[string](t, tab, `document.querySelector("#outcome").textContent`))
	}
	shot(t, tab, "01-running")
	if err := chromedp.Do(ctx, waitJS(`document.querySelector('#runs-body tr[data-state="done"] td.verdict')`, 3*time.Minute)); err != nil {
		shot(t, tab, "failed-run")
		t.Fatalf("the run's row never filled: %v", err)
	}
	row := eval[string](t, tab, `document.querySelector('#runs-body tr[data-state="done"]').textContent`)
	if !strings.Contains(row, "none") || !strings.Contains(row, "clean") {
		t.Errorf("the result row reads %q", row)
	}
	// The audit, not the page, decides: with no lock, concurrency alone
	// oversells, and the row must say so.
	if seen := eval[string](t, tab, `document.querySelectorAll('#runs-body tr[data-state="done"] td')[4]?.textContent || ""`); !strings.Contains(seen, "breaks") {
		t.Errorf("none under clean: the row's seen column reads %q, want breaks (row %q)", seen, row)
	}
	// The history its shoppers saw is not linearizable either: the row
	// links porcupine's picture of it.
	if link := eval[string](t, tab, `(a => a ? a.getAttribute("download") + " " + a.href : "")(document.querySelector('#runs-body tr[data-state="done"] a.history-link'))`); !strings.HasPrefix(link, "history-none-clean.html blob:") {
		t.Errorf("none under clean: the row's link to the history's picture is %q", link)
	}
	if n := eval[int](t, tab, `document.querySelectorAll("#chart .bar").length`); n < 1 {
		t.Error("the chart has no bar for the run")
	}
	if n := eval[int](t, tab, `document.querySelectorAll("#timeline .hold").length`); n < 1 {
		t.Error("the timeline shows no lock holder")
	}
	shot(t, tab, "02-result")

	do(t, tab, "phone screen",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Reload(),
		waitJS(`document.querySelectorAll("#src-code .line").length > 0 && document.querySelectorAll("#runs-body tr[data-state='done']").length > 0`, stepTimeout))
	if w := eval[int](t, tab, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
		t.Errorf("on a phone-sized screen the workshop is %d px wider than the screen", w)
	}
	shot(t, tab, "03-phone")
}
