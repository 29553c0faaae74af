package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"flashsale/internal/databirth"
	"flashsale/internal/redisinfo"
	"flashsale/lock/internal/wire"
)

// The meeting: what every new connection to a node reads before it carries
// anything, on the votes' pipe and on go-redis's pool alike, so that the
// node's incarnation, the age of its data and its eviction policy are
// known before it can vote (the incarnation). One sequence, two transports.

// errNotReady fails a connection whose meeting the node could not answer
// for now (BUSY, LOADING, out of memory, an ACL that refuses a read …):
// the node does not vote on it,
// and the next use of the node meets it again.
var errNotReady = errors.New("node could not tell its incarnation or data age for now")

// errEvicts fails a connection to a node whose maxmemory-policy may evict
// keys: a lock key evicted early is a second holder.
var errEvicts = errors.New("node may evict keys (maxmemory-policy is not noeviction): not used for locks")

// exchange sends cmds in one write and returns one reply per command: int64,
// string, nil, []any, or wire.ServerError when the node answered with an
// error. An error return means the connection cannot be used.
type exchange func(ctx context.Context, cmds ...wire.Command) ([]any, error)

// reading is what a meeting's reads found on a node.
type reading struct {
	at       time.Time // when the reads were sent: they say nothing of later
	info     string    // INFO server
	age      dataAge
	birth    int64  // the data's birth, ms on the node's clock
	ledger   string // the node's operator ledger when its data were marked
	calls    int64  // every call the node had counted (databirth.Ledger)
	seeded   string // the data the node's counters were re-seeded for (seededFor)
	recorded time.Duration
}

func (rd reading) id() string { return redisinfo.Value(rd.info, "run_id") }

// meetingReads names the meeting's reads, for the log.
var meetingReads = []string{"INFO server", "INFO memory", "the data-birth script", "GET seeded marker", "the TTL record script"}

// meetingCommands are the reads, in this order: the seeded marker after the
// data's birth, so that a flush between the two reads as unseeded; the TTL
// record after the seeded marker, so that a re-seed between the two leaves
// a record at least as large as the marker promises. calls and birth are
// the largest total of calls this process read on the node and the birth of
// the data it read it on: a reset of the node's counts that this process saw
// re-marks the node even where the node shows none.
func (n *Node) meetingCommands(calls, birth int64) []wire.Command {
	return []wire.Command{
		{Args: []string{"INFO", "server"}, Want: wire.Bulk},
		{Args: []string{"INFO", "memory"}, Want: wire.Bulk},
		{Args: wire.Eval(databirth.Script, []string{databirth.Key, databirth.SeenKey},
			strconv.FormatInt(calls, 10), strconv.FormatInt(birth, 10)), Want: wire.Array},
		{Args: []string{"GET", n.cfg.seededKey()}, Want: wire.BulkOrNil},
		{Args: wire.Eval(recordTTL, []string{n.cfg.ttlKey()}, strconv.FormatInt(n.cfg.TTL.Milliseconds(), 10)), Want: wire.Integer},
	}
}

// meet meets the node on a new connection and returns the tag every reply
// on it carries: its incarnation and the data's birth it met (connTag).
// votes says the connection is the votes' pipe, whose replies come in the
// order they were read on the node: only its readings move the largest
// total of calls seen (incarnation.seen).
func (n *Node) meet(ctx context.Context, ex exchange, votes bool) (string, error) {
	if !n.cfg.RestartAware {
		return "", nil // nothing to read: every vote counts
	}
	at := time.Now()
	calls, birth := n.inc.seenCalls()
	replies, err := ex(ctx, n.meetingCommands(calls, birth)...)
	if err != nil {
		return "", err
	}
	if s, ok := replies[0].(string); ok && redisinfo.Value(s, "redis_mode") == "sentinel" {
		// A failover client's connections to its sentinels: not the node.
		return "", nil
	}
	rd, err := n.read(at, replies)
	if errors.Is(err, errEvicts) && n.inc.firstEviction() {
		n.cfg.Logger.Error("redis node may evict keys, lock keys included: it does not vote until its maxmemory-policy is noeviction",
			"node", n.addr, "err", err)
	}
	if err != nil {
		return "", err
	}
	if err := n.record(rd, votes); err != nil {
		return "", err
	}
	return connTag(rd.id(), rd.birth, rd.ledger), nil
}

// read judges the meeting's replies. Any error reply fails the connection
// (fail closed): a node that will not tell its incarnation, its data's age
// or its ledger — BUSY, LOADING, or an ACL that took a command away, which
// may be given back later — does not vote on it, and the next use of the
// node meets it again.
func (n *Node) read(at time.Time, replies []any) (reading, error) {
	rd := reading{at: at}
	for i, v := range replies {
		if se, ok := v.(wire.ServerError); ok {
			return rd, fmt.Errorf("%w: %s: %w", errNotReady, meetingReads[i], se)
		}
	}
	rd.info, _ = replies[0].(string)
	if rd.id() == "" {
		return rd, fmt.Errorf("%w: INFO server names no run_id", errNotReady)
	}
	memory, _ := replies[1].(string)
	if p := redisinfo.Value(memory, "maxmemory_policy"); p != "" && p != "noeviction" {
		return rd, fmt.Errorf("%w: %s", errEvicts, p)
	}
	born, _ := replies[2].([]any)
	if len(born) != 4 {
		return rd, fmt.Errorf("%w: the data-birth script answered %v", errNotReady, replies[2])
	}
	rd.birth, _ = born[0].(int64)
	now, _ := born[1].(int64)
	rd.ledger, _ = born[2].(string)
	rd.calls, _ = born[3].(int64)
	rd.age = dataAge{d: time.Duration(now-rd.birth) * time.Millisecond}
	rd.seeded, _ = replies[3].(string)
	recorded, _ := replies[4].(int64)
	rd.recorded = time.Duration(recorded) * time.Millisecond
	return rd, nil
}

// pipeExchange is the meeting's transport on a votes' connection: it
// authenticates and selects the database in the meeting's first write.
func pipeExchange(nc net.Conn, r *bufio.Reader, o *redis.Options) exchange {
	var first []wire.Command
	if o.Password != "" {
		auth := []string{"AUTH", o.Password}
		if o.Username != "" {
			auth = []string{"AUTH", o.Username, o.Password}
		}
		first = append(first, wire.Command{Args: auth, Want: wire.Bulk})
	}
	if o.DB != 0 {
		first = append(first, wire.Command{Args: []string{"SELECT", strconv.Itoa(o.DB)}, Want: wire.Bulk})
	}
	return func(ctx context.Context, cmds ...wire.Command) ([]any, error) {
		pre := first
		first = nil
		replies, err := wire.Exchange(ctx, nc, r, append(pre, cmds...)...)
		if err != nil {
			return nil, err
		}
		for _, v := range replies[:len(pre)] {
			if se, ok := v.(wire.ServerError); ok {
				return nil, se
			}
		}
		return replies[len(pre):], nil
	}
}

// poolExchange is the meeting's transport on a go-redis connection, which
// has authenticated already.
func poolExchange(cn *redis.Conn) exchange {
	return func(ctx context.Context, cmds ...wire.Command) ([]any, error) {
		sent := make([]*redis.Cmd, len(cmds))
		_, _ = cn.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range cmds {
				args := make([]any, len(c.Args))
				for j, a := range c.Args {
					args[j] = a
				}
				sent[i] = p.Do(ctx, args...)
			}
			return nil
		})
		out := make([]any, len(cmds))
		for i, c := range sent {
			v, err := c.Result()
			var re redis.Error
			switch {
			case errors.Is(err, redis.Nil):
			case err == nil:
				out[i] = v
			case errors.As(err, &re):
				out[i] = wire.ServerError(re.Error())
			default:
				return nil, err
			}
		}
		return out, nil
	}
}
