package verdict

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// The hand-written payload encoders must write what encoding/json writes, for every string,
// whether they take it or leave it to encoding/json.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	src := "instruction"
	odd := []string{"", "plain", `quote"d`, `back\slash`, "<b>&amp;</b>", "tab\there", "nul\x00",
		"del\x7f", "é", "\u2028", "\xff\xfe", "emoji 😀", "~ !#$%'()*+,-./:;=?@[]^_`{|}"}
	base := Claims{
		Issuer: "verdictd", Subject: "u_01", Audience: []string{"executor-a", "executor-b"},
		IssuedAt: 1_900_000_000, NotBefore: 1_900_000_000, Expiry: 1_900_000_060,
		ID: "q1w2e3r4t5y6u7i8o9p0aa", Server: "bank", Tool: "transfer",
		ToolDigest: digestOf("t"), Policy: "2026-11-30.1", Arguments: digestOf("a"),
		Slots:     []Slot{{ID: "amount", Status: "known", Source: &src}, {ID: "memo", Status: "null"}},
		ActionKey: "u_01:send money:bank/transfer", Phase: "at_trigger", Record: "rec_01",
	}
	claims := []Claims{base, {}, {Audience: []string{}, Slots: []Slot{}}}
	for _, s := range odd {
		for i := range 7 {
			c := base
			c.Audience = []string{"executor-a", s}
			c.Slots = []Slot{{ID: "amount", Status: "known", Source: &src}, {ID: "memo", Status: "null"}}
			switch i {
			case 0:
				c.Issuer = s
			case 1:
				c.ActionKey = s
			case 2:
				c.Slots[1].ID = s
			case 3:
				c.Slots[0].Source = &s
			case 4:
				c.Record = s
			case 5:
				c.Audience = []string{s}
			case 6:
				c.Slots[1].Status = s
			}
			claims = append(claims, c)
		}
	}
	for _, c := range claims {
		got, err := marshalClaims(&c)
		want, werr := json.Marshal(c)
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Errorf("claims:\n got %s (%v)\nwant %s (%v)", got, err, want, werr)
		}
	}
	receipts := []Receipt{{}, {Issuer: "executor-bank", ID: "q1w2e3r4t5y6u7i8o9p0aa", ActionKey: "u_01:send money",
		Arguments: digestOf("a"), Decision: "executed", IssuedAt: 1_900_000_000}}
	for _, s := range odd {
		receipts = append(receipts, Receipt{Issuer: s, ID: "id", ActionKey: "k", Arguments: "a", Decision: "failed", IssuedAt: -1},
			Receipt{Issuer: "e", ID: s, ActionKey: s, Arguments: s, Decision: s, IssuedAt: 9})
	}
	for _, r := range receipts {
		got, err := marshalReceipt(&r)
		want, werr := json.Marshal(r)
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Errorf("receipt:\n got %s (%v)\nwant %s (%v)", got, err, want, werr)
		}
	}
}

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
