package upstreamauth

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceMetadataURL reads a 401's WWW-Authenticate header (RFC 9110 §11.6.1) for the
// resource_metadata parameter of its Bearer challenge (RFC 9728 §5.1), and that challenge's
// scope, if any: the scopes the resource asks for. Several header fields may be joined with
// ", " into one, as RFC 9110 allows. A header without one, or that cannot be read, is
// ErrNoResourceMetadata (the caller then asks the well-known locations, DiscoverResource); a
// metadata URL that is neither https nor http on loopback is ErrInsecureURL. Whether the
// document there is the resource's is FetchResource's to check.
func ResourceMetadataURL(wwwAuthenticate string) (metadataURL, scope string, err error) {
	cs, err := parseChallenges(wwwAuthenticate)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoResourceMetadata, err)
	}
	for _, c := range cs {
		u, ok := c.params["resource_metadata"]
		if c.scheme != "bearer" || !ok {
			continue
		}
		if err := secureURL("resource_metadata", u, ""); err != nil {
			return "", "", err
		}
		return u, c.params["scope"], nil
	}
	return "", "", ErrNoResourceMetadata
}

// A challenge is one challenge of a WWW-Authenticate header: its scheme, in lower case, and
// its auth-params by lower-case name (none for a token68 challenge).
type challenge struct {
	scheme string
	params map[string]string
}

// parseChallenges reads a WWW-Authenticate value: a list of challenges, each an auth-scheme
// followed by a token68 or by a comma-separated list of auth-params (token BWS "=" BWS
// ( token / quoted-string )). The list's commas serve both the challenges and their params:
// a token not followed by "=" starts the next challenge. A parameter named twice in one
// challenge is refused (RFC 9110 §11.2), so no second resource_metadata can hide behind a
// first.
func parseChallenges(h string) ([]challenge, error) {
	p := &scanner{s: h}
	var out []challenge
	for {
		p.skipListSeparators()
		if p.eof() {
			return out, nil
		}
		scheme := p.token()
		if scheme == "" {
			return nil, p.fail("an auth-scheme")
		}
		c := challenge{scheme: strings.ToLower(scheme), params: map[string]string{}}
		if !p.eof() && !p.at(',') {
			if !p.skipSpaces() {
				return nil, p.fail("a space after the auth-scheme")
			}
			if !p.token68() {
				if err := p.params(c.params); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, c)
	}
}

// scanner walks a header value.
type scanner struct {
	s string
	i int
}

func (p *scanner) eof() bool      { return p.i >= len(p.s) }
func (p *scanner) at(b byte) bool { return p.i < len(p.s) && p.s[p.i] == b }
func (p *scanner) fail(want string) error {
	return fmt.Errorf("malformed WWW-Authenticate: want %s at offset %d", want, p.i)
}

// skipSpaces skips OWS and reports whether there was any.
func (p *scanner) skipSpaces() bool {
	start := p.i
	for p.at(' ') || p.at('\t') {
		p.i++
	}
	return p.i > start
}

// skipListSeparators skips OWS and commas: a list may have empty elements (RFC 9110 §5.6.1).
func (p *scanner) skipListSeparators() {
	for p.at(' ') || p.at('\t') || p.at(',') {
		p.i++
	}
}

// token reads a token (RFC 9110 §5.6.2), "" if none starts here.
func (p *scanner) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func isTchar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// token68 skips a token68 (RFC 9110 §11.2) that is the whole of its challenge, and reports
// whether there was one; otherwise it moves nothing.
func (p *scanner) token68() bool {
	start := p.i
	for p.i < len(p.s) && (isAlnum(p.s[p.i]) || strings.IndexByte("-._~+/", p.s[p.i]) >= 0) {
		p.i++
	}
	if p.i == start {
		return false
	}
	for p.at('=') {
		p.i++
	}
	p.skipSpaces()
	if p.eof() || p.at(',') {
		return true
	}
	p.i = start
	return false
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// params reads a challenge's auth-params into m, up to the token that starts the next
// challenge or the end.
func (p *scanner) params(m map[string]string) error {
	for {
		p.skipSpaces()
		start := p.i
		name := p.token()
		if name == "" {
			return p.fail("an auth-param")
		}
		p.skipSpaces()
		if !p.at('=') {
			p.i = start // the next challenge's scheme
			return nil
		}
		p.i++
		p.skipSpaces()
		var v string
		if p.at('"') {
			var err error
			if v, err = p.quoted(); err != nil {
				return err
			}
		} else if v = p.token(); v == "" {
			return p.fail("a token or a quoted-string")
		}
		key := strings.ToLower(name)
		if _, dup := m[key]; dup {
			return fmt.Errorf("malformed WWW-Authenticate: parameter %.40q twice in one challenge", key)
		}
		m[key] = v
		p.skipSpaces()
		if p.eof() {
			return nil
		}
		if !p.at(',') {
			return p.fail("a comma")
		}
		p.skipListSeparators()
		if p.eof() {
			return nil
		}
	}
}

var errUnterminated = errors.New("malformed WWW-Authenticate: a quoted-string is not closed")

// quoted reads a quoted-string (RFC 9110 §5.6.4) and returns its content.
func (p *scanner) quoted() (string, error) {
	p.i++ // the opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", errUnterminated
			}
			if d := p.s[p.i+1]; !isQuotable(d) {
				return "", p.fail("a quoted-pair")
			}
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		case isQuotable(c):
			b.WriteByte(c)
			p.i++
		default:
			return "", p.fail("qdtext")
		}
	}
	return "", errUnterminated
}

// isQuotable reports whether c may stand in a quoted-string, as itself or escaped: HTAB, SP,
// VCHAR and obs-text; no other control character.
func isQuotable(c byte) bool {
	return c == '\t' || c == ' ' || (c > 0x20 && c != 0x7f)
}
