package web

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// Before workshop.js runs (a slow network; here the script is blocked), the
// run form cannot carry the admin token into a URL: Enter in the token
// field submits nothing (the Run button waits for the script), and a
// submission anyway posts the form, whose token field has no name, to a
// route that answers 405 without echoing it. The address bar and the
// history never hold the token. The control: the form's other fields are
// in its data, and with the script the Run button is enabled.
func TestBrowserRunFormKeepsTheTokenOutOfURLs(t *testing.T) {
	app := startApp(t)
	tab := newTab(t, startBrowser(t), false)
	const secret = "typed-before-the-script-came"
	blockScript := chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tgt, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tgt, network.SetBlockedURLs, network.SetBlockedURLsParams{
			URLPatterns: []*network.BlockPattern{{URLPattern: app.base + "/static/workshop.js", Block: true}},
		})
		return err
	})
	do(t, tab, "open the workshop without its script", blockScript,
		chromedp.Navigate(app.base+"/workshop"),
		waitJS(`document.readyState === "complete"`, stepTimeout))
	if eval[bool](t, tab, `document.querySelector("#w-run").disabled === false`) {
		t.Fatal("the Run button is enabled before the script runs")
	}
	fields := eval[string](t, tab, `[...new FormData(document.querySelector("#run-form")).keys()].join(",")`)
	if !strings.Contains(fields, "variant") || !strings.Contains(fields, "rate") || strings.Contains(fields, "token") {
		t.Errorf("the form submits the fields %q: want variant and rate, never the token", fields)
	}
	// The first navigation these steps make is the one answered: had Enter
	// submitted the form, it would be that one.
	ctx, cancel := context.WithTimeout(tab, stepTimeout)
	defer cancel()
	res, err := chromedp.RunResponse(ctx,
		chromedp.SendKeys(chromedp.ID("w-token"), secret),
		chromedp.KeyEvent(kb.Enter),
		js(`document.querySelector("#run-form").requestSubmit()`))
	if err != nil {
		t.Fatalf("submitting the form: %v", err)
	}
	if res.Status != 405 || res.URL != app.base+"/workshop" {
		t.Errorf("the submission went to %s and was answered %d; want a POST to the page, answered 405", res.URL, res.Status)
	}
	do(t, tab, "the answer", waitJS(`document.body && document.body.innerText.includes("method_not_allowed")`, stepTimeout))
	if body := eval[string](t, tab, `document.body.innerText`); strings.Contains(body, secret) {
		t.Errorf("the answer echoes the token: %s", body)
	}
	history, err := chromedp.Run(tab, func(ctx context.Context, tgt *chromedp.Target) (page.GetNavigationHistoryResult, error) {
		return cdp.Call(ctx, tgt, page.GetNavigationHistory, cdp.Empty{})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range history.Entries {
		if strings.Contains(e.URL, secret) || strings.Contains(e.URL, "token") || strings.Contains(e.URL, "?") {
			t.Errorf("the history holds %s", e.URL)
		}
	}
	if href := eval[string](t, tab, `location.href`); href != app.base+"/workshop" {
		t.Errorf("the address bar holds %s, want the page's own address", href)
	}

	// The control: with its script, the page enables the button.
	fresh := newTab(t, startBrowser(t), false)
	do(t, fresh, "open the workshop with its script",
		chromedp.Navigate(app.base+"/workshop"),
		waitJS(`document.querySelector("#w-run").disabled === false`, stepTimeout))
}
