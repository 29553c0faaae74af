package node

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"flashsale/internal/databirth"
	"flashsale/lock/internal/wire"
)

// The marker check behind every vote that can count: a flush breaks no
// connection, so the node's data marker is read again, in the same write,
// after each such vote (docs/design.md, "A flush under open connections").

// errDataLost breaks a vote's connection whose node lost the data its
// handshake met.
var errDataLost = errors.New("the node's data marker changed under an open connection (a flush): meeting the node again")

// connTag is a vote connection's tag for the incarnation id whose data were
// born at born (ms on the node's clock), if marked: "<run_id> <birth ms>",
// or "<run_id>" alone when the node would not run the marker script.
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
func (n *Node) kept(tag string, v any) bool {
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
func (n *Node) dataLost(tag string) {
	current, back := n.inc.lost(tag, n.cfg.TTL, time.Now())
	if current {
		n.cfg.Logger.Warn("redis node flushed under an open connection: not counted toward a quorum until its data are older than the largest TTL in use",
			"node", n.addr, "run_id", tagRunID(tag), "counts_from", back)
	}
	if current && n.inc.startReseed() {
		go n.reseedLoop()
	}
	n.pipe.Break(tag, errDataLost)
}
