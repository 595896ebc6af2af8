// Package loopback owns one question several checks ask: does a host name this machine? Plain
// http, a debug listener or an admin token sent in clear is acceptable only where nothing
// leaves the host.
package loopback

import (
	"errors"
	"fmt"
	"net"
	"net/url"
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

// ErrPlain is SecureURL's refusal of a URL that is neither https nor http on a loopback host.
var ErrPlain = errors.New("must be an https URL (http only on a loopback host)")

// SecureURL accepts an absolute https URL, or http on a loopback host, with a host and no user
// or fragment: a URL a token, a client secret or a user's credential may be sent to, or keys
// fetched from. A refused scheme is ErrPlain, which a caller may wrap with what it sends there.
func SecureURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("is required")
	case err != nil:
		return fmt.Errorf("%q: %v", s, err)
	case u.Host == "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q must have a host and no user or fragment", s)
	case u.Scheme == "https", u.Scheme == "http" && Host(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q %w", s, ErrPlain)
}
