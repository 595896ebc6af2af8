package gates

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/policy"
)

// TestWhenCaseMatchesUnmarshal checks the plain-string shortcut of Engine.whenCase against
// what decoding the value would say, for plain, escaped, mistyped and malformed values.
func TestWhenCaseMatchesUnmarshal(t *testing.T) {
	eng, err := New(Config{State: NewMemState()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []string{
		`"immediate"`, `"scheduled"`, `"conditional"`, `"recurring"`,
		`"\u0069mmediate"`, `"recurr\u0069ng"`, `"Immediate"`, `"immediate "`, `" immediate"`,
		`"immediately"`, `""`, `"bogus"`, `1`, `true`, `["immediate"]`, `{"immediate":1}`,
		`"immediate`, `immediate"`, `"`, `"\"immediate\""`, `"imm\ediate"`,
	}
	for _, raw := range tests {
		var want string
		wantOK := json.Unmarshal([]byte(raw), &want) == nil && slices.Contains(policy.WhenCases(), want)
		if !wantOK {
			want = ""
		}
		got, ok := eng.whenCase([]byte(raw))
		if got != want || ok != wantOK {
			t.Errorf("whenCase(%s) = %q, %v; want %q, %v", raw, got, ok, want, wantOK)
		}
	}
}
