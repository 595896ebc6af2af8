package upstreamauth

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/verdictgate/verdict/internal/loopback"
)

// quoteParam writes s as an RFC 9110 quoted-string.
func quoteParam(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// quotable reports whether every byte of s may stand in a quoted-string.
func quotable(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isQuotable(s[i]) {
			return false
		}
	}
	return true
}

// FuzzResourceMetadataURL feeds the WWW-Authenticate parser arbitrary headers, and arbitrary
// values written into a header between other challenges: none may panic; a URL it returns is
// one anything may be sent to; and a resource_metadata and scope
// written as RFC 9110 quoted-strings, after a challenge of another scheme and before another,
// read back as written.
func FuzzResourceMetadataURL(f *testing.F) {
	for _, seed := range []struct{ header, u, scope string }{
		{`Bearer resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp", scope="a b"`, "https://files.example.com/m", "a b"},
		{`Basic realm="x", Bearer realm="y", error="invalid_token", resource_metadata="http://127.0.0.1:9/m"`, `http://127.0.0.1:9/a"b\c`, ""},
		{`Negotiate abc+/==, Bearer resource_metadata=x`, "https://é.example.com/m", "s\tt"},
		{`Bearer a="1" resource_metadata="https://x.example.com"`, "http://files.example.com/m", `"`},
		{`, ,Bearer resource_metadata="https://x.example.com/m",,`, "https://x.example.com/m#f", "x\x00y"},
		{"Bearer resource_metadata=\"\\", "", "\x7f"},
	} {
		f.Add(seed.header, seed.u, seed.scope)
	}
	f.Fuzz(func(t *testing.T, header, u, scope string) {
		got, _, err := ResourceMetadataURL(header)
		if err == nil {
			if loopback.SecureURL(got) != nil {
				t.Fatalf("ResourceMetadataURL(%q) = %q, not a URL anything may be sent to", header, got)
			}
		} else if !errors.Is(err, ErrNoResourceMetadata) && !errors.Is(err, ErrInsecureURL) {
			t.Fatalf("ResourceMetadataURL(%q): %v, want ErrNoResourceMetadata or ErrInsecureURL", header, err)
		}

		if !quotable(u) || !quotable(scope) {
			return
		}
		written := `Basic realm="x", Bearer error="invalid_token", resource_metadata=` + quoteParam(u) + `, scope=` + quoteParam(scope) + `, Negotiate abc==`
		got, gotScope, err := ResourceMetadataURL(written)
		switch {
		case loopback.SecureURL(u) != nil:
			if !errors.Is(err, ErrInsecureURL) {
				t.Fatalf("ResourceMetadataURL(%q) = %q, %v; want ErrInsecureURL", written, got, err)
			}
		case err != nil || got != u || gotScope != scope:
			t.Fatalf("ResourceMetadataURL(%q) = %q, %q, %v; want %q, %q", written, got, gotScope, err, u, scope)
		}
	})
}

// FuzzDecodeMetadata feeds the decoders of both metadata documents arbitrary bytes: none may
// panic; a document they take is the issuer's or the resource's asked about, names only URLs
// anything may be sent to (and no plain http for an https issuer), lists S256, and decodes
// again as it marshals.
func FuzzDecodeMetadata(f *testing.F) {
	const issuer, resource = "https://as.example.com", "https://files.example.com/mcp"
	for _, seed := range []string{
		`{"issuer":"https://as.example.com","authorization_endpoint":"https://as.example.com/a","token_endpoint":"https://as.example.com/t","code_challenge_methods_supported":["S256"],"response_types_supported":["code"]}`,
		`{"issuer":"https://as.example.com","authorization_endpoint":"https://as.example.com/a","token_endpoint":"http://127.0.0.1/t","code_challenge_methods_supported":["S256"]}`,
		`{"issuer":"https://as.example.com","issuer":"https://evil.example.com"}`,
		`{"Issuer":"https://as.example.com","authorization_endpoint":"https://as.example.com/a","token_endpoint":"https://as.example.com/t","code_challenge_methods_supported":["S256"]}`,
		`{"resource":"https://files.example.com/mcp","authorization_servers":["https://as.example.com"],"bearer_methods_supported":["header"]}`,
		`{"resource":"https://files.example.com/mcp","authorization_servers":["http://as.example.com"]}`,
		`{"resource":"https://files.example.com/mcp","authorization_servers":[]}`,
		"{\"resource\":\"https://files.example.com/mcp\xff\"}",
		`[]`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if s, err := decodeServer(body, issuer); err == nil {
			if s.Issuer != issuer || !slices.Contains(s.CodeChallengeMethodsSupported, "S256") || s.AuthorizationEndpoint == "" || s.TokenEndpoint == "" {
				t.Fatalf("decodeServer(%q) = %+v", body, s)
			}
			for _, u := range []string{s.AuthorizationEndpoint, s.TokenEndpoint, s.RegistrationEndpoint, s.RevocationEndpoint} {
				if u != "" && (loopback.SecureURL(u) != nil || strings.HasPrefix(u, "http:")) {
					t.Fatalf("decodeServer(%q) took the endpoint %q", body, u)
				}
			}
			again, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if s2, err := decodeServer(again, issuer); err != nil || !reflect.DeepEqual(normal(s), normal(s2)) {
				t.Fatalf("decodeServer of %s = %+v, %v; want %+v", again, s2, err, s)
			}
		} else if !anyOf(err, ErrMetadata, ErrIssuerMismatch, ErrNoPKCE, ErrInsecureURL) {
			t.Fatalf("decodeServer(%q): %v, not one of the package's errors", body, err)
		}

		if m, err := decodeResource(body, resource); err == nil {
			if m.Resource != resource || len(m.AuthorizationServers) == 0 {
				t.Fatalf("decodeResource(%q) = %+v", body, m)
			}
			for _, as := range m.AuthorizationServers {
				if loopback.SecureURL(as) != nil || strings.HasPrefix(as, "http:") {
					t.Fatalf("decodeResource(%q) took the authorization server %q", body, as)
				}
			}
			again, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if m2, err := decodeResource(again, resource); err != nil || !reflect.DeepEqual(normal(m), normal(m2)) {
				t.Fatalf("decodeResource of %s = %+v, %v; want %+v", again, m2, err, m)
			}
		} else if !anyOf(err, ErrMetadata, ErrResourceMismatch, ErrInsecureURL) {
			t.Fatalf("decodeResource(%q): %v, not one of the package's errors", body, err)
		}
	})
}

// normal is a copy of the struct *p with its empty lists as nil: omitempty writes neither.
func normal[T any](p *T) T {
	n := *p
	v := reflect.ValueOf(&n).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Len() == 0 {
			f.SetZero()
		}
	}
	return n
}

func anyOf(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
