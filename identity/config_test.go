package identity

import (
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
)

func TestConfigValidate(t *testing.T) {
	good := func() Issuer {
		return Issuer{Issuer: "https://idp.test", Audience: "https://gateway.test/mcp"}
	}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want []string // substrings of the error, each naming its key; none when valid
	}{
		{"valid", func(c *Config) {}, nil},
		{"loopback http", func(c *Config) { c.Issuers[0].Issuer = "http://127.0.0.1:9998" }, nil},
		{"all set", func(c *Config) {
			c.Issuers[0].PrincipalClaim = "email"
			c.Issuers[0].Algorithms = []string{"ES384", "PS256"}
			c.Issuers[0].MaxSkew = confx.Duration(5 * time.Minute)
			c.Issuers[0].Scopes = []string{"tools:call"}
			c.Issuers[0].Introspection = &Introspection{Endpoint: "https://idp.test/introspect?x=1", ClientID: "gw", ClientSecretFile: "secret"}
		}, nil},
		{"no issuers", func(c *Config) { c.Issuers = nil }, []string{"issuers: at least one"}},
		{"missing issuer", func(c *Config) { c.Issuers[0].Issuer = "" }, []string{"issuers[0].issuer: is required"}},
		{"plain http", func(c *Config) { c.Issuers[0].Issuer = "http://idp.test" }, []string{"issuers[0].issuer", "https"}},
		{"issuer with fragment", func(c *Config) { c.Issuers[0].Issuer = "https://idp.test/#x" }, []string{"issuers[0].issuer", "fragment"}},
		{"issuer with query", func(c *Config) { c.Issuers[0].Issuer = "https://idp.test/?a=b" }, []string{"issuers[0].issuer", "query"}},
		{"twice", func(c *Config) { c.Issuers = append(c.Issuers, c.Issuers[0]) }, []string{"issuers[1].issuer", "twice"}},
		{"no audience", func(c *Config) { c.Issuers[0].Audience = "" }, []string{"issuers[0].audience"}},
		{"relative audience", func(c *Config) { c.Issuers[0].Audience = "gateway" }, []string{"issuers[0].audience", "absolute"}},
		{"alg none", func(c *Config) { c.Issuers[0].Algorithms = []string{"RS256", "none"} }, []string{`issuers[0].algorithms[1]: "none"`}},
		{"alg HS256", func(c *Config) { c.Issuers[0].Algorithms = []string{"HS256"} }, []string{`issuers[0].algorithms[0]: "HS256"`}},
		{"skew too large", func(c *Config) { c.Issuers[0].MaxSkew = confx.Duration(time.Hour) }, []string{"issuers[0].max_skew"}},
		{"token lifetime", func(c *Config) { c.Issuers[0].MaxTokenLifetime = confx.Duration(time.Hour) }, nil},
		{"negative token lifetime", func(c *Config) { c.Issuers[0].MaxTokenLifetime = confx.Duration(-time.Hour) },
			[]string{"issuers[0].max_token_lifetime: -1h0m0s is negative"}},
		{"bad scope", func(c *Config) { c.Issuers[0].Scopes = []string{"a b"} }, []string{"issuers[0].scopes[0]"}},
		{"excluded audience", func(c *Config) {
			c.Issuers[0].ExcludedAudiences = []string{"https://verdictd.test/approvals", "account"}
		}, nil},
		{"own audience excluded", func(c *Config) { c.Issuers[0].ExcludedAudiences = []string{"https://gateway.test/mcp"} },
			[]string{"issuers[0].excluded_audiences[0]", "own audience"}},
		{"empty excluded audience", func(c *Config) { c.Issuers[0].ExcludedAudiences = []string{"x", " "} },
			[]string{`issuers[0].excluded_audiences[1]: " " is not an audience`}},
		{"introspection incomplete", func(c *Config) { c.Issuers[0].Introspection = &Introspection{Endpoint: "http://idp.test/i"} }, []string{
			"issuers[0].introspection.endpoint", "issuers[0].introspection.client_id", "issuers[0].introspection.client_secret_file",
		}},
		{"two introspect", func(c *Config) {
			in := &Introspection{Endpoint: "https://idp.test/i", ClientID: "gw", ClientSecretFile: "s"}
			c.Issuers[0].Introspection = in
			c.Issuers = append(c.Issuers, Issuer{Issuer: "https://idp2.test", Audience: "https://gateway.test/mcp", Introspection: in})
		}, []string{"at most one issuer may configure introspection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Issuers: []Issuer{good()}}
			tc.edit(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate passed, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant it to contain %q", err, w)
				}
			}
			if _, err := NewVerifier(c); err == nil {
				t.Error("NewVerifier accepted a config Validate refuses")
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	var is Issuer
	if is.principalClaim() != "sub" || is.maxSkew() != time.Minute || strings.Join(is.algorithms(), ",") != "RS256,ES256,EdDSA" ||
		is.maxTokenLifetime() != 24*time.Hour {
		t.Errorf("defaults: %q %v %v %v", is.principalClaim(), is.maxSkew(), is.algorithms(), is.maxTokenLifetime())
	}
}

// TestExcluding: each issuer excludes the audiences given but its own, once, and the config
// excluded from is left as it was.
func TestExcluding(t *testing.T) {
	c := Config{Issuers: []Issuer{
		{Issuer: "https://a.test", Audience: "https://gw.test/mcp", ExcludedAudiences: []string{"x"}},
		{Issuer: "https://b.test", Audience: "https://verdictd.test/approvals"},
	}}
	got := c.Excluding("https://verdictd.test/approvals", "x", "https://gw.test/mcp")
	if a, b := strings.Join(got.Issuers[0].ExcludedAudiences, " "), strings.Join(got.Issuers[1].ExcludedAudiences, " "); a != "x https://verdictd.test/approvals" || b != "x https://gw.test/mcp" {
		t.Errorf("excluded: %q and %q", a, b)
	}
	if len(c.Issuers[0].ExcludedAudiences) != 1 || c.Issuers[1].ExcludedAudiences != nil {
		t.Errorf("the original changed: %+v", c.Issuers)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
	if a := strings.Join(c.Audiences(), " "); a != "https://gw.test/mcp https://verdictd.test/approvals" {
		t.Errorf("Audiences = %q", a)
	}
}
