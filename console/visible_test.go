package console

import (
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/visible"
)

func TestShownJSON(t *testing.T) {
	tests := []struct {
		in, want string
		hidden   int
	}{
		{`900`, `900`, 0},
		{`900.10`, `900.10`, 0},
		{`12345678901234567890123`, `12345678901234567890123`, 0},
		{`"110-222-333"`, `"110-222-333"`, 0},
		{"\"110\u202e333-222\"", `"110\u202e333-222"`, 1},
		{"\"a\u200bb\"", `"a\u200bb"`, 1},
		{"\"rent\ufe00\ufe0f\"", `"rent\ufe00\ufe0f"`, 2},
		{"\"x\U000E0100\u3164\u2800\"", `"x\udb40\udd00\u3164\u2800"`, 3},
		{`{"b":1,"a":[true,null]}`, "{\n  \"b\": 1,\n  \"a\": [\n    true,\n    null\n  ]\n}", 0},
	}
	for _, tc := range tests {
		got, n := shownJSON(jsontext.Value(tc.in))
		if got != tc.want || n != tc.hidden {
			t.Errorf("shownJSON(%q) = %q, %d; want %q, %d", tc.in, got, n, tc.want, tc.hidden)
		}
	}
}

// TestShownJSONSameValue: what the page shows denotes exactly the value sent, and holds no
// hidden rune.
func TestShownJSONSameValue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		raw, err := jsonv2.Marshal(map[string]any{"v": s, "n": rapid.Int64().Draw(t, "n")})
		if err != nil {
			t.Skip()
		}
		shown, _ := shownJSON(raw)
		for _, r := range shown {
			if visible.Hidden(r) && r != '\n' {
				t.Fatalf("shown %q holds hidden rune %U", shown, r)
			}
		}
		var a, b any
		if err := jsonv2.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		if err := jsonv2.Unmarshal([]byte(shown), &b); err != nil {
			t.Fatalf("shown %q is not JSON: %v", shown, err)
		}
		ja, _ := jsonv2.Marshal(a, jsonv2.Deterministic(true))
		jb, _ := jsonv2.Marshal(b, jsonv2.Deterministic(true))
		if string(ja) != string(jb) {
			t.Fatalf("shown %s denotes %s, sent %s", shown, jb, ja)
		}
	})
}

// A draft carrying text in variation selectors, which a page draws as nothing, is shown with
// every selector marked.
func TestShownTextVariationSelectors(t *testing.T) {
	draft := "December rent. Thanks!" + strings.Repeat("\ufe01\U000E0110", 20) + "\ufe0f"
	got, n := shownText(draft)
	if n != 41 || !strings.HasPrefix(got, "December rent. Thanks!⟦U+FE01⟧⟦U+E0110⟧") || !strings.HasSuffix(got, "⟦U+FE0F⟧") {
		t.Errorf("shownText = %q, %d", got, n)
	}
}

func TestShownText(t *testing.T) {
	got, n := shownText("Pay \u202eKCAB\u202c now\u200b\n\tok")
	if n != 3 || strings.ContainsRune(got, '\u202e') || !strings.Contains(got, "⟦U+202E⟧") || !strings.Contains(got, "\n\tok") {
		t.Errorf("shownText = %q, %d", got, n)
	}
}
