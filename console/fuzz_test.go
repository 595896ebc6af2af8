package console

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/visible"
)

// FuzzSafeReturn: the return path of a sign-in is whatever a link says; wherever it points,
// the browser lands on a path of the console's own origin.
func FuzzSafeReturn(f *testing.F) {
	for _, s := range []string{"/approvals/apr_1", "//evil.example", "/\\evil", "https://x", "/%2F%2Fevil", "/a?b=c#d", "\x00/", "/login"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://console.example.org/")
	f.Fuzz(func(t *testing.T, in string) {
		out := safeReturn(in)
		loc, err := url.Parse(out)
		if err != nil {
			t.Fatalf("safeReturn(%q) = %q: %v", in, out, err)
		}
		if r := base.ResolveReference(loc); r.Host != base.Host || r.Scheme != base.Scheme || !strings.HasPrefix(out, "/") ||
			strings.HasPrefix(out, "//") || strings.ContainsAny(out, "\\\r\n\t") {
			t.Fatalf("safeReturn(%q) = %q", in, out)
		}
	})
}

// FuzzShown: what an approver reads of an argument or a draft holds no hidden rune, and an
// argument still denotes the JSON value sent.
func FuzzShown(f *testing.F) {
	for _, s := range []string{`"a\u202eb"`, "\"x\u200by\"", `{"k":[1,2.50,"\u2066"]}`, `12345678901234567890`, "\"\xff\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		text, _ := shownText(in)
		for _, r := range text {
			if visible.Hidden(r) && r != '\n' && r != '\t' {
				t.Fatalf("shownText(%q) holds %U", in, r)
			}
		}
		v := jsontext.Value(in)
		if !v.IsValid() {
			return
		}
		shown, _ := shownJSON(v)
		for _, r := range shown {
			if visible.Hidden(r) && r != '\n' {
				t.Fatalf("shownJSON(%q) holds %U", in, r)
			}
		}
		if !utf8.ValidString(shown) {
			t.Fatalf("shownJSON(%q) is not UTF-8", in)
		}
		a, b := v.Clone(), jsontext.Value(shown)
		if err := a.Canonicalize(); err != nil {
			return
		}
		if err := b.Canonicalize(); err != nil {
			t.Fatalf("shownJSON(%q) = %q is not JSON: %v", in, shown, err)
		}
		if string(a) != string(b) {
			t.Fatalf("shownJSON(%q) = %q denotes %s, sent %s", in, shown, b, a)
		}
	})
}
