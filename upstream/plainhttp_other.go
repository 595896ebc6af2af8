//go:build !linux

package upstream

import "net"

// canCheckConns: connOpen cannot tell a connection the server closed here,
// so plain calls go through the http.Client.
const canCheckConns = false

func connOpen(net.Conn) bool { return false }
