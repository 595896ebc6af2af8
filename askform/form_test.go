package askform

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

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

func TestBuildAndAnswers(t *testing.T) {
	f, err := Build(testRecord(), "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, fl := range f.fields {
		keys[fl.Key] = fl.Kind
	}
	want := map[string]string{"to_account": fieldValue, "amount": fieldValue, "confirm_to_account": fieldApproval, "details": fieldBranch}
	for k, kind := range want {
		if keys[k] != kind {
			t.Errorf("field %s: kind %q, want %q (fields %v)", k, keys[k], kind, keys)
		}
	}
	if !strings.Contains(f.message, "Transfers are final.") || !strings.Contains(f.message, "110-222-333") {
		t.Errorf("message lacks the notice or what is approved: %q", f.message)
	}
	b, _ := json.Marshal(f.Params())
	if strings.Contains(string(b), `"default"`) {
		t.Errorf("form carries a default: %s", b)
	}

	a, err := f.Answers(map[string]any{"to_account": "110-222-333", "amount": float64(1000), "confirm_to_account": true,
		"details": "account no, bank code"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(a.User)
	const wantAnswers = `[{"question_id":"q_1","value":"110-222-333"},{"question_id":"q_2","value":1000},` +
		`{"question_id":"q_3","value":"110-222-333","approved":true},{"question_id":"q_4","value":["account_no","bank_code"]}]`
	if string(got) != wantAnswers {
		t.Errorf("answers\n%s\nwant\n%s", got, wantAnswers)
	}
}

func TestAnswersRefuseWhatTheUserDidNotGive(t *testing.T) {
	f, _ := Build(testRecord(), "immediate", 0)
	for _, tc := range []struct {
		name    string
		content map[string]any
		want    error
	}{
		{"approval missing", map[string]any{"to_account": "x"}, ErrNotApproved},
		{"approval false", map[string]any{"confirm_to_account": false}, ErrNotApproved},
		{"approval as a string", map[string]any{"confirm_to_account": "true"}, ErrNotApproved},
	} {
		if _, err := f.Answers(tc.content); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := f.Answers(map[string]any{"amount": float64(1 << 60), "confirm_to_account": true}); err == nil {
		t.Error("an integer beyond 2^53 was accepted")
	}
}

// A restatement is the user's own words, trimmed; a timing counts only as one of the when
// cases. A form that asks twice (a restatement of the intent and one of the action) keeps every
// restatement in order, and the last timing picked.
func TestRestatementAndTiming(t *testing.T) {
	rec := &api.Record{Outcome: api.OutcomeAskUser, Questions: []api.Question{
		{QuestionID: "q_9", SlotID: slotActionName, Kind: "restate_intent", Message: "What would you like to do, and when?"},
	}}
	f, err := Build(rec, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.fields) != 2 {
		t.Fatalf("want the action and the timing asked, got %+v", f.fields)
	}
	if f.AsksApproval() {
		t.Error("a restatement asks for approval")
	}
	tests := []struct {
		name    string
		content map[string]any
		want    Answers
	}{
		{"both", map[string]any{"action": "  send money ", "when": "immediate"}, Answers{WhenCase: "immediate", Restatements: []string{"send money"}}},
		{"a timing outside the enum", map[string]any{"when": "tomorrow"}, Answers{}},
		{"blank", map[string]any{"action": " \t\n", "when": ""}, Answers{}},
		{"too long", map[string]any{"action": strings.Repeat("é", maxRestatement+1)}, Answers{}},
		{"at the bound", map[string]any{"action": strings.Repeat("é", maxRestatement)}, Answers{Restatements: []string{strings.Repeat("é", maxRestatement)}}},
		{"not text", map[string]any{"action": 12.0, "when": true}, Answers{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.Answers(tt.content)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("answers %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}

	rec.Questions = append(rec.Questions,
		api.Question{QuestionID: "q_10", SlotID: slotWhenCase, Kind: "restate_intent", Message: "When?"},
		api.Question{QuestionID: "q_11", SlotID: "x", Kind: "restate_action", Message: "What, again?"})
	f, err = Build(rec, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Answers(map[string]any{"action": "send money", "when": "scheduled", "when_2": "immediate", "action_2": "send it now"})
	want := Answers{WhenCase: "immediate", Restatements: []string{"send money", "send it now"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("answers %+v, %v; want %+v", got, err, want)
	}
	got, _ = f.Answers(map[string]any{"when": "scheduled", "when_2": "later"})
	if got.WhenCase != "scheduled" {
		t.Errorf("a timing outside the enum replaced the one picked: %+v", got)
	}
}

// A form that asks to approve something (an approval, a draft to review) is refused when
// declined; one that asks only for details is not.
func TestAsksApproval(t *testing.T) {
	tests := []struct {
		name string
		rec  *api.Record
		want bool
	}{
		{"values and an approval", testRecord(), true},
		{"a review", reviewRecord("Rent"), true},
		{"values only", &api.Record{Questions: testRecord().Questions[:2]}, false},
		{"a value from last time", &api.Record{Questions: []api.Question{{QuestionID: "q", SlotID: "to", Kind: "value",
			Schema: json.RawMessage(`{"type":"string"}`), Value: "x"}}}, false},
		{"a branch", &api.Record{Questions: testRecord().Questions[3:]}, false},
	}
	for _, tt := range tests {
		f, err := Build(tt.rec, "immediate", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.AsksApproval(); got != tt.want {
			t.Errorf("%s: asks approval %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBuildRefusesUnaskable(t *testing.T) {
	for _, q := range []api.Question{
		{Kind: "value", SlotID: "tags", Schema: json.RawMessage(`{"type":"array","items":{"type":"string"}}`)},
		{Kind: "approval", SlotID: "confirm:x"},
		{Kind: "branch", SlotID: "$branch"},
		{Kind: "something_new", SlotID: "x"},
	} {
		if _, err := Build(&api.Record{Questions: []api.Question{q}}, "immediate", 0); !errors.Is(err, ErrNotAskable) {
			t.Errorf("%s: %v, want not askable", q.Kind, err)
		}
	}
	if _, err := Build(&api.Record{}, "immediate", 0); !errors.Is(err, ErrNotAskable) {
		t.Errorf("a record without questions built a form")
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

func BenchmarkBuild(b *testing.B) {
	rec := testRecord()
	b.ReportAllocs()
	for b.Loop() {
		f, err := Build(rec, "immediate", 0)
		if err != nil {
			b.Fatal(err)
		}
		_ = f.Params()
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
	f, err := Build(reviewRecord(memo), "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(f.message, "\n"+memo) {
		t.Errorf("the message does not end with the whole draft: %q", f.message)
	}
	if i, j := strings.Index(f.message, "Note: Transfers are final."), strings.Index(f.message, memo); i < 0 || i > j {
		t.Errorf("the gateway's notice does not come before the draft: %q", f.message)
	}
	b, _ := json.Marshal(f.Params().RequestedSchema)
	const wantSchema = `{"properties":{"memo":{"description":"Approve the memo exactly as shown above (351 characters), or refuse it.",` +
		`"enum":["approve","refuse"],"title":"Please review the memo drafted for you.","type":"string"}},"required":["memo"],"type":"object"}`
	if string(b) != wantSchema {
		t.Errorf("schema\n%s\nwant\n%s", b, wantSchema)
	}
	a, err := f.Answers(map[string]any{"memo": "approve"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(a.User)
	want, _ := json.Marshal([]api.Answer{{QuestionID: "q_7", Approved: ptrTrue(), Value: api.Value{Set: true, V: mustRaw(memo)}}})
	if string(got) != string(want) {
		t.Errorf("answers %s, want %s", got, want)
	}
	for _, content := range []map[string]any{{"memo": "refuse"}, {}, {"memo": true}, {"memo": memo}} {
		if _, err := f.Answers(content); !errors.Is(err, ErrNotApproved) {
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
		{"past the default", strings.Repeat("a", DefaultMaxDraftBytes+1), 0, ErrDraftTooLong},
		{"past a configured limit", "12345", 4, ErrDraftTooLong},
		{"multi-byte text counts bytes", strings.Repeat("é", 3), 5, ErrDraftTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(reviewRecord(tt.memo), "immediate", tt.limit)
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
	f, err := Build(rec, "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.message, "Last time the to account was: 110-222-333") {
		t.Errorf("message does not show the value from last time: %q", f.message)
	}
	b, _ := json.Marshal(f.Params().RequestedSchema)
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
			a, err := f.Answers(tt.content)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(a.User); string(got) != tt.want {
				t.Errorf("answers %s, want %s", got, tt.want)
			}
		})
	}
}

func ptrTrue() *bool { b := true; return &b }

func mustRaw(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

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
		f, err := Build(reviewRecord(tt.draft), "immediate", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(f.message, "\n"+tt.shown) {
			t.Errorf("draft %q shown as %q, want it to end with %q", tt.draft, f.message, tt.shown)
		}
		a, err := f.Answers(map[string]any{"memo": "approve"})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(a.User[0].Value.V); string(got) != string(mustRaw(tt.draft)) {
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
		fm, err := Build(reviewRecord(draft), "immediate", limit)
		if errors.Is(err, ErrDraftTooLong) {
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
		if !strings.HasSuffix(fm.message, "\n"+visible.Text(draft)) {
			t.Fatalf("message %q does not end with the draft", fm.message)
		}
		tail := fm.message[strings.LastIndex(fm.message, "sent:\n")+len("sent:\n"):]
		for _, r := range tail {
			if visible.Hidden(r) {
				t.Fatalf("the message draws %U as is: %q", r, tail)
			}
		}
		a, err := fm.Answers(map[string]any{"memo": "approve"})
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(draft)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(a.User[0].Value.V); string(got) != string(want) {
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
	f, err := Build(rec, "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(f.message, "\n")
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "The memo drafted for you") || strings.HasPrefix(l, "Note:") || l == "Thanks" {
			t.Errorf("a value made a line of its own: %q in %q", l, f.message)
		}
	}
	if !strings.Contains(f.message, "Alice⟦U+000A⟧⟦U+000A⟧The memo") {
		t.Errorf("the approval's value is not shown marked: %q", f.message)
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
