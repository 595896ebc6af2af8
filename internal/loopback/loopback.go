// Package loopback owns one question several checks ask: does a host name this machine? Plain
// http, a debug listener or an admin token sent in clear is acceptable only where nothing
// leaves the host.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host (a URL's Hostname or a listen address's host, without port or
// brackets) names this machine: "localhost" in any case, or a loopback IP (127.0.0.0/8, ::1).
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
