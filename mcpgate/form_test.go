package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/visible"
)

func TestElicitProperty(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         string // JSON of the property, "" for not askable
	}{
		{"string with bounds", `{"type":"string","minLength":1,"maxLength":64,"description":"Account to credit.","pattern":"^x"}`,
			`{"maxLength":64,"minLength":1,"title":"T","type":"string"}`},
		{"integer keeps exact bounds", `{"type":"integer","minimum":1,"maximum":9007199254740993}`,
			`{"maximum":9007199254740993,"minimum":1,"title":"T","type":"integer"}`},
		{"allowed format", `{"type":"string","format":"date-time"}`, `{"format":"date-time","title":"T","type":"string"}`},
		{"other format dropped", `{"type":"string","format":"ipv4"}`, `{"title":"T","type":"string"}`},
		{"untyped string enum", `{"enum":["a","b"]}`, `{"enum":["a","b"],"title":"T","type":"string"}`},
		{"boolean", `{"type":"boolean","default":true}`, `{"title":"T","type":"boolean"}`},
		{"default never copied", `{"type":"string","default":"999-888-777"}`, `{"title":"T","type":"string"}`},
		{"object", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"array", `{"type":"array","items":{"type":"string"}}`, ""},
		{"type list", `{"type":["string","null"]}`, ""},
		{"integer enum", `{"type":"integer","enum":[1,2]}`, ""},
		{"mixed enum", `{"type":"string","enum":["a",1]}`, ""},
		{"empty", ``, ""},
		{"not an object", `[]`, ""},
		{"no type", `{}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := elicitProperty(json.RawMessage(tc.schema), "T")
			if tc.want == "" {
				if err == nil {
					t.Fatalf("askable: %v", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(p); string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func testRecord() *api.Record {
	return &api.Record{
		Outcome: api.OutcomeAskUser,
		Notices: []string{"Transfers are final."},
		Questions: []api.Question{
			{QuestionID: "q_1", SlotID: "to_account", Kind: "value", Message: "Please provide the to account.", Schema: json.RawMessage(`{"type":"string"}`)},
			{QuestionID: "q_2", SlotID: "amount", Kind: "value", Message: "Please provide the amount.", Schema: json.RawMessage(`{"type":"integer","minimum":1}`)},
			{QuestionID: "q_3", SlotID: "confirm:to_account", Kind: "approval", Message: "Please confirm the to account.",
				Schema: json.RawMessage(`{"const":true}`), Shown: "110-222-333", Value: "110-222-333"},
			{QuestionID: "q_4", SlotID: "$branch", Kind: "branch", Message: "Which of these?", Options: [][]string{{"iban"}, {"account_no", "bank_code"}}},
		},
	}
}

func TestBuildFormAndApply(t *testing.T) {
	f, err := buildForm(testRecord(), "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, fl := range f.Fields {
		keys[fl.Key] = fl.Kind
	}
	want := map[string]string{"to_account": fieldValue, "amount": fieldValue, "confirm_to_account": fieldApproval, "details": fieldBranch}
	for k, kind := range want {
		if keys[k] != kind {
			t.Errorf("field %s: kind %q, want %q (fields %v)", k, keys[k], kind, keys)
		}
	}
	if !strings.Contains(f.Message, "Transfers are final.") || !strings.Contains(f.Message, "110-222-333") {
		t.Errorf("message lacks the notice or what is approved: %q", f.Message)
	}
	b, _ := json.Marshal(f.params())
	if strings.Contains(string(b), `"default"`) {
		t.Errorf("form carries a default: %s", b)
	}

	st := &callState{}
	err = f.apply(map[string]any{"to_account": "110-222-333", "amount": float64(1000), "confirm_to_account": true,
		"details": "account no, bank code"}, st)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st.Req.UserAnswers)
	const wantAnswers = `[{"question_id":"q_1","value":"110-222-333"},{"question_id":"q_2","value":1000},` +
		`{"question_id":"q_3","value":"110-222-333","approved":true},{"question_id":"q_4","value":["account_no","bank_code"]}]`
	if string(got) != wantAnswers {
		t.Errorf("answers\n%s\nwant\n%s", got, wantAnswers)
	}
}

func TestApplyRefusesWhatTheUserDidNotGive(t *testing.T) {
	f, _ := buildForm(testRecord(), "immediate", 0)
	for _, tc := range []struct {
		name    string
		content map[string]any
		want    error
	}{
		{"approval missing", map[string]any{"to_account": "x"}, errNotApproved},
		{"approval false", map[string]any{"confirm_to_account": false}, errNotApproved},
		{"approval as a string", map[string]any{"confirm_to_account": "true"}, errNotApproved},
	} {
		if err := f.apply(tc.content, &callState{}); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	st := &callState{}
	if err := f.apply(map[string]any{"amount": float64(1 << 60), "confirm_to_account": true}, st); err == nil {
		t.Error("an integer beyond 2^53 was accepted")
	}
}

func TestRestatementBecomesAUserSegment(t *testing.T) {
	rec := &api.Record{Outcome: api.OutcomeAskUser, Questions: []api.Question{
		{QuestionID: "q_9", SlotID: slotActionName, Kind: "restate_intent", Message: "What would you like to do, and when?"},
	}}
	f, err := buildForm(rec, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Fields) != 2 {
		t.Fatalf("want the action and the timing asked, got %+v", f.Fields)
	}
	st := &callState{Req: api.Request{Instruction: api.Instruction{Segments: []api.Segment{{Text: "from the host", Trust: "user"}}}}}
	if err := f.apply(map[string]any{"action": "  send money ", "when": "immediate"}, st); err != nil {
		t.Fatal(err)
	}
	in := st.intent()
	if st.whenCase() != "immediate" || in.ActionName == nil || in.ActionName.Segment != 1 || in.ActionName.Span != [2]int{0, 10} {
		t.Errorf("intent %+v %+v", in, in.ActionName)
	}
	if s := st.Req.Instruction.Segments[1]; s.Text != "send money" || s.Trust != "user" {
		t.Errorf("segment %+v", s)
	}
	st2 := &callState{}
	f.apply(map[string]any{"when": "tomorrow"}, st2)
	if st2.whenCase() != "" {
		t.Errorf("a timing outside the enum was taken: %q", st2.whenCase())
	}
}

func TestBuildFormRefusesUnaskable(t *testing.T) {
	for _, q := range []api.Question{
		{Kind: "value", SlotID: "tags", Schema: json.RawMessage(`{"type":"array","items":{"type":"string"}}`)},
		{Kind: "approval", SlotID: "confirm:x"},
		{Kind: "branch", SlotID: "$branch"},
		{Kind: "something_new", SlotID: "x"},
	} {
		if _, err := buildForm(&api.Record{Questions: []api.Question{q}}, "immediate", 0); !errors.Is(err, errNotAskable) {
			t.Errorf("%s: %v, want not askable", q.Kind, err)
		}
	}
	if _, err := buildForm(&api.Record{}, "immediate", 0); !errors.Is(err, errNotAskable) {
		t.Errorf("a record without questions built a form")
	}
}

func TestTopLevelKeepsExactBytes(t *testing.T) {
	fs, err := topLevel(json.RawMessage(`{"amount": 9007199254740993, "to":"x", "n":{"a":[1.10]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 3 || string(fs[0].value) != "9007199254740993" || string(fs[2].value) != `{"a":[1.10]}` {
		t.Errorf("fields %+v", fs)
	}
	for _, bad := range []string{`[]`, `"x"`, `{"a":1} {}`, `{"a":}`, ``} {
		if _, err := topLevel(json.RawMessage(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzElicitProperty: any schema either reduces to a flat primitive with
// no default, or is refused.
func FuzzElicitProperty(f *testing.F) {
	for _, s := range []string{`{"type":"string","default":"x"}`, `{"enum":["a"]}`, `{"type":"integer","minimum":1e400}`, `{"type":["string"]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := elicitProperty(json.RawMessage(s), "title")
		if err != nil {
			return
		}
		if _, ok := p["default"]; ok {
			t.Fatalf("default kept: %v", p)
		}
		typ, _ := p["type"].(string)
		if typ != "string" && typ != "number" && typ != "integer" && typ != "boolean" {
			t.Fatalf("type %v", p["type"])
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("property does not encode: %v", err)
		}
	})
}

// FuzzTopLevel: topLevel splits exactly the texts that are one JSON object, into the members
// another tokenizer (go-json-experiment's) reads in them: the same number, the same names in the
// same order, each value the bytes written.
func FuzzTopLevel(f *testing.F) {
	f.Add(`{"a":1,"b":[true,null]}`)
	f.Add(`{}`)
	f.Add(` {"a" : {"b":1.50e3} , "a":"\u0061", "\u00e9":"x"} `)
	f.Add("{\"\xff\":1,\"\xfe\":2}")
	f.Add(`{"a":1}{}`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := topLevel(json.RawMessage(s))
		want, werr := referenceMembers([]byte(s))
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: topLevel %v, the reference %v", s, err, werr)
		}
		if err != nil {
			return
		}
		if len(fs) != len(want) {
			t.Fatalf("%q: %d members, the reference %d", s, len(fs), len(want))
		}
		for i, fl := range fs {
			// encoding/json reads each byte of invalid UTF-8 in a name as U+FFFD.
			if fl.name != string([]rune(want[i].name)) || string(fl.value) != string(want[i].value) {
				t.Fatalf("%q: member %d is %q: %s, the reference %q: %s", s, i, fl.name, fl.value, want[i].name, want[i].value)
			}
		}
	})
}

// referenceMembers reads the members of the one JSON object data holds with go-json-experiment's
// tokenizer, names repeated or not.
func referenceMembers(data []byte) (fieldList, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, errors.New("not an object")
	}
	var out fieldList
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		out = append(out, field{name: name, value: bytes.Clone(v)})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return out, nil
}

func BenchmarkBuildForm(b *testing.B) {
	rec := testRecord()
	b.ReportAllocs()
	for b.Loop() {
		f, err := buildForm(rec, "immediate", 0)
		if err != nil {
			b.Fatal(err)
		}
		_ = f.params()
	}
}

// TestAnswerJSONRefusesRoundedIntegers decodes form answers the way the
// MCP library does (encoding/json into map[string]any, so float64) and
// checks that an integer the double may have rounded is refused, not sent
// as a neighbour: 9007199254740993 decodes to 2^53 exactly, so 2^53 itself
// cannot be told from it.
func TestAnswerJSONRefusesRoundedIntegers(t *testing.T) {
	for _, tc := range []struct {
		typed string
		want  string // "" for refused
	}{
		{"12", "12"},
		{"-7", "-7"},
		{"2.5", "2.5"},
		{"9007199254740991", "9007199254740991"},
		{"-9007199254740991", "-9007199254740991"},
		{"9007199254740992", ""},
		{"9007199254740993", ""},
		{"-9007199254740993", ""},
		{"18014398509481985", ""},
	} {
		t.Run(tc.typed, func(t *testing.T) {
			var content map[string]any
			if err := json.Unmarshal([]byte(`{"n":`+tc.typed+`}`), &content); err != nil {
				t.Fatal(err)
			}
			got, err := answerJSON(content["n"])
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("answer %s sent as %s", tc.typed, got)
			case tc.want != "" && (err != nil || string(got) != tc.want):
				t.Fatalf("answer %s: %s, %v; want %s", tc.typed, got, err, tc.want)
			}
		})
	}
}

// reviewRecord asks to review a drafted memo.
func reviewRecord(memo string) *api.Record {
	return &api.Record{Outcome: api.OutcomeAskUser, Notices: []string{"Transfers are final."}, Questions: []api.Question{
		{QuestionID: "q_7", SlotID: "memo", Kind: api.QuestionReviewDraft, Message: "Please review the memo drafted for you.",
			Schema: json.RawMessage(`{"const":true}`), Shown: memo, Value: memo, Draft: &api.DraftRef{Digest: "sha256:x", Bytes: len(memo) + 2}},
	}}
}

// A review is a choice, never an empty text field; the message carries the whole draft, last;
// approving it answers with exactly the draft, anything else ends the call.
func TestReviewForm(t *testing.T) {
	memo := "Rent for December.\nNote: Transfers are reversible.\n" + strings.Repeat("é", 300)
	f, err := buildForm(reviewRecord(memo), "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(f.Message, "\n"+memo) {
		t.Errorf("the message does not end with the whole draft: %q", f.Message)
	}
	if i, j := strings.Index(f.Message, "Note: Transfers are final."), strings.Index(f.Message, memo); i < 0 || i > j {
		t.Errorf("the gateway's notice does not come before the draft: %q", f.Message)
	}
	b, _ := json.Marshal(f.params().RequestedSchema)
	const wantSchema = `{"properties":{"memo":{"description":"Approve the memo exactly as shown above (351 characters), or refuse it.",` +
		`"enum":["approve","refuse"],"title":"Please review the memo drafted for you.","type":"string"}},"required":["memo"],"type":"object"}`
	if string(b) != wantSchema {
		t.Errorf("schema\n%s\nwant\n%s", b, wantSchema)
	}
	st := &callState{}
	if err := f.apply(map[string]any{"memo": "approve"}, st); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st.Req.UserAnswers)
	want, _ := json.Marshal([]api.Answer{{QuestionID: "q_7", Approved: ptrTrue(), Value: api.Value{Set: true, V: mustRaw(memo)}}})
	if string(got) != string(want) {
		t.Errorf("answers %s, want %s", got, want)
	}
	for _, content := range []map[string]any{{"memo": "refuse"}, {}, {"memo": true}, {"memo": memo}} {
		if err := f.apply(content, &callState{}); !errors.Is(err, errNotApproved) {
			t.Errorf("%v: %v, want not approved", content, err)
		}
	}
}

// A draft longer than the form's limit is never shown in part: the form is refused.
func TestReviewFormTooLong(t *testing.T) {
	tests := []struct {
		name  string
		memo  string
		limit int
		err   error
	}{
		{"at the default", strings.Repeat("a", DefaultMaxDraftBytes), 0, nil},
		{"past the default", strings.Repeat("a", DefaultMaxDraftBytes+1), 0, errDraftTooLong},
		{"past a configured limit", "12345", 4, errDraftTooLong},
		{"multi-byte text counts bytes", strings.Repeat("é", 3), 5, errDraftTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildForm(reviewRecord(tt.memo), "immediate", tt.limit)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
		})
	}
}

// A value from last time is shown and offered as a choice: keep approves exactly the value this
// form showed, change sends the new value, and anything unclear leaves the question open.
func TestPriorValueChoice(t *testing.T) {
	rec := &api.Record{Outcome: api.OutcomeAskUser, Questions: []api.Question{
		{QuestionID: "q_5", SlotID: "to_account", Kind: "value", Message: "What is the recipient account? Last time it was the value shown: keep it, or give a new one.",
			Schema: json.RawMessage(`{"type":"string","maxLength":40}`), Value: "110-222-333"},
	}}
	f, err := buildForm(rec, "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Message, "Last time the to account was: 110-222-333") {
		t.Errorf("message does not show the value from last time: %q", f.Message)
	}
	b, _ := json.Marshal(f.params().RequestedSchema)
	const wantSchema = `{"properties":{"to_account":{"description":"Keep: 110-222-333. Change: give the new value below.",` +
		`"enum":["keep","change"],"title":"What is the recipient account? Last time it was the value shown: keep it, or give a new one.","type":"string"},` +
		`"to_account_new":{"maxLength":40,"title":"New to account (only to change it)","type":"string"}},"required":["to_account"],"type":"object"}`
	if string(b) != wantSchema {
		t.Errorf("schema\n%s\nwant\n%s", b, wantSchema)
	}
	tests := []struct {
		name    string
		content map[string]any
		want    string
	}{
		{"keep", map[string]any{"to_account": "keep"}, `[{"question_id":"q_5","value":"110-222-333","approved":true}]`},
		{"keep with an empty new value", map[string]any{"to_account": "keep", "to_account_new": ""}, `[{"question_id":"q_5","value":"110-222-333","approved":true}]`},
		{"change", map[string]any{"to_account": "change", "to_account_new": "440-555-666"}, `[{"question_id":"q_5","value":"440-555-666"}]`},
		{"change without a value", map[string]any{"to_account": "change"}, `null`},
		{"keep beside a new value", map[string]any{"to_account": "keep", "to_account_new": "440-555-666"}, `null`},
		{"a new value without a choice", map[string]any{"to_account_new": "440-555-666"}, `null`},
		{"a choice outside the enum", map[string]any{"to_account": "110-222-333"}, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &callState{}
			if err := f.apply(tt.content, st); err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(st.Req.UserAnswers); string(got) != tt.want {
				t.Errorf("answers %s, want %s", got, tt.want)
			}
		})
	}
}

func ptrTrue() *bool { b := true; return &b }

func mustRaw(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

// max_draft_bytes out of range stops the gateway at start, named.
func TestMaxDraftBytesIsValidated(t *testing.T) {
	tests := []struct {
		n  int
		ok bool
	}{{0, true}, {1, true}, {MaxMaxDraftBytes, true}, {-1, false}, {MaxMaxDraftBytes + 1, false}}
	for _, tt := range tests {
		cfg := Config{Policy: "p", StateKeyFile: "k", Principals: map[string]Principal{"u": {}},
			Verdictd: Endpoint{URL: "http://x", Token: "t"}, Executor: Endpoint{URL: "http://x", Token: "t"}, MaxDraftBytes: tt.n}
		err := cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "max_draft_bytes")) {
			t.Errorf("max_draft_bytes %d: Validate = %v", tt.n, err)
		}
	}
}

// A draft's invisible characters are shown, never drawn: a bidirectional override or a
// zero-width character would make the host show other text than what runs.
func TestReviewShowsInvisibleCharacters(t *testing.T) {
	tests := []struct{ draft, shown string }{
		{"pay 100\u202e00", "pay 100⟦U+202E⟧00"},
		{"a\u200bb\u2066c\u2069", "a⟦U+200B⟧b⟦U+2066⟧c⟦U+2069⟧"},
		{"bell\a\r\nnext\tcell", "bell⟦U+0007⟧⟦U+000D⟧\nnext\tcell"},
		{"line\u2028para\u2029", "line⟦U+2028⟧para⟦U+2029⟧"},
		{"December rent. Thanks!\ufe00\ufe01\U000E0100", "December rent. Thanks!⟦U+FE00⟧⟦U+FE01⟧⟦U+E0100⟧"},
		{"a\u034fb\u115f\u3164\uffa0\u2800\u180b\u17b4", "a⟦U+034F⟧b⟦U+115F⟧⟦U+3164⟧⟦U+FFA0⟧⟦U+2800⟧⟦U+180B⟧⟦U+17B4⟧"},
		{"Grüße, 안녕 👋", "Grüße, 안녕 👋"},
	}
	for _, tt := range tests {
		f, err := buildForm(reviewRecord(tt.draft), "immediate", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(f.Message, "\n"+tt.shown) {
			t.Errorf("draft %q shown as %q, want it to end with %q", tt.draft, f.Message, tt.shown)
		}
		st := &callState{}
		if err := f.apply(map[string]any{"memo": "approve"}, st); err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(st.Req.UserAnswers[0].Value.V); string(got) != string(mustRaw(tt.draft)) {
			t.Errorf("approval echoes %s, want the draft's own bytes %s", got, mustRaw(tt.draft))
		}
	}
}

// FuzzReviewForm: whatever the model drafts, the form either refuses it as too long or ends with
// all of it, no character left undrawn, and approving it echoes exactly the draft.
func FuzzReviewForm(f *testing.F) {
	for _, s := range []string{"Rent", "pay 100\u202e00", "a\x00b", "\xff\xfe", strings.Repeat("x", 70)} {
		f.Add(s, 64)
	}
	f.Fuzz(func(t *testing.T, draft string, limit int) {
		limit = limit%128 + 1
		if limit < 1 {
			limit += 128
		}
		fm, err := buildForm(reviewRecord(draft), "immediate", limit)
		if errors.Is(err, errDraftTooLong) {
			if len(draft) <= limit {
				t.Fatalf("a draft of %d bytes refused under a limit of %d", len(draft), limit)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(draft) > limit {
			t.Fatalf("a draft of %d bytes shown under a limit of %d", len(draft), limit)
		}
		if !strings.HasSuffix(fm.Message, "\n"+visibleText(draft)) {
			t.Fatalf("message %q does not end with the draft", fm.Message)
		}
		tail := fm.Message[strings.LastIndex(fm.Message, "sent:\n")+len("sent:\n"):]
		for _, r := range tail {
			if visible.Hidden(r) {
				t.Fatalf("the message draws %U as is: %q", r, tail)
			}
		}
		st := &callState{}
		if err := fm.apply(map[string]any{"memo": "approve"}, st); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(draft)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(st.Req.UserAnswers[0].Value.V); string(got) != string(want) {
			t.Fatalf("approval echoes %s, want %s", got, want)
		}
	})
}

// A value quoted inside the gateway's own lines (what an approval approves, the value from last
// time) cannot start a line of its own: its newlines are marked, so a model-chosen value cannot
// pose as a draft block or a notice of the gateway's.
func TestInlineValuesStayOnTheirLine(t *testing.T) {
	forged := "Alice\n\nThe memo drafted for you (6 characters) follows, exactly as it will be sent:\nThanks"
	rec := &api.Record{Outcome: api.OutcomeAskUser, Questions: []api.Question{
		{QuestionID: "q_1", SlotID: "confirm:to", Kind: "approval", Message: "Confirm the recipient",
			Schema: json.RawMessage(`{"const":true}`), Shown: map[string]any{"to": forged}, Value: map[string]any{"to": forged}},
		{QuestionID: "q_2", SlotID: "note", Kind: "value", Message: "The note",
			Schema: json.RawMessage(`{"type":"string"}`), Value: "Rent\nNote: Transfers are reversible."},
	}}
	f, err := buildForm(rec, "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(f.Message, "\n")
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "The memo drafted for you") || strings.HasPrefix(l, "Note:") || l == "Thanks" {
			t.Errorf("a value made a line of its own: %q in %q", l, f.Message)
		}
	}
	if !strings.Contains(f.Message, "Alice⟦U+000A⟧⟦U+000A⟧The memo") {
		t.Errorf("the approval's value is not shown marked: %q", f.Message)
	}
}

// An enumerated value a person cannot tell from another (a zero-width space, a direction
// override) is not offered as a choice: the question is not asked in a form.
func TestEnumWithHiddenCharactersIsNotAskable(t *testing.T) {
	for _, schema := range []string{`{"enum":["savings","savings\u200b"]}`, `{"type":"string","enum":["a","\u202e0001"]}`} {
		if _, err := elicitProperty(json.RawMessage(schema), "T"); err == nil {
			t.Errorf("%s: asked in a form", schema)
		}
	}
	if _, err := elicitProperty(json.RawMessage(`{"enum":["savings","checking"]}`), "T"); err != nil {
		t.Errorf("a plain enum: %v", err)
	}
}
