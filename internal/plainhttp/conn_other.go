//go:build !linux

package plainhttp

import "net"

// canCheckConns: ConnOpen cannot tell a connection the server closed here,
// so plain calls go through the http.Client.
const canCheckConns = false

func ConnOpen(net.Conn) bool { return false }
