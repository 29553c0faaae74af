package chaos

import (
	"encoding/json"
	"testing"
	"time"

	"flashsale/loadtest"
	"flashsale/loadtest/checker"
)

// TestVerdictJSON pins chaos.json's verdict and the checker's result, field
// by field and in order: both carry the checker's counters, and a kept
// run's chaos.json must read back the same.
func TestVerdictJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	first := &checker.Violation{Time: at, Kind: "lock-overlap", Key: "sku:hot", Detail: "two holders"}

	var r checker.Result
	r.Variant, r.Verdict = "lua", "breaks"
	r.LockOverlaps, r.StaleWrites, r.OversoldUnits, r.LostUpdates = 1, 2, 3, 4
	r.DoubleBookedSeats, r.StuckLocks, r.LostAcknowledgedOrders, r.TokenInversions = 5, 6, 7, 8
	r.Leases, r.Writes, r.Acks, r.Orders, r.Bookings = 9, 10, 11, 12, 13
	r.FirstViolation, r.Violations = first, []checker.Violation{*first}

	var v Variant
	v.Verdict, v.Expected, v.ExpectedBreakers, v.OK = "breaks", loadtest.Breaks, []string{"clock-jump"}, true
	v.LockOverlaps, v.StaleWrites, v.OversoldUnits, v.LostUpdates = 1, 2, 3, 4
	v.DoubleBookedSeats, v.StuckLocks, v.LostAcknowledgedOrders, v.TokenInversions = 5, 6, 7, 8
	v.NemesisEvents, v.Requests, v.Answers = map[string]int{"clock-jump": 2}, 14, map[string]int{"201": 12}
	v.Leases, v.Orders, v.Bookings = 9, 12, 13
	v.FirstViolation, v.Violations = first, []checker.Violation{*first}
	v.Scope = checker.Scope{Variant: "lua", SKUs: []string{"hot"}}
	v.Linearizable, v.HistoryFile = new(false), "histories/lua.html"

	const violation = `{"t":"2026-01-02T10:00:00Z","kind":"lock-overlap","key":"sku:hot","detail":"two holders"}`
	const counters = `"lock_overlaps":1,"stale_writes":2,"oversold_units":3,"lost_updates":4,"double_booked_seats":5,"stuck_locks":6,"lost_acknowledged_orders":7,"token_inversions":8`
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"checker.Result", r, `{"variant":"lua","verdict":"breaks",` + counters + `,"leases":9,"writes":10,"acks":11,"orders":12,"bookings":13,` +
			`"first_violation":` + violation + `,"violations":[` + violation + `]}`},
		{"chaos.Variant", v, `{"verdict":"breaks","expected":"breaks","expected_breakers":["clock-jump"],"ok":true,` + counters +
			`,"nemesis_events":{"clock-jump":2},"requests":14,"answers":{"201":12},"leases":9,"orders":12,"bookings":13,` +
			`"first_violation":` + violation + `,"violations":[` + violation + `],"scope":{"variant":"lua","skus":["hot"]},"linearizable":false,"history_file":"histories/lua.html","unanswered":0}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
	}
}
