package verdict

import (
	"encoding/base64"
	"testing"
)

// checkID accepts exactly the ids the strict decoder reads as 128 bits or more, and refuses the
// newlines that decoder would skip.
func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"q1w2e3r4t5y6u7i8o9p0aQ", true},     // 22 characters, 16 bytes
		{"q1w2e3r4t5y6u7i8o9p0aa", false},    // non-canonical last character
		{"q1w2e3r4t5y6u7i8o9p0a", false},     // 21 characters, 15 bytes
		{"q1w2e3r4t5y6u7i8o9p0aQA", true},    // 23 characters, 17 bytes
		{"q1w2e3r4t5y6u7i8o9p0aQAAA", false}, // impossible length
		{"q1w2e3r4t5y6u7i8o9p0aQAA", true},   // 24 characters, 18 bytes
		{"q1w2e3r4t5y6u7i8o9p0aQ=", false},   // padding
		{"q1w2e3r4t5y6u7i8o9p0+Q", false},    // standard alphabet
		{"q1w2e3r4t5y6u7i8o9\np0aQ", false},  // newline
		{"", false},
	} {
		err := checkID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("checkID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if b, derr := base64.RawURLEncoding.Strict().DecodeString(tc.id); tc.ok && (derr != nil || len(b) < 16) {
			t.Errorf("%q: the strict decoder gives %d bytes, %v", tc.id, len(b), derr)
		}
	}
	id, err := NewID()
	if err != nil || checkID(id) != nil {
		t.Errorf("NewID %q: %v, %v", id, err, checkID(id))
	}
}
