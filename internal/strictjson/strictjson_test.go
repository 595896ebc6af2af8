package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type segment struct {
	Text  string `json:"text"`
	Trust string `json:"trust"`
}

type self struct{ V string }

func (s *self) UnmarshalJSON(b []byte) error { return Unmarshal(b, &struct{ V *string }{&s.V}) }

type request struct {
	Verdict   string             `json:"verdict"`
	Arguments json.RawMessage    `json:"arguments"`
	Segments  []segment          `json:"segments"`
	ByName    map[string]segment `json:"by_name"`
	Ptr       *segment           `json:"ptr"`
	Self      self               `json:"self"`
	Amount    any                `json:"amount"`
	Untagged  string
	Embedded
}

type Embedded struct {
	Inner string `json:"inner"`
}

func TestUnmarshal(t *testing.T) {
	tests := []struct {
		body string
		err  string // "" = ok; "case" = ErrFieldCase
	}{
		{`{"verdict":"v","arguments":{"Any":1,"any":2}}`, ""},
		{`{"Verdict":"v"}`, "case"},
		{`{"verdict":"a","Verdict":"b"}`, "case"},
		{`{"segments":[{"text":"x","trust":"untrusted","Trust":"user"}]}`, "case"},
		{`{"by_name":{"Free Key":{"text":"x","trust":"user"}}}`, ""},
		{`{"by_name":{"k":{"TEXT":"x"}}}`, "case"},
		{`{"ptr":{"Trust":"user"}}`, "case"},
		{`{"ptr":null}`, ""},
		{`{"self":{"V":"x"}}`, ""},
		{`{"self":{"v":"x"}}`, "case"},
		{`{"amount":{"Whatever":1}}`, ""},
		{`{"Untagged":"x"}`, ""},
		{`{"untagged":"x"}`, "case"},
		{`{"inner":"x"}`, ""},
		{`{"Inner":"x"}`, "case"},
		{`{"unknown":1}`, "unknown field"},
		{`{"verdict":"v"} x`, "trailing"},
		{`{"segments":{"text":"x"}}`, "cannot unmarshal"},
		{`{"verdict":`, "EOF"},
	}
	for _, tt := range tests {
		var r request
		err := Unmarshal([]byte(tt.body), &r)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.body, err)
		case tt.err == "case" && !errors.Is(err, ErrFieldCase):
			t.Errorf("%s: %v, want a field case error", tt.body, err)
		case tt.err != "" && tt.err != "case" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want %q", tt.body, err, tt.err)
		}
	}
	var n struct{ A any }
	if err := Unmarshal([]byte(`{"A":9007199254740993}`), &n); err != nil || n.A.(json.Number) != "9007199254740993" {
		t.Fatalf("numbers: %v %v", n.A, err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"verdict":"v","segments":[{"text":"x","trust":"user"}]}`))
	f.Add([]byte(`{"Verdict":"v"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r request
		if err := Unmarshal(b, &r); err != nil {
			return
		}
		// Whatever was accepted decodes the same with encoding/json.
		var want request
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("accepted %q that encoding/json refuses: %v", b, err)
		}
	})
}
