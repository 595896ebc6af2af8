package identity

import (
	"strings"
	"testing"
)

func TestTokenHash(t *testing.T) {
	a := tokenHash("https://a.test", "j1", "token-1")
	for name, other := range map[string]string{
		"same jti at another issuer": tokenHash("https://b.test", "j1", "token-1"),
		"another jti":                tokenHash("https://a.test", "j2", "token-1"),
		"no jti":                     tokenHash("https://a.test", "", "token-1"),
		"jti equal to a token":       tokenHash("https://a.test", "", "j1"),
	} {
		if other == a {
			t.Errorf("%s: same hash %s", name, a)
		}
	}
	if a != tokenHash("https://a.test", "j1", "token-2") {
		t.Error("the hash of a token with a jti depends on more than issuer and jti")
	}
	if !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 || strings.Contains(tokenHash("i", "", "secret-token"), "secret") {
		t.Errorf("hash %q", a)
	}
}

func TestPrincipalID(t *testing.T) {
	id := PrincipalID("https://idp.test/tenant", "a#b")
	issuer, subject, _ := strings.Cut(id, "#")
	if issuer != "https://idp.test/tenant" || subject != "a#b" {
		t.Errorf("%q splits into %q, %q", id, issuer, subject)
	}
}
