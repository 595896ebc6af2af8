package testop

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testbin"
)

var opCmd = testbin.New(Package)

func TestMain(m *testing.M) {
	code := m.Run()
	opCmd.Remove()
	os.Exit(code)
}

// claims decodes a JWT's payload without verifying it: these tests check what the provider
// issues, not whether it is genuine (the identity package's tests do that).
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want a JWS", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a command")
	}
	const resource = "https://gateway.test/mcp"
	o := Start(t, opCmd.Path(t), "-resource", resource, "-client", "agent:agent-secret", "-client", "other:other-secret=https://other.test/mcp")
	if o.Metadata.Issuer != o.Issuer {
		t.Fatalf("discovery issuer %q, want %q", o.Metadata.Issuer, o.Issuer)
	}
	for _, tc := range []struct {
		name, token, sub, aud, scope string
	}{
		{"client credentials", o.ClientCredentials(t, "agent", "agent-secret", "tools:read"), "agent", resource, "tools:read"},
		{"other resource", o.ClientCredentials(t, "other", "other-secret"), "other", "https://other.test/mcp", ""},
		{"auth code with PKCE", o.AuthCode(t, "test-user2", "tools:call"), "id2", resource, "openid tools:call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claims(t, tc.token)
			if c["iss"] != o.Issuer || c["sub"] != tc.sub {
				t.Errorf("iss, sub = %v, %v, want %s, %s", c["iss"], c["sub"], o.Issuer, tc.sub)
			}
			aud, _ := c["aud"].([]any)
			found := false
			for _, a := range aud {
				found = found || a == tc.aud
			}
			if !found {
				t.Errorf("aud = %v, want it to contain %s", c["aud"], tc.aud)
			}
			if got, _ := c["scope"].(string); got != tc.scope {
				t.Errorf("scope = %q, want %q", got, tc.scope)
			}
		})
	}
}
