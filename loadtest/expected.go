package loadtest

import (
	"slices"
	"time"

	"flashsale/curriculum"
	"flashsale/lock/ladder"
)

// Outcome is what a cell of the matrix does: the sale holds, or it breaks.
// The outcomes, and every rung's expected one per column, are declared
// by the curriculum (curriculum.Lesson); the runner only reads them.
type Outcome = curriculum.Outcome

// Outcomes, as the curriculum declares them.
const (
	Holds   = curriculum.Holds
	Breaks  = curriculum.Breaks
	NoClaim = curriculum.NoClaim
	Either  = curriculum.Either
)

// EitherWhy says why a cell can go either way; "" for a cell that cannot.
// A rung judged by another's row keeps its own either cells.
func EitherWhy(variant, scenario string) string {
	if own, _ := curriculum.Find(variant); own.Either[scenario] != "" {
		return own.Either[scenario]
	}
	r, _ := judgedRung(variant)
	return r.Either[scenario]
}

// Expected is the outcome the ladder expects of variant under scenario, and
// false for a cell that is not in the matrix (an unknown variant or
// scenario, or a scenario that does not apply to the variant).
func Expected(variant, scenario string) (Outcome, bool) {
	r, ok := judgedRung(variant)
	if !ok {
		return "", false
	}
	for _, s := range Scenarios(time.Second) {
		if s.Name == scenario {
			if !s.Applies(variant) {
				return "", false
			}
			if EitherWhy(variant, scenario) != "" {
				return Either, true
			}
			return r.Expect(scenario), true
		}
	}
	return "", false
}

// judgedRung is the rung whose row judges variant: its own, or the one it
// is declared to be judged as.
func judgedRung(variant string) (curriculum.Lesson, bool) {
	r, ok := curriculum.Find(variant)
	if ok && r.JudgedAs != "" {
		return curriculum.Find(r.JudgedAs)
	}
	return r, ok
}

// batchNote is how a run with batching on is judged.
const batchNote = "a batch takes one lease for the orders that queued in one instance, so a lease guards a batch instead of an order: " +
	"every cell that holds still holds, none still breaks (its instances still race each other), and the broken rungs' cells may go either way " +
	"(their flaw is unchanged, but a fault that fires once a lease now meets a batch, and fewer leases mean fewer chances to land in the race)"

// ExpectedBatched is the outcome expected of variant under scenario when
// every order is batched under one lease (the app's -batch): what Expected
// says, except that a broken rung's "breaks" becomes "either" (batchNote).
// A cell that holds must still hold: batching changes how many orders a
// lease guards, never what guards them; and none must still break.
func ExpectedBatched(variant, scenario string) (Outcome, bool) {
	exp, ok := Expected(variant, scenario)
	return batched(variant, exp), ok
}

// batched is exp of variant with batching on (ExpectedBatched).
func batched(variant string, exp Outcome) Outcome {
	if r, _ := judgedRung(variant); exp == Breaks && r.Name != ladder.None {
		return Either
	}
	return exp
}

// watchdogNote is how a run with the watchdog on in every cell is judged.
const watchdogNote = "with the watchdog on, a lease is lost to its holder once its validity has passed, so the check before the write refuses " +
	"a holder whose validity ran out before it (paused inside its work, or told of its grant later than the TTL): " +
	"in pause-in-critical-section and network-delay the correct rungs hold, the broken rungs' cells may go either way " +
	"(their releases keep their flaws) and none still breaks; long-work is judged as long-work-watchdog; every other column keeps its " +
	"expectation (a pause after the check still breaks, a crash stops the watchdog, a release stops it first)"

// pastValidity are the columns whose fault leaves a holder past its
// validity by the time it checks its lease before writing.
var pastValidity = []string{PauseInCriticalSection, NetworkDelay}

// ExpectedWatchdog is the outcome expected of variant under scenario when
// every cell runs with the lease watchdog on (-watchdog): what Expected
// says of the scenario's watchdog twin, except in the columns where the
// check before the write finds the holder past its validity (watchdogNote).
func ExpectedWatchdog(variant, scenario string) (Outcome, bool) {
	exp, ok := Expected(variant, WatchdogTwin(scenario))
	r, _ := judgedRung(variant)
	if !ok || exp != Breaks || r.Name == ladder.None || !slices.Contains(pastValidity, scenario) {
		return exp, ok
	}
	if r.Correct {
		return Holds, true
	}
	return Either, true
}
