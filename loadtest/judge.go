package loadtest

import (
	"fmt"
	"time"

	"flashsale/curriculum"
	"flashsale/loadtest/linear"
)

// Unanswered is a request that got no answer: a bug under every rung (a
// broken lock oversells or sticks, it never hangs the shop), so a cell or
// a chaos variant with one fails whatever its expectation.
type Unanswered struct {
	// Request is what it asked ("order of 2 × hot by u17, key lt-…").
	Request string `json:"request"`
	// Waited is how long it waited before the client gave up.
	Waited time.Duration `json:"waited_ns"`
	// Error is the client's own error.
	Error string `json:"error,omitempty"`
}

// maxUnanswered bounds the unanswered requests a report names; the count
// has them all.
const maxUnanswered = 20

// DescribeRequest is a request as a report names it.
func DescribeRequest(r linear.Request) string {
	if r.SKU != "" {
		return fmt.Sprintf("order of %d × %s by %s, key %s", r.Qty, r.SKU, r.User, r.Key)
	}
	return fmt.Sprintf("grab of %s/%s by %s, key %s", r.Event, r.Seat, r.User, r.Key)
}

// NameUnanswered adds u to list unless list already names maxUnanswered.
func NameUnanswered(list []Unanswered, u Unanswered) []Unanswered {
	if len(list) >= maxUnanswered {
		return list
	}
	return append(list, u)
}

// UnansweredReason is the reason a cell or variant with n unanswered
// requests fails, naming the first of them.
func UnansweredReason(n int, named []Unanswered) string {
	s := fmt.Sprintf("%d requests got no answer (a hang is a bug under every rung)", n)
	for i, u := range named {
		if i == 3 {
			s += fmt.Sprintf("; %d more in the report", len(named)-i)
			break
		}
		s += fmt.Sprintf("; %s waited %v", u.Request, u.Waited.Round(time.Millisecond))
		if u.Error != "" {
			s += " (" + u.Error + ")"
		}
	}
	return s
}

// DeclaredDisagreement is why the curriculum lets porcupine and the audit
// disagree for variant (its rung's Disagrees, or the rung's it is judged
// as); "" when it does not.
func DeclaredDisagreement(variant string) string {
	if own, _ := curriculum.Find(variant); own.Disagrees != "" {
		return own.Disagrees
	}
	r, _ := judgedRung(variant)
	return r.Disagrees
}

// DisagreementFails is how both runners judge a disagreement of porcupine
// and the audit: one the curriculum declares for the rung never fails (it
// is reported with its reason); any other fails where the curriculum makes
// a claim (holds, breaks), and under strict wherever it is.
func DisagreementFails(variant string, expected Outcome, strict bool) bool {
	if DeclaredDisagreement(variant) != "" {
		return false
	}
	return strict || expected == Holds || expected == Breaks
}
