package node

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"flashsale/internal/databirth"
	"flashsale/lock/internal/wire"
)

// The check behind every vote that can count. Neither a flush nor any other
// operator command that removes, rolls back or hides keys breaks a
// connection, so after each such vote, in the same write, the node's data
// marker is read again and so is its operator ledger (databirth.Ledger);
// votes written together share one reading behind the last of them, which
// comes after each of them all the same:
// docs/design.md, "It fails closed", lists what each catches.

// errDataLost breaks a vote's connection whose node lost the data its
// meeting met.
var errDataLost = errors.New("the node's data marker or operator ledger changed under an open connection: meeting the node again")

// connTag is a vote connection's tag for the incarnation id whose data were
// born at born (ms on the node's clock) under the operator ledger ledger:
// the marker's own value, "<run_id> <birth ms> <ledger>".
func connTag(id string, born int64, ledger string) string {
	return id + " " + strconv.FormatInt(born, 10) + " " + ledger
}

// tagRunID is the run_id a connection's tag names.
func tagRunID(tag string) string {
	id, _, _ := strings.Cut(tag, " ")
	return id
}

// checks are the commands that follow a checked vote: the marker, then the
// ledger's counts.
var checks = []wire.Command{
	{Args: []string{"GET", databirth.Key}, Want: wire.BulkOrNil},
	{Args: []string{"INFO", "commandstats"}, Want: wire.Bulk},
}

// kept judges the checks' replies marker and stats on a connection tagged
// tag: whether the vote they follow may count. A marker that no longer is
// the one the connection met, a ledger that moved, or a total of calls
// below one read before (the counts were reset, which could hide an
// operator command) is a possible loss of data: the node sits out from now,
// its fencing counters are re-seeded, and the connection is broken so that
// the next one meets the node again. A check the node does not answer
// (BUSY, LOADING, and a NOPERM too: an ACL that took a command away must
// not switch the check off) tells nothing: the vote does not count (fail
// closed).
func (n *Node) kept(tag string, marker, stats any) bool {
	for _, v := range []any{marker, stats} {
		if _, refused := v.(wire.ServerError); refused {
			return false
		}
	}
	m, _ := marker.(string)
	s, _ := stats.(string)
	_, rest, _ := strings.Cut(tag, " ")
	_, met, _ := strings.Cut(rest, " ")
	ledger, calls := databirth.Ledger(s)
	if m == tag && ledger == met && n.inc.checked(tag, calls) {
		return true
	}
	n.dataLost(tag)
	return false
}

// dataLost: the node lost keys after the connection tagged tag met it, no
// later than now.
func (n *Node) dataLost(tag string) {
	current, back := n.inc.lost(tag, n.cfg.TTL, time.Now())
	if current {
		n.cfg.Logger.Warn("redis node flushed, or run by an operator command that can lose keys, under an open connection: not counted toward a quorum until its data are older than the largest TTL in use",
			"node", n.addr, "run_id", tagRunID(tag), "counts_from", back)
	}
	if current && n.inc.startReseed() {
		go n.reseedLoop()
	}
	n.pipe.Break(tag, errDataLost)
}
