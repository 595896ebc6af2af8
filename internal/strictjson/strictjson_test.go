package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
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
		{`{"segments":[{"text":"x","trust":"untrusted","truſt":"user"}]}`, "case"},
		{`{"segments":[{"text":"x","tru\u017ft":"user"}]}`, "case"},
		{`{"ſegments":[]}`, "case"},
		{`{"by_name":{"k":{"\u212a":1,"text":"x"}}}`, "unknown field"},
		{`{"ptr":{"Truſt":"user"}}`, "case"},
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

// tokenWalk is the reference check: the json.Decoder token walk alone.
func tokenWalk(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return checkNames(dec, t, "")
}

func TestCheckNamesMatchesTokenWalk(t *testing.T) {
	bodies := []string{
		`{"segments":[{"text":"x"},{"text":"y","Trust":"user"}]}`,
		`{"by_name":{"a":{"text":"x"},"b":{"TRUST":"user"}}}`,
		`{"by_name":{"":{"Text":"x"}}}`,
		`{"ptr":{"trust":"user"},"Ptr":null}`,
		`{"V\u0065rdict":"x"}`,
		`{"Verdic\u0074":"x"}`,
		`{"verdict":"\u00e9","arguments":{"Verdict":1},"Untagged":"x","UNTAGGED":"y"}`,
		`{"segments":[[{"Text":1}]]}`,
		`{"amount":[1,2,{"Trust":3}],"inner":"x","INNER":"y"}`,
		`  {"segments" : [ {"text" : "a\"b\\\\c" , "TEXT" : 1 } ] }  `,
		`{"verdict":1e5,"Verdict":-0.5E-3}`,
		`{"verdict":01,"Verdict":1}`,
		`{"verdict":"a` + "\x01" + `","Verdict":1}`,
		`{"verdict":tru,"Verdict":1}`,
		`{"verdict" "x","Verdict":1}`,
		`{"Segments":`,
		`[{"Verdict":1}]`,
		`{"segments":[{"trust":"untrusted","truſt":"user"}]}`,
		`{"ſegments":[{"text":"x"}],"verdict":"\u017f"}`,
		`{"ptr":{"te\u017ft":"x"}}`,
	}
	typ := reflect.TypeFor[request]()
	for _, b := range bodies {
		fast, slow := CheckNames([]byte(b), typ), tokenWalk([]byte(b), typ)
		if errors.Is(fast, ErrFieldCase) != errors.Is(slow, ErrFieldCase) || (fast == nil) != (slow == nil) {
			t.Errorf("%s:\n fast %v\n slow %v", b, fast, slow)
			continue
		}
		if errors.Is(fast, ErrFieldCase) && fast.Error() != slow.Error() {
			t.Errorf("%s: messages differ:\n fast %v\n slow %v", b, fast, slow)
		}
	}
}

// FuzzCheckNames: the one-pass scanner and the token walk agree on every input that decodes.
func FuzzCheckNames(f *testing.F) {
	f.Add([]byte(`{"verdict":"v","segments":[{"text":"x","trust":"user"}]}`))
	f.Add([]byte(`{"segments":[{"text":"x","Trust":"user"}],"by_name":{"K":{"text":"é"}}}`))
	f.Add([]byte(`{"ptr":{"tru\u0073t":"user","Tru\u0053t":1},"amount":[1.5e3,-0,true,null]}`))
	typ := reflect.TypeFor[request]()
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, slow := CheckNames(b, typ), tokenWalk(b, typ)
		if errors.Is(fast, ErrFieldCase) != errors.Is(slow, ErrFieldCase) {
			t.Fatalf("%q: fast %v, token walk %v", b, fast, slow)
		}
		if fast == nil && slow != nil && json.Valid(b) {
			t.Fatalf("%q: fast accepted, token walk %v", b, slow)
		}
	})
}

func BenchmarkUnmarshal(b *testing.B) {
	body := []byte(`{"verdict":"eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ2In0.c2ln","arguments":{"account":"1102534471","amount":250000},` +
		`"segments":[{"text":"send money: 250,000 won to 110-222-333","trust":"user"},{"text":"forwarded","trust":"untrusted"}],` +
		`"by_name":{"from":{"text":"1102534471","trust":"user"}},"ptr":{"text":"x","trust":"user"},"amount":[1,2,3],"inner":"i"}`)
	b.ReportAllocs()
	for b.Loop() {
		var r request
		if err := Unmarshal(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckNames(b *testing.B) {
	body := []byte(`{"verdict":"eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ2In0.c2ln","arguments":{"account":"1102534471","amount":250000},` +
		`"segments":[{"text":"send money: 250,000 won to 110-222-333","trust":"user"},{"text":"forwarded","trust":"untrusted"}],` +
		`"by_name":{"from":{"text":"1102534471","trust":"user"}},"ptr":{"text":"x","trust":"user"},"amount":[1,2,3],"inner":"i"}`)
	typ := reflect.TypeFor[request]()
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := CheckNames(body, typ); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("token-walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := tokenWalk(body, typ); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestAppendCompact(t *testing.T) {
	tests := []struct {
		in, want string // want "" = an error
	}{
		{`{"a":[1,2.5e-3,"x y",true,null,{}]}`, `{"a":[1,2.5e-3,"x y",true,null,{}]}`},
		{" {\"a\" :\n[ 1 ] }\t", `{"a":[1]}`},
		{`"<&>\u2028"`, `"<&>\u2028"`},
		{`{"a":`, ""},
		{`{} {}`, ""},
		{`{"a":01}`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		got, err := AppendCompact([]byte("prefix:"), []byte(tt.in))
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%q: accepted as %q", tt.in, got)
		case tt.want != "" && (err != nil || string(got) != "prefix:"+tt.want):
			t.Errorf("%q: %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzAppendCompact: AppendCompact is json.Compact.
func FuzzAppendCompact(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5e-3,"x y",true,null,{}]}`))
	f.Add([]byte(" {\"a\" :\n[ 1 ] }\t"))
	f.Add([]byte(`{"a":"\u00e9\ud83d\ude00","b":-0.0E+1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := AppendCompact(nil, b)
		var want bytes.Buffer
		werr := json.Compact(&want, b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: AppendCompact %v, json.Compact %v", b, err, werr)
		}
		if err == nil && !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%q: AppendCompact %q, json.Compact %q", b, got, want.Bytes())
		}
	})
}

func BenchmarkAppendCompact(b *testing.B) {
	rec, _ := json.Marshal(map[string]any{"record_id": "rec_01", "slots": []map[string]any{
		{"slot_id": "amount", "status": "known", "value": 250000, "source": "instruction"},
		{"slot_id": "to_account", "status": "known", "value": "110-222-333", "source": "instruction"}},
		"verdict": strings.Repeat("eyJhbGciOiJFZERTQSJ9", 40), "notices": []string{"Transfers are final."}})
	dst := make([]byte, 0, 4096)
	b.Run("strictjson", func(b *testing.B) {
		for b.Loop() {
			if _, err := AppendCompact(dst[:0], rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			buf := bytes.NewBuffer(dst[:0])
			if err := json.Compact(buf, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
