package lock

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

// singleBreakers are the chaos faults that can break a single-node rung
// without fencing: a holder paused past its TTL, a jump that expires its
// key, a grant that arrives after its lease ran out, and a failover whose
// promoted replica lacks the key of a lease still at work.
var singleBreakers = []string{"app-pause", "clock-jump", "net-delay", "node-failover"}
