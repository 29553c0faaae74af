package opfuzz

import (
	"context"
	"slices"
	"time"
)

// shortestWait is as short as the shrinker makes a duration.
const shortestWait = 50 * time.Millisecond

// Shrink returns a shorter sequence for which fails still holds, by delta
// debugging: it drops ever smaller runs of actions (halves, then quarters,
// down to single actions) while fails holds, then halves the waits and the
// other durations one by one. fails is tried at most budget times in all
// (each try may run the sequence several times: the timing is real, so one
// run that passes proves little); the sequence is returned as far as it got
// when the budget or ctx runs out. seq itself is taken to fail. Adjacent
// waits are joined into one wait of their sum wherever they meet (two sleeps
// in a row are one), so a dropped action never leaves "wait 1s; wait 1s".
func Shrink(ctx context.Context, seq Sequence, fails func(context.Context, Sequence) bool, budget int) Sequence {
	tries := 0
	try := func(s Sequence) bool {
		if tries >= budget || ctx.Err() != nil || len(s) == 0 {
			return false
		}
		tries++
		return fails(ctx, s)
	}
	seq = joinWaits(slices.Clone(seq))
	for n := 2; len(seq) >= 2 && tries < budget && ctx.Err() == nil; {
		n = min(n, len(seq))
		reduced := false
		for i := range n {
			lo, hi := i*len(seq)/n, (i+1)*len(seq)/n
			rest := joinWaits(slices.Concat(seq[:lo], seq[hi:]))
			if try(rest) {
				seq, reduced = rest, true
				n = max(n-1, 2)
				break
			}
		}
		if !reduced {
			if n == len(seq) {
				break
			}
			n = min(2*n, len(seq))
		}
	}
	for i := range seq {
		if seq[i].Op == "holder" {
			continue // a holder's TTL is part of what it is
		}
		for seq[i].D/2 >= shortestWait {
			shorter := slices.Clone(seq)
			shorter[i].D = (seq[i].D / 2).Round(10 * time.Millisecond)
			if !try(shorter) {
				break
			}
			seq = shorter
		}
	}
	return seq
}

// joinWaits returns s with every run of adjacent waits made one wait of
// their sum.
func joinWaits(s Sequence) Sequence {
	out := s[:0]
	for _, a := range s {
		if last := len(out) - 1; a.Op == "wait" && last >= 0 && out[last].Op == "wait" {
			out[last].D += a.D
			continue
		}
		out = append(out, a)
	}
	return out
}
