package suggest

import "testing"

func TestClosest(t *testing.T) {
	tests := []struct {
		name       string
		candidates []string
		want       string
	}{
		{"pth", []string{"path", "content"}, "path"},
		{"verdict_tll", []string{"verdict_ttl", "listen", "issuer"}, "verdict_ttl"},
		{"to_acount", []string{"to_account", "from_account", "amount"}, "to_account"},
		{"Listen", []string{"listen"}, "listen"},
		{"amount", []string{"amount"}, ""},        // not a typo
		{"x", []string{"y"}, ""},                  // one edit is the whole name
		{"memo", []string{"path", "content"}, ""}, // nothing near
		{"ab", []string{"ac", "ad"}, ""},          // a tie names neither
		{"", []string{"a"}, ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.name, tt.candidates); got != tt.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", tt.name, tt.candidates, got, tt.want)
		}
	}
	if got := DidYouMean("pth", []string{"path"}); got != ` (did you mean "path"?)` {
		t.Errorf("DidYouMean = %q", got)
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"ü", "u", 1},
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
