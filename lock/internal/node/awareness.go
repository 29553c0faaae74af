package node

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"flashsale/internal/redisinfo"
)

// Restart awareness as a state machine: what this process knows of one
// node's current incarnation, and so whether a vote from it counts now.
//
// A node is in one of these states (awareState):
//
//	unmet       no meeting has read it yet
//	blind       it refuses for good to tell its run_id (ACL, not a full Redis)
//	sittingOut  its data lost keys less than the sit-out ago
//	unseeded    its fencing counters and TTL record are not re-seeded yet
//	voting      its votes count
//
// and moves between them on four events: met (a meeting read it), lost (a
// vote's marker check found its data replaced), seeded (a re-seed finished)
// and the clock passing the end of the sit-out. Only blind and voting
// count. It fails closed: a reading or a re-seed that began before the last
// recorded loss is stale and changes nothing (a meeting that made it fails
// its connection, so the next one reads the node again), and a meeting the
// node could not answer fails before it gets here.
type awareState int

const (
	unmet awareState = iota
	blind
	sittingOut
	unseeded
	voting
)

func (s awareState) String() string {
	return [...]string{"unmet", "blind", "sitting out", "unseeded", "voting"}[s]
}

// errStaleReading fails a connection whose meeting read the node before a
// loss of its data that this process has recorded since.
var errStaleReading = errors.New("the meeting's reads predate a recorded loss of the node's data: meeting it again")

// incarnation is the state of one node's awareness.
type incarnation struct {
	mu        sync.Mutex
	runID     string
	birth     int64           // its data's birth as last met, ms on its clock (0: not marked)
	replaced  map[string]bool // run_ids of earlier incarnations: met late, they change nothing
	start     time.Time       // the latest the current incarnation's data can have become complete
	ttl       time.Duration   // the largest lease TTL known in use on these nodes
	back      time.Time       // sits out until then: start + sitOut(ttl)
	lostAt    time.Time       // the last loss of data recorded: readings from before it are stale
	reseed    bool            // counters not yet re-seeded for this incarnation
	seededFor string          // the run_id whose counters are known re-seeded
	reseeding bool            // a re-seed loop is running
	blind     bool            // refuses for good to tell its run_id
	warned    bool            // its refusals were logged
	evicts    bool            // its eviction policy was logged

	sitOut func(ttl time.Duration) time.Duration // Config.SitOut
}

// state is the node's state at now. Called with mu held.
func (inc *incarnation) state(now time.Time) awareState {
	switch {
	case inc.runID == "" && inc.blind:
		return blind
	case inc.runID == "":
		return unmet
	case now.Before(inc.back):
		return sittingOut
	case inc.reseed:
		return unseeded
	}
	return voting
}

// meeting is what met changed, for the log.
type meeting struct {
	first bool // a new incarnation, or the first this process met
	lost  bool // the same incarnation, with data younger than known
	young bool // sitting out after it
	warn  bool // refusals to log, for the first time
	back  time.Time
	ttl   time.Duration // the largest TTL known, which the sit-out is for
}

// met records a meeting's reading rd, taken with this client's TTL ttl.
func (inc *incarnation) met(rd reading, ttl time.Duration, now time.Time) (meeting, error) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	var m meeting
	id := rd.id()
	uptime, err := strconv.ParseInt(redisinfo.Value(rd.info, "uptime_in_seconds"), 10, 64)
	if err != nil || id == "" {
		inc.blind = true
	} else if inc.replaced[id] {
		// A connection to an incarnation since replaced, met late: it must
		// not turn the node's state back.
		return m, nil
	} else if id == inc.runID && rd.at.Before(inc.lostAt) {
		return m, errStaleReading
	} else {
		// Whole seconds now minus whole seconds at start: the real uptime
		// is more than one second short of the reported one at most.
		start := now.Add(-time.Duration(max(uptime-1, 0)) * time.Second)
		if born := now.Add(-rd.age.d); rd.age.known && born.After(start) {
			start = born // a failover, a flush, a reload that re-marked them
		}
		switch {
		case id != inc.runID:
			m.first = true
			if inc.runID != "" {
				// Seen replaced by this process: the new one started after
				// that, and no later than now.
				if inc.replaced == nil {
					inc.replaced = map[string]bool{}
				}
				inc.replaced[inc.runID], start = true, now
			}
			inc.runID, inc.birth, inc.start, inc.seededFor = id, rd.birth, start, ""
		case rd.age.known && rd.birth > inc.birth:
			// Marked anew since this process met it (on the node's clock,
			// so no jitter of ours reads as a loss): flushed. Readings
			// from before now may predate the loss.
			m.lost = true
			inc.birth, inc.lostAt, inc.seededFor = rd.birth, now, ""
			if start.After(inc.start) {
				inc.start = start
			}
		}
		inc.ttl = max(inc.ttl, rd.recorded, ttl)
		inc.extend()
		if rd.seeded == id {
			inc.seededFor = id
		}
		inc.reseed = inc.seededFor != id
	}
	m.warn = len(rd.refused) > 0 && !inc.warned
	inc.warned = inc.warned || m.warn
	m.young, m.back, m.ttl = now.Before(inc.back), inc.back, inc.ttl
	return m, nil
}

// lost records that the data the connection tagged tag met are gone, seen
// at now: the node sits out from now, its counters need a re-seed, and
// readings from before now are stale. It reports whether the tag names the
// current incarnation, and until when the node sits out.
func (inc *incarnation) lost(tag string, ttl time.Duration, now time.Time) (current bool, back time.Time) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if inc.runID == "" || inc.runID != tagRunID(tag) {
		return false, inc.back
	}
	inc.start, inc.lostAt, inc.ttl = now, now, max(inc.ttl, ttl)
	inc.extend()
	inc.seededFor, inc.reseed = "", true
	return true, inc.back
}

// startReseed reports whether a re-seed loop should start now: one is
// needed and none runs. The caller starts it.
func (inc *incarnation) startReseed() bool {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	start := inc.reseed && !inc.reseeding
	inc.reseeding = inc.reseeding || start
	return start
}

// seeded records a re-seed for incarnation id that began at began and
// learnt the largest TTL in use. One that began before the last recorded
// loss re-seeded counters the loss may have taken: it changes nothing but
// the TTL.
func (inc *incarnation) seeded(id string, began time.Time, ttl time.Duration) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	inc.ttl = max(inc.ttl, ttl)
	inc.extend()
	if id != inc.runID || began.Before(inc.lostAt) {
		return
	}
	inc.seededFor, inc.reseed = id, false
}

// extend moves back to the end of the sit-out after start for the largest
// TTL known; never earlier. Called with mu held.
func (inc *incarnation) extend() {
	if back := inc.start.Add(inc.sitOut(inc.ttl)); back.After(inc.back) {
		inc.back = back
	}
}

// counts says whether a vote on a connection tagged tag (its incarnation;
// "" when the transport cannot tell) counts at now.
func (inc *incarnation) counts(tag string, now time.Time) bool {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if tag != "" && tagRunID(tag) != inc.runID {
		return false
	}
	s := inc.state(now)
	return s == voting || s == blind
}

// firstEviction reports whether this is the first meeting that found the
// node may evict keys, for the log.
func (inc *incarnation) firstEviction() bool {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	first := !inc.evicts
	inc.evicts = true
	return first
}
