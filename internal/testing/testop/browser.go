package testop

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
)

// A Browser is a person at a web browser, for the authorization code flows of the tests: it
// follows every redirect wherever it leads, keeps cookies, and signs its user in on the
// provider's login form when it is shown one. A client's authorization URL goes in, and out
// comes the client's callback, or the page a client's callback answered with.
type Browser struct {
	op                 *OP
	username, password string
	client             *http.Client
	// also are the other providers it signs in at, as their users: a flow that passes
	// through several (an identity provider, then a server's own authorization server).
	also []*Browser
	// watch, when set, is handed every answer a Visit gets.
	watch func(Page)
}

// Browser returns a browser whose user is username, with the users' Password.
func (o *OP) Browser(username string) *Browser {
	jar, _ := cookiejar.New(nil) // never fails without options
	return &Browser{
		op: o, username: username, password: Password,
		// Redirects are followed by Visit itself, one step at a time, so that it can stop
		// before a URL and see each page.
		client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

// Also returns a copy of b that signs in at op too, as username, sharing b's cookies.
func (b *Browser) Also(op *OP, username string) *Browser {
	c := *b
	c.also = append(append([]*Browser(nil), b.also...), &Browser{op: op, username: username, password: Password, client: b.client})
	return &c
}

// Watch returns a copy of b that hands fn every answer it gets, redirects and login forms
// included, before it goes on: what a person at the browser could have seen on the way.
func (b *Browser) Watch(fn func(Page)) *Browser {
	c := *b
	c.watch = fn
	return &c
}

// WithPassword returns a copy of b that signs in with password instead.
func (b *Browser) WithPassword(password string) *Browser {
	c := *b
	c.password = password
	return &c
}

// A Page is where a Visit ended: the last URL, and the answer to it. Status is 0, and Header
// and Body are empty, when the visit stopped before requesting URL.
type Page struct {
	URL    *url.URL
	Status int
	Header http.Header
	Body   []byte
}

// Bounds of a Visit: its requests, and what it reads of an answer.
const (
	maxSteps = 20
	maxPage  = 1 << 20
)

// The provider's login form (zitadel/oidc's example login page): where it posts, and the
// authorization request it is for.
var (
	loginAction = regexp.MustCompile(`<form method="POST" action="([^"]+)"`)
	loginID     = regexp.MustCompile(`name="id" value="([^"]*)"`)
)

// Visit requests u and goes on as a browser would: it follows every redirect, and fills in and
// submits the provider's login form as its user. It ends at the first answer that is neither,
// returned as the Page, or before requesting a URL whose scheme, host and path are stop's
// (when stop is not empty), returned unvisited: the redirect URI of a client that nothing
// serves, such as a native app's loopback one. A request that fails, a sign-in the provider
// refuses, or more than 20 requests are an error.
func (b *Browser) Visit(ctx context.Context, u, stop string) (*Page, error) {
	var halt *url.URL
	if stop != "" {
		var err error
		if halt, err = url.Parse(stop); err != nil {
			return nil, fmt.Errorf("browser: stop at %q: %v", stop, err)
		}
	}
	next, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("browser: %q: %v", u, err)
	}
	method, form := http.MethodGet, url.Values(nil)
	signedIn := map[*OP]bool{} // each provider's form is filled in once: a second is a refusal
	for range maxSteps {
		if halt != nil && next.Scheme == halt.Scheme && next.Host == halt.Host && next.Path == halt.Path {
			return &Page{URL: next}, nil
		}
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, next.String(), body)
		if err != nil {
			return nil, fmt.Errorf("browser: %v", err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := b.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("browser: %v", err)
		}
		page, err := io.ReadAll(io.LimitReader(resp.Body, maxPage))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("browser: %s %s: %v", method, next, err)
		}
		if b.watch != nil {
			b.watch(Page{URL: next, Status: resp.StatusCode, Header: resp.Header, Body: page})
		}
		method, form = http.MethodGet, nil
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			loc, err := resp.Location()
			if err != nil {
				return nil, fmt.Errorf("browser: %s %s: %s without a usable Location: %v", req.Method, next, resp.Status, err)
			}
			next = loc
			continue
		}
		as, action, id, ok := b.loginFormOf(next, resp, page)
		switch {
		case ok && signedIn[as.op]:
			return nil, fmt.Errorf("browser: the provider refused the sign-in of %s", as.username)
		case ok:
			next, method, signedIn[as.op] = action, http.MethodPost, true
			form = url.Values{"id": {id}, "username": {as.username}, "password": {as.password}}
			continue
		}
		return &Page{URL: next, Status: resp.StatusCode, Header: resp.Header, Body: page}, nil
	}
	return nil, fmt.Errorf("browser: more than %d requests from %s", maxSteps, u)
}

// loginFormOf is loginForm of b's provider or of one it also signs in at: which one's form the
// page is, as whom to sign in there.
func (b *Browser) loginFormOf(at *url.URL, resp *http.Response, page []byte) (*Browser, *url.URL, string, bool) {
	for _, as := range append([]*Browser{b}, b.also...) {
		if action, id, ok := as.loginForm(at, resp, page); ok {
			return as, action, id, true
		}
	}
	return nil, nil, "", false
}

// loginForm returns where the provider's login form on page posts and the authorization
// request it is for, if page is that form: a page of the provider's own origin.
func (b *Browser) loginForm(at *url.URL, resp *http.Response, page []byte) (*url.URL, string, bool) {
	issuer, err := url.Parse(b.op.Issuer)
	if err != nil || resp.StatusCode != http.StatusOK || at.Scheme != issuer.Scheme || at.Host != issuer.Host {
		return nil, "", false
	}
	a, id := loginAction.FindSubmatch(page), loginID.FindSubmatch(page)
	if a == nil || id == nil {
		return nil, "", false
	}
	action, err := at.Parse(html.UnescapeString(string(a[1])))
	if err != nil {
		return nil, "", false
	}
	return action, html.UnescapeString(string(id[1])), true
}

// Authorize visits authURL, a client's authorization request, and returns the query of the
// provider's redirect to redirectURI, which it does not follow: a code and the state, or an
// error (RFC 6749 §4.1.2).
func (b *Browser) Authorize(ctx context.Context, authURL, redirectURI string) (url.Values, error) {
	p, err := b.Visit(ctx, authURL, redirectURI)
	if err != nil {
		return nil, err
	}
	if p.Status != 0 {
		return nil, fmt.Errorf("browser: the authorization request ended at %s (%d), not at %s:\n%s", p.URL, p.Status, redirectURI, p.Body)
	}
	return p.URL.Query(), nil
}
