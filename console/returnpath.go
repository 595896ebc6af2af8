package console

import (
	"net/url"
	"strings"
)

// maxReturnPath bounds the path a sign-in returns to.
const maxReturnPath = 2048

// safeReturn returns p when it is a same-origin path this console serves pages at, and "/"
// otherwise, so that no link can make the sign-in send a browser elsewhere (an open redirect):
// p must be a relative reference starting with one "/", with no scheme, no authority, no
// backslash (which browsers read as a slash), no space and no control character.
func safeReturn(p string) string {
	if p == "" || len(p) > maxReturnPath || p[0] != '/' || strings.HasPrefix(p, "//") {
		return "/"
	}
	for _, r := range p {
		if r == '\\' || r <= 0x20 || r == 0x7f {
			return "/"
		}
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" {
		return "/"
	}
	switch u.Path {
	case "/login", "/callback", "/logout":
		return "/" // signing in to sign in again, or out, is not a destination
	}
	// p itself, never a re-encoding of it: decoding and encoding again can turn "/%2F x" into
	// "//%20x", a path that a browser reads as another host.
	return p
}
