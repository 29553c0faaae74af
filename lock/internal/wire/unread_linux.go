//go:build linux

package wire

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unread is how many bytes wait in nc's socket receive buffer, not yet
// read by this process (TIOCINQ); 0 when that cannot be told. A TLS
// connection is asked about the connection beneath it: encrypted bytes
// waiting there are an answer that arrived all the same.
func unread(nc net.Conn) int {
	for {
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n
}
