//go:build !linux

package wire

import "net"

// unread cannot tell the bytes waiting in a socket here: 0.
func unread(net.Conn) int { return 0 }
