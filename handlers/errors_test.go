package handlers

import (
	"slices"
	"testing"
)

// Every code the app can produce has a row in the table, with an error
// status and a message.
func TestErrorTableIsComplete(t *testing.T) {
	for _, d := range domainCodes {
		if _, ok := errorTable[d.code]; !ok {
			t.Errorf("%q has no row in the error table", d.code)
		}
	}
	for code, o := range errorTable {
		if o.status < 400 || o.message == "" {
			t.Errorf("%q: status %d, message %q", code, o.status, o.message)
		}
		if (o.status == 503 || o.status == 429) && o.retryAfter == "" {
			t.Errorf("%q: a %d without Retry-After", code, o.status)
		}
		if o.limit != "" && !slices.Contains(limitNames, o.limit) {
			t.Errorf("%q: limit %q is not among the metric's labels %v", code, o.limit, limitNames)
		}
	}
}
