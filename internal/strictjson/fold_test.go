package strictjson

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// TestFoldNameIsEqualFold: two names fold alike exactly when bytes.EqualFold, which is how
// encoding/json matches a member name to a field, calls them equal.
func TestFoldNameIsEqualFold(t *testing.T) {
	names := []string{"trust", "TRUST", "Trust", "truſt", "truSt", "text", "Kelvin", "\u212aelvin", "kelvin",
		"straße", "STRASSE", "σ", "Σ", "ς", "é", "É", "", "a_b", "A_B", "ǅ", "ǆ", "Ǆ"}
	for _, a := range names {
		for _, b := range names {
			if got, want := foldName(a) == foldName(b), bytes.EqualFold([]byte(a), []byte(b)); got != want {
				t.Errorf("foldName(%q) == foldName(%q) is %v, bytes.EqualFold %v", a, b, got, want)
			}
		}
	}
}

func FuzzFoldName(f *testing.F) {
	f.Add("trust", "truſt")
	f.Add("Kelvin", "\u212aelvin")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return // member names reach the check decoded, so as valid UTF-8
		}
		if got, want := foldName(a) == foldName(b), bytes.EqualFold([]byte(a), []byte(b)); got != want {
			t.Fatalf("foldName(%q) == foldName(%q) is %v, bytes.EqualFold %v", a, b, got, want)
		}
	})
}
