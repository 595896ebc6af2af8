package upstreamauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/identity"
)

// A document is what a crafted server answers at one path; {base} in the body stands for the
// server's own URL.
type document struct {
	status int // 200 when 0
	ctype  string
	body   string
	header map[string]string
}

// docServer serves docs by path, records the paths asked, and answers 404 elsewhere.
type docServer struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string
}

func newDocServer(t *testing.T, tlsServer bool, docs map[string]document) *docServer {
	t.Helper()
	d := &docServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.asked = append(d.asked, r.URL.Path)
		d.mu.Unlock()
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		for k, v := range doc.header {
			w.Header().Set(k, strings.ReplaceAll(v, "{base}", d.URL))
		}
		w.Header().Set("Content-Type", cmpOr(doc.ctype, "application/json"))
		w.WriteHeader(cmpOr(doc.status, http.StatusOK))
		w.Write([]byte(strings.ReplaceAll(doc.body, "{base}", d.URL)))
	})
	if tlsServer {
		d.Server = httptest.NewTLSServer(h)
	} else {
		d.Server = httptest.NewServer(h)
	}
	t.Cleanup(d.Close)
	return d
}

func cmpOr[T comparable](v, or T) T {
	var zero T
	if v == zero {
		return or
	}
	return v
}

func (d *docServer) paths() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.asked)
}

// noRequests is an HTTP client that fails the test on any request: what is refused before
// anything is sent must not reach the network.
func noRequests(t *testing.T) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("a request was sent: %s %s", r.Method, r.URL)
		return nil, errors.New("no requests")
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// asMetadata is an authorization server's metadata document; {base} is its server's URL.
func asMetadata(issuer string, extra ...string) string {
	fields := append([]string{
		`"issuer":"` + issuer + `"`,
		`"authorization_endpoint":"{base}/authorize"`,
		`"token_endpoint":"{base}/token"`,
		`"response_types_supported":["code"]`,
		`"code_challenge_methods_supported":["S256"]`,
	}, extra...)
	return "{" + strings.Join(fields, ",") + "}"
}

// TestDiscoverServer: the example provider (OpenID discovery, after RFC 8414's location
// answers 404), RFC 8414's location with a path, the OpenID locations with a path, and every
// refusal, each at the first usable location.
func TestDiscoverServer(t *testing.T) {
	ctx := t.Context()
	t.Run("the example provider", func(t *testing.T) {
		o := startOP(t)
		s, err := DiscoverServer(ctx, nil, o.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		if s.Issuer != o.Issuer || s.TokenEndpoint != o.Metadata.TokenEndpoint || s.AuthorizationEndpoint != o.Metadata.AuthorizationEndpoint ||
			s.RevocationEndpoint != o.Metadata.RevocationEndpoint || !slices.Contains(s.CodeChallengeMethodsSupported, "S256") {
			t.Errorf("DiscoverServer = %+v, want the provider's metadata", s)
		}
	})

	const wk, oidc = "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"
	for _, tc := range []struct {
		name   string
		tls    bool
		path   string // the issuer's path
		docs   map[string]document
		want   error  // nil: found
		asked  string // the last path asked, when found
		issuer string // the issuer the document names, {base} replaced; default the one asked for
	}{
		{name: "RFC 8414 with a path", path: "/tenant", docs: map[string]document{wk + "/tenant": {body: asMetadata("{base}/tenant")}}, asked: wk + "/tenant"},
		{name: "OpenID with the path inserted", path: "/tenant", docs: map[string]document{oidc + "/tenant": {body: asMetadata("{base}/tenant")}}, asked: oidc + "/tenant"},
		{name: "OpenID with the path appended", path: "/tenant", docs: map[string]document{"/tenant" + oidc: {body: asMetadata("{base}/tenant")}}, asked: "/tenant" + oidc},
		{name: "RFC 8414 first", docs: map[string]document{wk: {body: asMetadata("{base}")}, oidc: {body: asMetadata("{base}/other")}}, asked: wk},
		{name: "after a 403", docs: map[string]document{wk: {status: 403}, oidc: {body: asMetadata("{base}")}}, asked: oidc},
		{name: "over https", tls: true, docs: map[string]document{wk: {body: asMetadata("{base}")}}, asked: wk},

		{name: "nowhere", path: "/tenant", docs: nil, want: ErrNotFound},
		{name: "another issuer", docs: map[string]document{wk: {body: asMetadata("{base}/other")}}, want: ErrIssuerMismatch},
		{name: "another issuer at the first location, the right one after", docs: map[string]document{wk: {body: asMetadata("https://as.example.com")}, oidc: {body: asMetadata("{base}")}}, want: ErrIssuerMismatch},
		{name: "the issuer named twice", docs: map[string]document{wk: {body: strings.Replace(asMetadata("https://as.example.com"), "{", `{"issuer":"{base}",`, 1)}}, want: ErrMetadata},
		{name: "no PKCE methods", docs: map[string]document{wk: {body: strings.Replace(asMetadata("{base}"), `"code_challenge_methods_supported":["S256"]`, `"grant_types_supported":["authorization_code"]`, 1)}}, want: ErrNoPKCE},
		{name: "plain PKCE only", docs: map[string]document{wk: {body: strings.Replace(asMetadata("{base}"), `["S256"]`, `["plain"]`, 1)}}, want: ErrNoPKCE},
		{name: "s256 in lower case", docs: map[string]document{wk: {body: strings.Replace(asMetadata("{base}"), `["S256"]`, `["s256"]`, 1)}}, want: ErrNoPKCE},
		{name: "no code response type", docs: map[string]document{wk: {body: strings.Replace(asMetadata("{base}"), `["code"]`, `["token"]`, 1)}}, want: ErrMetadata},
		{name: "no authorization_code grant", docs: map[string]document{wk: {body: asMetadata("{base}", `"grant_types_supported":["client_credentials"]`)}}, want: ErrMetadata},
		{name: "no token endpoint", docs: map[string]document{wk: {body: strings.Replace(asMetadata("{base}"), `"token_endpoint":"{base}/token",`, "", 1)}}, want: ErrMetadata},
		{name: "a plain http token endpoint off loopback", docs: map[string]document{wk: {body: strings.Replace(asMetadata("{base}"), `"{base}/token"`, `"http://as.example.com/token"`, 1)}}, want: ErrInsecureURL},
		{name: "a plain http revocation endpoint off loopback", docs: map[string]document{wk: {body: asMetadata("{base}", `"revocation_endpoint":"http://as.example.com/revoke"`)}}, want: ErrInsecureURL},
		{name: "a registration endpoint with a user", docs: map[string]document{wk: {body: asMetadata("{base}", `"registration_endpoint":"https://u:p@as.example.com/register"`)}}, want: ErrInsecureURL},
		{name: "an https server's plain http endpoint on loopback", tls: true, docs: map[string]document{wk: {body: strings.Replace(asMetadata("{base}"), `"{base}/token"`, `"http://127.0.0.1:9/token"`, 1)}}, want: ErrInsecureURL},
		{name: "an answer of 500", docs: map[string]document{wk: {status: 500}, oidc: {body: asMetadata("{base}")}}, want: ErrMetadata},
		{name: "a redirect", docs: map[string]document{wk: {status: 302, header: map[string]string{"Location": "{base}/elsewhere"}}, "/elsewhere": {body: asMetadata("{base}")}}, want: ErrMetadata},
		{name: "not JSON", docs: map[string]document{wk: {ctype: "text/html", body: asMetadata("{base}")}}, want: ErrMetadata},
		{name: "malformed JSON", docs: map[string]document{wk: {body: `{"issuer":`}}, want: ErrMetadata},
		{name: "too long", docs: map[string]document{wk: {body: asMetadata("{base}", `"x":"`+strings.Repeat("x", maxDocument)+`"`)}}, want: ErrMetadata},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDocServer(t, tc.tls, tc.docs)
			var hc *http.Client
			if tc.tls {
				hc = d.Client()
			}
			issuer := d.URL + tc.path
			s, err := DiscoverServer(ctx, hc, issuer)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || s != nil {
					t.Errorf("DiscoverServer = %v, %v; want %v", s, err, tc.want)
				}
				if slices.Contains(d.paths(), "/elsewhere") {
					t.Error("a redirect was followed")
				}
				return
			}
			if err != nil {
				t.Fatalf("DiscoverServer: %v (asked %v)", err, d.paths())
			}
			if p := d.paths(); s.Issuer != issuer || s.TokenEndpoint != d.URL+"/token" || p[len(p)-1] != tc.asked {
				t.Errorf("DiscoverServer = %+v, asked %v; want issuer %s found at %s", s, p, issuer, tc.asked)
			}
		})
	}

	for _, issuer := range []string{"http://as.example.com", "ftp://as.example.com", "https://u:p@as.example.com", "https://as.example.com/#f", "/relative", ""} {
		t.Run("refused issuer "+issuer, func(t *testing.T) {
			if _, err := DiscoverServer(ctx, noRequests(t), issuer); !errors.Is(err, ErrInsecureURL) {
				t.Errorf("DiscoverServer(%q): %v, want ErrInsecureURL", issuer, err)
			}
		})
	}
	if _, err := DiscoverServer(ctx, noRequests(t), "https://as.example.com/?tenant=1"); !errors.Is(err, ErrInvalid) {
		t.Errorf("an issuer with a query: %v, want ErrInvalid", err)
	}
}

// TestDiscoverResource: the resource's metadata as the project's resource server serves it
// (identity.ResourceMetadata), at the path-inserted location or the root, and every refusal.
func TestDiscoverResource(t *testing.T) {
	ctx := t.Context()
	const at, root = identity.WellKnownPath + "/mcp", identity.WellKnownPath
	served := func(path string, m identity.ResourceMetadata) func(*httptest.Server) http.Handler {
		return func(s *httptest.Server) http.Handler {
			mux := http.NewServeMux()
			mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
				m := m
				m.Resource = strings.ReplaceAll(m.Resource, "{base}", s.URL)
				m.ServeHTTP(w, r)
			})
			return mux
		}
	}
	as := []string{"https://as.example.com"}
	for _, tc := range []struct {
		name    string
		handler func(*httptest.Server) http.Handler
		want    error
	}{
		{"at the path", served(at, identity.ResourceMetadata{Resource: "{base}/mcp", AuthorizationServers: as}), nil},
		{"at the root", served(root, identity.ResourceMetadata{Resource: "{base}/mcp", AuthorizationServers: as, BearerMethodsSupported: []string{"header"}}), nil},
		{"another resource", served(at, identity.ResourceMetadata{Resource: "{base}/other", AuthorizationServers: as}), ErrResourceMismatch},
		{"the root's own resource", served(root, identity.ResourceMetadata{Resource: "{base}", AuthorizationServers: as}), ErrResourceMismatch},
		{"the resource with a slash", served(at, identity.ResourceMetadata{Resource: "{base}/mcp/", AuthorizationServers: as}), ErrResourceMismatch},
		{"no authorization server", served(at, identity.ResourceMetadata{Resource: "{base}/mcp"}), ErrMetadata},
		{"a plain http authorization server off loopback", served(at, identity.ResourceMetadata{Resource: "{base}/mcp", AuthorizationServers: []string{"http://as.example.com"}}), ErrInsecureURL},
		{"tokens not in the header", served(at, identity.ResourceMetadata{Resource: "{base}/mcp", AuthorizationServers: as, BearerMethodsSupported: []string{"body"}}), ErrMetadata},
		{"nowhere", served("/elsewhere", identity.ResourceMetadata{}), ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewUnstartedServer(nil)
			s.Config.Handler = tc.handler(s)
			s.Start()
			t.Cleanup(s.Close)
			checkDiscovered(t, s, as, tc.want)
		})
	}

	t.Run("an https resource's plain http server on loopback", func(t *testing.T) {
		s := httptest.NewUnstartedServer(nil)
		s.Config.Handler = served(at, identity.ResourceMetadata{Resource: "{base}/mcp", AuthorizationServers: []string{"http://127.0.0.1:9"}})(s)
		s.StartTLS()
		t.Cleanup(s.Close)
		if _, err := DiscoverResource(ctx, s.Client(), s.URL+"/mcp"); !errors.Is(err, ErrInsecureURL) {
			t.Errorf("DiscoverResource: %v, want ErrInsecureURL", err)
		}
		// And a resource_metadata URL of plain http for an https resource.
		if _, err := FetchResource(ctx, noRequests(t), s.URL+"/mcp", "http://127.0.0.1:9"+at); !errors.Is(err, ErrInsecureURL) {
			t.Errorf("FetchResource: %v, want ErrInsecureURL", err)
		}
	})
	for _, resource := range []string{"http://files.example.com/mcp", "https://files.example.com/mcp#f", "mcp"} {
		t.Run("refused resource "+resource, func(t *testing.T) {
			if _, err := DiscoverResource(ctx, noRequests(t), resource); !errors.Is(err, ErrInsecureURL) {
				t.Errorf("DiscoverResource(%q): %v, want ErrInsecureURL", resource, err)
			}
		})
	}
}

// checkDiscovered discovers the resource s serves at /mcp and holds the answer to want: the
// error it wraps, or, when nil, the resource's own metadata naming as.
func checkDiscovered(t *testing.T, s *httptest.Server, as []string, want error) {
	t.Helper()
	m, err := DiscoverResource(t.Context(), nil, s.URL+"/mcp")
	if want != nil {
		if !errors.Is(err, want) || m != nil {
			t.Errorf("DiscoverResource = %v, %v; want %v", m, err, want)
		}
		return
	}
	if err != nil || m.Resource != s.URL+"/mcp" || !slices.Equal(m.AuthorizationServers, as) {
		t.Errorf("DiscoverResource = %+v, %v", m, err)
	}
}

// TestDiscoverResourceFromChallenge: a server whose 401 names its metadata in a Bearer
// challenge has it read there first, wherever that is; the well-known locations serve when the
// challenge names none or nothing is at the URL it names; and what the challenge names is held
// to the same rules as any document.
func TestDiscoverResourceFromChallenge(t *testing.T) {
	as := []string{"https://as.example.com"}
	const elsewhere, wellKnown = "/meta/files", identity.WellKnownPath + "/mcp"
	for _, tc := range []struct {
		name      string
		challenge string // {base} is the server's URL
		docs      map[string]string
		want      error
	}{
		{"named", `Bearer resource_metadata="{base}` + elsewhere + `", scope="files:read"`, map[string]string{elsewhere: "{base}/mcp"}, nil},
		{"named among other challenges", `Basic realm="x", Bearer error="invalid_token", resource_metadata="{base}` + elsewhere + `"`, map[string]string{elsewhere: "{base}/mcp"}, nil},
		{"named, nothing there, well known", `Bearer resource_metadata="{base}/missing"`, map[string]string{wellKnown: "{base}/mcp"}, nil},
		{"none named, well known", `Bearer realm="files"`, map[string]string{wellKnown: "{base}/mcp"}, nil},
		{"named for another resource", `Bearer resource_metadata="{base}` + elsewhere + `"`, map[string]string{elsewhere: "{base}/other", wellKnown: "{base}/mcp"}, ErrResourceMismatch},
		{"named off loopback in plain http", `Bearer resource_metadata="http://meta.example.com/files"`, map[string]string{wellKnown: "{base}/mcp"}, ErrInsecureURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewUnstartedServer(nil)
			mux := http.NewServeMux()
			mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("the probe carried a credential")
				}
				w.Header().Set("WWW-Authenticate", strings.ReplaceAll(tc.challenge, "{base}", s.URL))
				w.WriteHeader(http.StatusUnauthorized)
			})
			for path, resource := range tc.docs {
				mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
					m := identity.ResourceMetadata{Resource: strings.ReplaceAll(resource, "{base}", s.URL), AuthorizationServers: as}
					m.ServeHTTP(w, r)
				})
			}
			s.Config.Handler = mux
			s.Start()
			t.Cleanup(s.Close)
			checkDiscovered(t, s, as, tc.want)
		})
	}
}

// TestResourceMetadataURL reads the challenges of 401s: the project's own resource server's,
// and headers as RFC 9110 and RFC 9728 allow them.
func TestResourceMetadataURL(t *testing.T) {
	rec := httptest.NewRecorder()
	identity.WriteError(rec, "https://files.example.com/.well-known/oauth-protected-resource/mcp", &identity.Error{Reason: identity.TokenExpired}, "files:read", "files:write")
	const meta = "https://files.example.com/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name, header string
		url, scope   string
		want         error
	}{
		{"the project's resource server", rec.Header().Get("WWW-Authenticate"), meta, "files:read files:write", nil},
		{"alone", `Bearer resource_metadata="` + meta + `"`, meta, "", nil},
		{"a token value", `Bearer resource_metadata=x, scope=files`, "", "", ErrInsecureURL},
		{"scheme in other case, spaces around =", `bearer   Resource_Metadata = "` + meta + `" ,scope="a b"`, meta, "a b", nil},
		{"after another challenge", `Basic realm="x", Bearer realm="y", resource_metadata="` + meta + `"`, meta, "", nil},
		{"before another challenge", `Bearer resource_metadata="` + meta + `", Basic realm="x"`, meta, "", nil},
		{"after a token68 challenge", `Negotiate abc+/==, Bearer resource_metadata="` + meta + `"`, meta, "", nil},
		{"empty list elements", `, ,Bearer resource_metadata="` + meta + `",,scope="s",`, meta, "s", nil},
		{"escaped characters", `Bearer resource_metadata="https://files.example.com/a\"b", scope="x\\y"`, `https://files.example.com/a"b`, `x\y`, nil},
		{"another scheme's parameter", `Basic resource_metadata="` + meta + `"`, "", "", ErrNoResourceMetadata},
		{"no parameter", `Bearer realm="x", error="invalid_token"`, "", "", ErrNoResourceMetadata},
		{"empty", ``, "", "", ErrNoResourceMetadata},
		{"named twice", `Bearer resource_metadata="` + meta + `", resource_metadata="https://evil.example.com/m"`, "", "", ErrNoResourceMetadata},
		{"named twice in other case", `Bearer resource_metadata="` + meta + `", RESOURCE_METADATA="https://evil.example.com/m"`, "", "", ErrNoResourceMetadata},
		{"unclosed quote", `Bearer resource_metadata="` + meta, "", "", ErrNoResourceMetadata},
		{"a control character", "Bearer resource_metadata=\"" + meta + "\x00\"", "", "", ErrNoResourceMetadata},
		{"no comma between parameters", `Bearer a="1" resource_metadata="` + meta + `"`, "", "", ErrNoResourceMetadata},
		{"plain http off loopback", `Bearer resource_metadata="http://files.example.com/m"`, "", "", ErrInsecureURL},
		{"plain http on loopback", `Bearer resource_metadata="http://127.0.0.1:9/m"`, "http://127.0.0.1:9/m", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, scope, err := ResourceMetadataURL(tc.header)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || u != "" {
					t.Errorf("ResourceMetadataURL(%q) = %q, %q, %v; want %v", tc.header, u, scope, err, tc.want)
				}
				return
			}
			if err != nil || u != tc.url || scope != tc.scope {
				t.Errorf("ResourceMetadataURL(%q) = %q, %q, %v; want %q, %q", tc.header, u, scope, err, tc.url, tc.scope)
			}
		})
	}
}
