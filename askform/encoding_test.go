package askform

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// everyKindRecord asks a question of every kind a form has a field for: a value, a value from
// last time (a choice and an optional new value), a draft to review, an approval, a branch, a
// restatement and a timing, with text a host would not draw and text JSON escapes.
func everyKindRecord() *api.Record {
	return &api.Record{
		Outcome: api.OutcomeAskUser,
		Notices: []string{"Transfers are final <today> & \u200bnow."},
		Questions: []api.Question{
			{QuestionID: "q_1", SlotID: "to_account", Kind: "value", Message: "Which account?",
				Schema: json.RawMessage(`{"type":"string","minLength":1,"maxLength":64,"format":"email","default":"x"}`)},
			{QuestionID: "q_2", SlotID: "amount", Kind: "value", Message: "How much?",
				Schema: json.RawMessage(`{"type":"integer","minimum":1,"maximum":5000}`), Value: 1000.5},
			{QuestionID: "q_3", SlotID: "memo", Kind: api.QuestionReviewDraft, Message: "Please review the memo.",
				Shown: "Rent\u202e for <Dec>", Value: "Rent\u202e for <Dec>"},
			{QuestionID: "q_4", SlotID: "confirm:to_account", Kind: "approval", Message: "Please confirm.",
				Shown: map[string]any{"to_account": "110-222-333", "note": "a\nb"}, Value: map[string]any{"to_account": "110-222-333"}},
			{QuestionID: "q_5", SlotID: "$branch", Kind: "branch", Message: "Which of these?", Options: [][]string{{"iban"}, {"account_no", "bank_code"}}},
			{QuestionID: "q_6", SlotID: slotActionName, Kind: "restate_intent", Message: "What would you like to do?"},
			{QuestionID: "q_7", SlotID: slotWhenCase, Kind: "restate_intent", Message: "When?"},
			{QuestionID: "q_8", SlotID: "x", Kind: "restate_action", Message: "Say it again?"},
			{QuestionID: "q_9", SlotID: "color", Kind: "value", Message: "Color?", Schema: json.RawMessage(`{"enum":["red","blue"]}`)},
		},
	}
}

// TestStoredEncoding: a form waiting for its answers is kept in its JSON encoding, so the
// encoding is fixed: a continuation stored by an earlier version must still decode to the form
// it showed, and take the same answers. testdata/form.json holds the bytes of a form with a
// field of every kind.
func TestStoredEncoding(t *testing.T) {
	golden, err := os.ReadFile("testdata/form.json")
	if err != nil {
		t.Fatal(err)
	}
	golden = []byte(strings.TrimSuffix(string(golden), "\n"))
	f, err := Build(everyKindRecord(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, fl := range f.fields {
		kinds[fl.Kind] = true
	}
	for _, k := range []string{fieldValue, fieldApproval, fieldBranch, fieldWhenCase, fieldRestatement, fieldReview, fieldPrior} {
		if !kinds[k] {
			t.Errorf("the form has no field of kind %q", k)
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(golden) {
		t.Fatalf("encoded\n%s\nwant\n%s", b, golden)
	}
	// As a member of the continuation, and by value.
	wrapped, _ := json.Marshal(struct {
		Form *Form `json:"form"`
	}{f})
	if string(wrapped) != `{"form":`+string(golden)+`}` {
		t.Errorf("encoded in a continuation\n%s", wrapped)
	}
	if byValue, _ := json.Marshal(*f); string(byValue) != string(golden) {
		t.Errorf("encoded by value\n%s", byValue)
	}

	var got *Form
	if err := json.Unmarshal(golden, &got); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(got); string(again) != string(golden) {
		t.Errorf("decoded and encoded again\n%s\nwant\n%s", again, golden)
	}
	want, _ := json.Marshal(f.Params())
	if shown, _ := json.Marshal(got.Params()); string(shown) != string(want) {
		t.Errorf("the decoded form asks\n%s\nwant\n%s", shown, want)
	}
	content := map[string]any{"to_account": "a@example.com", "amount": "keep", "memo": "approve", "confirm_to_account": true,
		"details": "iban", "action": "pay the rent", "when": "immediate", "action_2": "  pay it now ", "color": "red"}
	wantAnswers, err := f.Answers(content)
	if err != nil {
		t.Fatal(err)
	}
	gotAnswers, err := got.Answers(content)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotAnswers, wantAnswers) {
		t.Errorf("the decoded form reads %+v, want %+v", gotAnswers, wantAnswers)
	}
	if len(gotAnswers.User) != 6 || gotAnswers.WhenCase != "immediate" ||
		!reflect.DeepEqual(gotAnswers.Restatements, []string{"pay the rent", "pay it now"}) {
		t.Errorf("answers %+v", gotAnswers)
	}
}
