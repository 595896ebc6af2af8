package console

import (
	"net/url"
	"testing"

	"pgregory.net/rapid"
)

func TestSafeReturn(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/approvals/apr_01", "/approvals/apr_01"},
		{"/audit?server=bank&tool=transfer", "/audit?server=bank&tool=transfer"},
		{"", "/"},
		{"approvals/x", "/"},
		{"//evil.example/x", "/"},
		{"/\\evil.example", "/"},
		{"/%5Cevil.example", "/%5Cevil.example"},
		{"https://evil.example/", "/"},
		{"javascript:alert(1)", "/"},
		{"/\t/evil.example", "/"},
		{"/x#frag", "/"},
		{"/login?return=/x", "/"},
		{"/callback", "/"},
		{"/a/../b", "/a/../b"},
		{"/%2F ", "/"},
		{"/%2F%2Fevil.example", "/%2F%2Fevil.example"},
		{"/approvals/apr 1", "/"},
	}
	for _, tc := range tests {
		if got := safeReturn(tc.in); got != tc.want {
			t.Errorf("safeReturn(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSafeReturnStaysHome: whatever an attacker puts in the return parameter, the browser is
// sent to a path of this origin. The result is resolved against the console's origin as a
// browser resolves a Location header.
func TestSafeReturnStaysHome(t *testing.T) {
	base, _ := url.Parse("https://console.example.org/")
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.OneOf(
			rapid.String(),
			rapid.StringMatching(`[/\\]{0,3}[a-z.:@%5Cc\t]{0,20}`),
		).Draw(t, "return")
		out := safeReturn(in)
		loc, err := url.Parse(out)
		if err != nil {
			t.Fatalf("safeReturn(%q) = %q does not parse: %v", in, out, err)
		}
		if r := base.ResolveReference(loc); r.Host != base.Host || r.Scheme != base.Scheme {
			t.Fatalf("safeReturn(%q) = %q leads to %s", in, out, r)
		}
		if out[0] != '/' || (len(out) > 1 && (out[1] == '/' || out[1] == '\\')) {
			t.Fatalf("safeReturn(%q) = %q", in, out)
		}
	})
}
