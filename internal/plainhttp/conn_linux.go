package plainhttp

import (
	"errors"
	"net"
	"syscall"
)

// canCheckConns: ConnOpen tells a connection the server closed.
const canCheckConns = true

// ConnOpen reports whether a kept-alive connection is still open and has
// nothing to read, as the Transport's reader of an idle connection would
// have it: a connection the server closed (or sent anything on) is not
// used again.
func ConnOpen(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && open
}
