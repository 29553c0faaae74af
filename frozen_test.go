package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"flashsale/internal/testsupport"
)

// TestFrozenFirstNodeSale: the storefront with its first Redis node frozen
// (SIGSTOP: connections open, nothing answered) and a second one stopped
// still sells every order of a hot SKU, with the speed layer on and off;
// with a third node stopped, no quorum is possible and every order is
// answered 503 lock_unavailable, not lock_busy. The control is the same
// sale with every node up. A frozen first node once left most such orders
// 503 lock_busy with the speed layer on, and "unavailable" was answered
// busy either way.
func TestFrozenFirstNodeSale(t *testing.T) {
	testsupport.Long(t, "the storefront's processes started, stopped and raced for seconds")
	nodes := testsupport.Redis(t, 5)
	// The control sells on instances of its own: the others' connections
	// to the nodes are open but carried nothing yet, as just after a start.
	control, apps := map[string]*instance{}, map[string]*instance{}
	for _, fast := range []string{"true", "false"} {
		for name, set := range map[string]map[string]*instance{"control": control, "frozen": apps} {
			app := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t),
				"-fast="+fast, "-namespace", name+"-"+fast+":", "-lock-wait", "1s")
			app.reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":100,"stock":1000}],"seats":0}`)
			set[fast] = app
		}
	}
	sale := func(set map[string]*instance, phase, want string) {
		t.Helper()
		for fast, app := range set {
			answers := shop(app, phase, 4, 5)
			if n := answers.get(want); n != 20 {
				t.Errorf("%s, fast=%s: %d of 20 answered %q: %v", phase, fast, n, want, answers)
			}
		}
	}
	sale(control, "up", "201 ")

	if err := nodes.Nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Nodes[0].Resume() }) // before the nodes stop
	if err := nodes.Nodes[1].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	sale(apps, "frozen", "201 ")

	if err := nodes.Nodes[2].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	sale(apps, "no-quorum", "503 lock_unavailable")
}

// shop has shoppers each order one unit of the hot SKU orders times, one
// after another, as users named after the phase, and tallies the answers.
func shop(app *instance, phase string, shoppers, orders int) *tally {
	answers := &tally{}
	var wg sync.WaitGroup
	for s := range shoppers {
		wg.Go(func() {
			for i := range orders {
				user := fmt.Sprintf("%s/%d/%d", phase, s, i)
				answers.add(app.call("POST", "/api/orders", fmt.Sprintf(`{"sku":"hot","qty":1,"user":%q}`, user)))
			}
		})
	}
	wg.Wait()
	return answers
}
