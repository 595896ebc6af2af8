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
// backslash (which browsers read as a slash) and no control character.
func safeReturn(p string) string {
	if p == "" || len(p) > maxReturnPath || p[0] != '/' || strings.HasPrefix(p, "//") {
		return "/"
	}
	for _, r := range p {
		if r == '\\' || r < 0x20 || r == 0x7f {
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
	return u.RequestURI()
}
