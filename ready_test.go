package main

import (
	"strings"
	"testing"
	"time"

	"flashsale/internal/localredis"
	"flashsale/internal/testsupport"
)

// /readyz 200 means an order can be granted now. On fresh plain Redis nodes
// (no keyspace notifications and no data marker, as a team's own nodes
// are), the app waits for /readyz to answer 200, and then the next ten
// orders under redlock, 0.2 s apart as a shopper's clicks, all sell: none is
// refused because a node still sits out its first TTL, waits for its
// counters, or was set aside for a change the app made itself. Twenty
// rounds, each on new nodes and a new app.
func TestReadyzMeansAnOrderSells(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		nodes := testsupport.Redis(t, 5, localredis.Options{Args: []string{"--notify-keyspace-events", ""}, Unmarked: true})
		in := start(t, nil, "-redis", strings.Join(nodes.URLs(), ","), "-db", testsupport.SQLite(t), "-lock", "redlock", "-lock-ttl", "1s")
		deadline := time.Now().Add(20 * time.Second)
		for a := in.call("GET", "/readyz", ""); a.status != 200; a = in.call("GET", "/readyz", "") {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: /readyz never 200: %d %s", round, a.status, a.body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		in.reset(`{"products":[{"sku":"hot","name":"Hot","price_cents":100,"stock":100}],"seats":0}`)
		for i := range 10 {
			if a := in.call("POST", "/api/orders", `{"sku":"hot","qty":1,"user":"ready"}`); a.status != 201 {
				t.Fatalf("round %d, order %d after /readyz said 200: %d %s", round, i, a.status, a.body)
			}
			time.Sleep(200 * time.Millisecond) // the shopper's pace, not a wait for anything
		}
		if err := in.shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := nodes.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}
