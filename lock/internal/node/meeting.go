package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
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
// for now (BUSY, LOADING, out of memory …): the node does not vote on it,
// and the next use of the node meets it again.
var errNotReady = errors.New("node could not tell its incarnation or data age for now")

// errEvicts fails a connection to a node whose maxmemory-policy may evict
// keys: a lock key evicted early is a second holder.
var errEvicts = errors.New("node may evict keys (maxmemory-policy is not noeviction): not used for locks")

// errTakenAway fails a connection to a node that refuses for good what a
// meeting read on it before (an ACL changed, or a command renamed): the
// node does not vote blind where it could be checked once.
var errTakenAway = errors.New("node refuses what restart awareness read on it before: not used for locks until it answers again")

// exchange sends cmds in one write and returns one reply per command: int64,
// string, nil, []any, or wire.ServerError when the node answered with an
// error. An error return means the connection cannot be used.
type exchange func(ctx context.Context, cmds ...wire.Command) ([]any, error)

// reading is what a meeting's reads found on a node.
type reading struct {
	at       time.Time // when the reads were sent: they say nothing of later
	info     string    // INFO server; "" if refused
	age      dataAge
	birth    int64  // the data's birth, ms on the node's clock
	ledger   string // the node's operator ledger when its data were marked
	seeded   string // the run_id the node's counters were re-seeded for
	recorded time.Duration
	refused  []string // what the node refuses for good to tell
}

func (rd reading) id() string { return redisinfo.Value(rd.info, "run_id") }

// meetingReads names the meeting's reads, for the log.
var meetingReads = []string{"INFO server", "INFO memory", "the data-birth script", "GET seeded marker", "the TTL record script"}

// meetingCommands are the reads, in this order: the seeded marker after the
// data's birth, so that a flush between the two reads as unseeded; the TTL
// record after the seeded marker, so that a re-seed between the two leaves
// a record at least as large as the marker promises.
func (n *Node) meetingCommands() []wire.Command {
	return []wire.Command{
		{Args: []string{"INFO", "server"}, Want: wire.Bulk},
		{Args: []string{"INFO", "memory"}, Want: wire.Bulk},
		{Args: wire.Eval(databirth.Script, []string{databirth.Key}), Want: wire.Array},
		{Args: []string{"GET", n.cfg.seededKey()}, Want: wire.BulkOrNil},
		{Args: wire.Eval(recordTTL, []string{n.cfg.ttlKey()}, strconv.FormatInt(n.cfg.TTL.Milliseconds(), 10)), Want: wire.Integer},
	}
}

// meet meets the node on a new connection and returns the tag every reply
// on it carries: its incarnation and the data's birth it met (connTag).
func (n *Node) meet(ctx context.Context, ex exchange) (string, error) {
	at := time.Now()
	replies, err := ex(ctx, n.meetingCommands()...)
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
	if err := n.record(rd); err != nil {
		return "", err
	}
	if len(rd.refused) == 0 && rd.age.known && rd.id() != "" {
		n.told.Store(true)
	}
	return connTag(rd.id(), rd.birth, rd.ledger, rd.age.known), nil
}

// read judges the meeting's replies. An error reply fails the connection
// (fail closed) unless the node refuses that command for good and always
// has to this process, which is noted in refused and logged once by meet.
func (n *Node) read(at time.Time, replies []any) (reading, error) {
	rd := reading{at: at}
	for i, v := range replies {
		se, ok := v.(wire.ServerError)
		if !ok {
			continue
		}
		if !refusedForGood(se) {
			return rd, fmt.Errorf("%w: %w", errNotReady, se)
		}
		if n.told.Load() {
			return rd, fmt.Errorf("%w: %s: %w", errTakenAway, meetingReads[i], se)
		}
		rd.refused = append(rd.refused, fmt.Sprintf("%s: %s", meetingReads[i], se))
		replies[i] = nil
	}
	rd.info, _ = replies[0].(string)
	memory, _ := replies[1].(string)
	if p := redisinfo.Value(memory, "maxmemory_policy"); p != "" && p != "noeviction" {
		return rd, fmt.Errorf("%w: %s", errEvicts, p)
	}
	if born, _ := replies[2].([]any); len(born) == 3 {
		rd.birth, _ = born[0].(int64)
		now, _ := born[1].(int64)
		rd.ledger, _ = born[2].(string)
		rd.age = dataAge{d: time.Duration(now-rd.birth) * time.Millisecond, known: true}
	}
	rd.seeded, _ = replies[3].(string)
	recorded, _ := replies[4].(int64)
	rd.recorded = time.Duration(recorded) * time.Millisecond
	return rd, nil
}

// refusedForGood says whether an error reply will be the same on every
// connection: the user may not run the command (ACL), or the server has no
// such command or section (renamed, or not a full Redis). Anything else —
// BUSY, LOADING, OOM, READONLY, MASTERDOWN — may pass.
func refusedForGood(se wire.ServerError) bool {
	s := string(se)
	for _, permanent := range []string{"NOPERM", "no permissions", "unknown command", "unknown subcommand", "not supported"} {
		if strings.Contains(s, permanent) {
			return true
		}
	}
	return false
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
