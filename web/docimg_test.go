package web

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"flashsale/internal/testsupport"
)

// docImages asks TestBrowserDocImages to write the screenshots the README
// and the docs show (docs/img), each stamped with the page files it was
// taken of; docs.TestScreenshotsAreOfThePageAsItIs fails once the pages
// change and the pictures do not.
var docImages = flag.Bool("web.docimg", false, "write docs/img/*.png from the pages as they are (TestBrowserDocImages)")

// TestBrowserDocImages takes the documentation's screenshots from the real
// pages: the storefront after a product sold out, the workshop page after
// a run and, in its own picture, the whole ladder after it ran. It checks
// what it shows before it shoots, so a picture never shows a page that
// failed.
//
//	go test ./web -run TestBrowserDocImages -args -web.docimg
func TestBrowserDocImages(t *testing.T) {
	testsupport.Long(t, "drives Chromium through a whole sale or ladder")
	if !*docImages {
		t.Skip("writes docs/img; run with -args -web.docimg")
	}
	testsupport.Need(t, "redis-server", "the whole ladder starts Redis nodes of its own")
	stamp, err := testsupport.PageStamp("static")
	if err != nil {
		t.Fatal(err)
	}
	save := func(name string, png []byte) {
		t.Helper()
		png, err := testsupport.StampPNG(png, stamp)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := filepath.Join("..", "docs", "img", name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (page %s)", path, stamp)
	}
	app := startApp(t)
	app.reset(t, smallSale)
	browser := startBrowser(t)

	// The storefront: a product sold out, orders listed, a seat taken.
	shop := newTab(t, browser, true)
	sneaker := `document.querySelector('[data-sku="sneaker"]')`
	do(t, shop, "buy the sneakers out",
		chromedp.Navigate(app.base+"/"),
		waitJS(`document.querySelector("#live").dataset.state === "open" && `+sneaker+`?.dataset.stock === "5"`, stepTimeout),
		chromedp.SendKeys(chromedp.ID("user"), "ada"))
	for _, buy := range []struct{ qty, left string }{{"3", "2"}, {"2", "0"}} {
		do(t, shop, "buy "+buy.qty,
			chromedp.SetValue(chromedp.CSS(`[data-sku="sneaker"] input[name="qty"]`), buy.qty),
			chromedp.Click(chromedp.CSS(`[data-sku="sneaker"] button[type="submit"]`)),
			waitJS(outcomeHas("Bought "+buy.qty+" × Drop sneaker")+` && `+sneaker+`.dataset.stock === "`+buy.left+`"`, stepTimeout))
	}
	do(t, shop, "take a seat",
		chromedp.Click(chromedp.CSS(`#seatmap [data-seat="B3"]`)),
		waitJS(outcomeHas("Seat B3 is yours")+` && document.querySelectorAll("#orders li").length === 3`, stepTimeout))
	png, err := chromedp.Run(shop, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	save("storefront.png", png)

	// The workshop: one run of a broken rung, then the whole ladder (one
	// workshop run at a time: the ladder waits for the run's result).
	tab := newTab(t, browser, false)
	ctx, cancel := context.WithTimeout(tab, 10*time.Minute)
	defer cancel()
	do(t, tab, "run plain-del under a pause",
		chromedp.Navigate(app.base+"/workshop"),
		waitJS(`document.querySelector("#w-ladder") !== null`, stepTimeout),
		chromedp.SendKeys(chromedp.ID("w-token"), app.token),
		choose("#w-variant", "plain-del"),
		choose("#w-scenario", "pause-in-critical-section"),
		chromedp.SetValue(chromedp.ID("w-rate"), "300"),
		chromedp.SetValue(chromedp.ID("w-duration"), "2"),
		chromedp.Click(chromedp.ID("w-run")))
	if err := chromedp.Do(ctx, waitJS(`document.querySelector('#runs-body tr[data-state="done"] td.verdict') && document.querySelectorAll("#timeline .hold").length > 0`, 3*time.Minute)); err != nil {
		shot(t, tab, "failed-run")
		t.Fatalf("the run's row never filled: %v", err)
	}
	if row := eval[string](t, tab, `document.querySelector('#runs-body tr[data-state="done"]').textContent`); !strings.Contains(row, "plain-del") {
		t.Fatalf("the run's row reads %q", row)
	}

	// The server ends the run just after it reports the result; the ladder
	// is refused until it has.
	for i := 0; ; i++ {
		if _, runs := app.admin(t, "GET", "/api/admin/workshop/runs", ""); !strings.Contains(runs, `"state":"running"`) {
			break
		} else if i == 100 {
			t.Fatalf("a workshop run is still in progress: %s", runs)
		}
		time.Sleep(100 * time.Millisecond) // polling the server: it says nothing when a run ends
	}
	do(t, tab, "run the whole ladder",
		chromedp.Click(chromedp.ID("w-ladder")),
		waitJS(`document.querySelectorAll("#ladder-body tr[data-step]").length > 0`, stepTimeout))
	if err := chromedp.Do(ctx, waitJS(outcomeHas("The ladder finished"), 10*time.Minute)); err != nil {
		shot(t, tab, "failed-ladder")
		t.Fatalf("the ladder never finished: %v", err)
	}
	if n := eval[int](t, tab, `document.querySelectorAll('#ladder-body tr[data-state="done"]').length`); n < 20 {
		t.Fatalf("only %d rows of the ladder ran", n)
	}
	if n := eval[int](t, tab, `document.querySelectorAll("#ladder-body tr.mismatch").length`); n != 0 {
		shot(t, tab, "ladder-mismatch")
		rows := eval[[]string](t, tab, `[...document.querySelectorAll("#ladder-body tr.mismatch")].map((tr) => tr.textContent)`)
		t.Fatalf("%d rows of the ladder did not do what the matrix expects, %q: no picture of a ladder that failed", n, rows)
	}
	png, err = chromedp.Run(tab, chromedp.Screenshot(chromedp.CSS(`section[aria-labelledby="ladder-h"]`)))
	if err != nil {
		t.Fatal(err)
	}
	save("workshop-ladder.png", png)

	do(t, tab, "the run's results in view",
		choose("#w-metric", "lost_updates"),
		waitJS(`document.querySelectorAll("#chart .bar").length > 0`, stepTimeout),
		js(`document.querySelector('section[aria-labelledby="results-h"]').scrollIntoView()`))
	png, err = chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	save("workshop.png", png)
}
