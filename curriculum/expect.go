package curriculum

import "slices"

// Outcome is what a cell of the load runner's matrix does: the sale holds,
// or it breaks.
type Outcome string

// Outcomes.
const (
	// Holds: no overselling, no lost update, no double booking, no stuck
	// lock, no order lost or invented (503s are allowed).
	Holds Outcome = "holds"
	// Breaks: at least one of those, coming out of the real race.
	Breaks Outcome = "breaks"
	// NoClaim: the design promises nothing for the cell; it is run and
	// shown, not judged.
	NoClaim Outcome = "no claim"
	// Either: the cell can hold or break depending on timing the runner
	// does not control (the lesson's Either says why); it is run and shown,
	// and either outcome is as expected.
	Either Outcome = "either"
)

// Expect is what the rung does under the matrix column scenario, by its own
// row (JudgedAs is the caller's to follow).
func (l Lesson) Expect(scenario string) Outcome {
	switch {
	case l.Either[scenario] != "":
		return Either
	case slices.Contains(l.Breaks, scenario):
		return Breaks
	case slices.Contains(l.NoClaim, scenario):
		return NoClaim
	default:
		return Holds
	}
}

// ChaosClaim is what the chaos runner expects of a rung. Fault kinds are
// the chaos runner's names ("app-pause", "node-failover", …), plain
// strings here so that this package needs nothing of the runner's; the
// runner checks that each is one of its kinds.
type ChaosClaim struct {
	// Alone: concurrency alone breaks the rung, whatever the faults.
	Alone bool
	// Breakers are the fault kinds that can break the rung (AnyFault:
	// every kind). Whether one does in a given run is timing (a pause must
	// catch a holder at work); under none of them the rung must hold.
	Breakers []string
	// Unaware are the kinds that can also break it when the instances run
	// with restart awareness off.
	Unaware []string
}

// AnyFault in ChaosClaim.Breakers: every fault kind can break the rung.
const AnyFault = "*"
