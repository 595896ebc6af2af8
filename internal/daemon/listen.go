package daemon

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/verdictgate/verdict/internal/confx"
)

// A BindError is an address a daemon could not listen on, with the config key that set it and
// what to do about the usual causes.
type BindError struct {
	Key  string // the config key, e.g. listen or debug_listen
	Addr string
	Err  error // from net.Listen
}

func (e *BindError) Error() string {
	msg := fmt.Sprintf("%s %q cannot be bound: %v", e.Key, e.Addr, e.Err)
	switch {
	case errors.Is(e.Err, syscall.EADDRINUSE):
		msg += "; another process listens there (ss -ltnp shows which): stop it, or set " + e.Key + " to a free port"
	case errors.Is(e.Err, syscall.EACCES):
		msg += "; a port below 1024 needs root or CAP_NET_BIND_SERVICE: grant the capability, or set " + e.Key + " to a port from 1024 up"
	case errors.Is(e.Err, syscall.EADDRNOTAVAIL):
		msg += "; no interface of this host has that address: set " + e.Key + " to one of its own addresses"
	}
	return msg
}

func (e *BindError) Unwrap() error { return e.Err }

// Listen binds addr, the value of key in the config file at config (the file the daemon was
// started with). An address that cannot be bound is a *BindError placed at the key's file,
// line and column, as a config problem is: "verdictd.yaml:2:9: listen "0.0.0.0:80" cannot be
// bound: ...". It unwraps to net.Listen's error, so errors.Is(err, syscall.EADDRINUSE) holds.
func Listen(config, key, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, confx.Locate(config, confx.Place(key, &BindError{Key: key, Addr: addr, Err: err}))
	}
	return ln, nil
}
