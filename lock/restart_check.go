package lock

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"flashsale/internal/databirth"
	"flashsale/lock/internal/wire"
)

// The check behind every vote (restart.go): a flush under open connections.
//
// A vote's connection met the node's data marker in its handshake, and its
// tag names that marker: "<run_id> <birth ms>", or "<run_id>" alone when
// the node would not run the marker script. FLUSHALL breaks no connection,
// so each command that can count as a yes is followed, on the same
// connection and in the same write, by a GET of the marker. Redis runs a
// connection's commands in order: a flush before the vote or between the
// two leaves the GET without the marker, or with one another client wrote
// since, and the vote does not count. A flush after the GET is seen by the
// next vote on the node, whoever sends it, before that vote counts.

// errDataLost breaks a vote's connection whose node lost the data its
// handshake met.
var errDataLost = errors.New("the node's data marker changed under an open connection (a flush): meeting the node again")

// connTag is a vote connection's tag for the incarnation id whose data were
// born at born (ms on the node's clock), if marked.
func connTag(id string, born int64, marked bool) string {
	if !marked || id == "" {
		return id
	}
	return id + " " + strconv.FormatInt(born, 10)
}

// tagRunID is the run_id a connection's tag names.
func tagRunID(tag string) string {
	id, _, _ := strings.Cut(tag, " ")
	return id
}

// checks says whether c is followed by the marker check: every command
// that can count as a yes toward a grant, when restart awareness is on. A
// compare-and-delete is not: its yes gives nobody a lock.
func (n *node) checks(c command) bool {
	return n.cfg.restartAware && !(len(c.args) > 1 && c.args[1] == compareAndDelete.src)
}

// markerCheck is the command that follows a checked vote.
var markerCheck = wire.Command{Args: []string{"GET", databirth.Key}, Want: wire.BulkOrNil}

// kept judges the marker check's reply v on a connection tagged tag:
// whether the vote it follows may count. A marker that no longer names the
// birth the connection met is a loss of data: the node sits out from now,
// its fencing counters are re-seeded, and the connection is broken so that
// the next one meets the node again. A check the node could not answer for
// now (BUSY, LOADING …) tells nothing: the vote does not count (fail closed).
// A connection that met no marker (the node refuses the marker script for
// good, logged at its meeting) cannot tell: the vote counts.
func (n *node) kept(tag string, v any) bool {
	if !strings.Contains(tag, " ") {
		return true
	}
	if se, refused := v.(wire.ServerError); refused {
		return refusedForGood(se)
	}
	if s, _ := v.(string); s == tag {
		return true
	} else if id, born, ok := strings.Cut(s, " "); ok && connTag(id, parseMS(born), true) == tag {
		return true // the same birth, written in another form
	}
	n.dataLost(tag)
	return false
}

func parseMS(s string) int64 {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return ms
}

// dataLost: the node lost keys after the connection tagged tag met it, no
// later than now.
func (n *node) dataLost(tag string) {
	current, back := n.inc.lost(tag, n.cfg.ttl, time.Now())
	if current {
		n.cfg.logger.Warn("redis node flushed under an open connection: not counted toward a quorum until its data are older than the largest TTL in use",
			"node", n.addr, "run_id", tagRunID(tag), "counts_from", back)
	}
	if current && n.inc.startReseed() {
		go n.reseedLoop()
	}
	n.pipe.Break(tag, errDataLost)
}
