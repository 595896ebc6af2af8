package mcpgate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/askform"
)

// A restatement typed into the form becomes a segment of the user's own, after the host's, and
// the action name points at all of it; the timing picked becomes the request's.
func TestRestatementBecomesAUserSegment(t *testing.T) {
	rec := &api.Record{Outcome: api.OutcomeAskUser, Questions: []api.Question{
		{QuestionID: "q_9", SlotID: "c2_user_action_name", Kind: "restate_intent", Message: "What would you like to do, and when?"},
	}}
	f, err := askform.Build(rec, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	st := &callState{Form: f, Req: api.Request{Instruction: api.Instruction{Segments: []api.Segment{{Text: "from the host", Trust: "user"}}}}}
	if err := st.answer(map[string]any{"action": "  send money ", "when": "immediate"}); err != nil {
		t.Fatal(err)
	}
	in := st.intent()
	if st.whenCase() != "immediate" || in.ActionName == nil || in.ActionName.Segment != 1 || in.ActionName.Span != [2]int{0, 10} {
		t.Errorf("intent %+v %+v", in, in.ActionName)
	}
	if s := st.Req.Instruction.Segments[1]; s.Text != "send money" || s.Trust != "user" || s.Origin != "mcpgate:elicitation" {
		t.Errorf("segment %+v", s)
	}
	st2 := &callState{Form: f}
	if err := st2.answer(map[string]any{"when": "tomorrow"}); err != nil {
		t.Fatal(err)
	}
	if st2.whenCase() != "" || st2.Req.Intent != nil {
		t.Errorf("a timing outside the enum was taken: %q", st2.whenCase())
	}
}

// Answers add to those of earlier rounds; an approval not given adds none.
func TestAnswersAddToEarlierRounds(t *testing.T) {
	rec := &api.Record{Outcome: api.OutcomeAskUser, Questions: []api.Question{
		{QuestionID: "q_2", SlotID: "amount", Kind: "value", Message: "How much?", Schema: json.RawMessage(`{"type":"integer"}`)},
		{QuestionID: "q_3", SlotID: "confirm:to", Kind: "approval", Message: "Confirm.", Shown: "x", Value: "x"},
	}}
	f, err := askform.Build(rec, "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	earlier := api.Answer{QuestionID: "q_1", Value: api.Value{Set: true, V: json.RawMessage(`"110-222-333"`)}}
	st := &callState{Form: f, Req: api.Request{UserAnswers: []api.Answer{earlier}}}
	if err := st.answer(map[string]any{"amount": float64(12), "confirm_to": true}); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st.Req.UserAnswers)
	const want = `[{"question_id":"q_1","value":"110-222-333"},{"question_id":"q_2","value":12},{"question_id":"q_3","value":"x","approved":true}]`
	if string(got) != want {
		t.Errorf("answers %s, want %s", got, want)
	}
	st = &callState{Form: f, Req: api.Request{UserAnswers: []api.Answer{earlier}}}
	if err := st.answer(map[string]any{"amount": float64(12), "confirm_to": false}); err == nil || len(st.Req.UserAnswers) != 1 {
		t.Errorf("an approval not given: %v, answers %+v", err, st.Req.UserAnswers)
	}
}

// A declined form is the user's refusal when it asked for approval, details left missing
// otherwise; either way the reason is declined and nothing ran.
func TestDeclined(t *testing.T) {
	value := api.Question{QuestionID: "q_1", SlotID: "amount", Kind: "value", Message: "How much?", Schema: json.RawMessage(`{"type":"integer"}`)}
	approval := api.Question{QuestionID: "q_2", SlotID: "confirm:to", Kind: "approval", Message: "Confirm.", Shown: "x", Value: "x"}
	tests := []struct {
		name string
		qs   []api.Question
		want string
	}{
		{"details", []api.Question{value}, "You did not provide the details needed." + nothingDone},
		{"an approval", []api.Question{value, approval}, "You did not approve the request." + nothingDone},
	}
	for _, tt := range tests {
		f, err := askform.Build(&api.Record{Questions: tt.qs}, "immediate", 0)
		if err != nil {
			t.Fatal(err)
		}
		res := declined(f)
		if !res.IsError || res.Meta[api.MetaReason] != api.ReasonDeclined || res.Content[0].(*mcp.TextContent).Text != tt.want {
			t.Errorf("%s: %+v", tt.name, res)
		}
	}
}

// max_draft_bytes out of range stops the gateway at start, named.
func TestMaxDraftBytesIsValidated(t *testing.T) {
	tests := []struct {
		n  int
		ok bool
	}{{0, true}, {1, true}, {askform.MaxMaxDraftBytes, true}, {-1, false}, {askform.MaxMaxDraftBytes + 1, false}}
	for _, tt := range tests {
		cfg := Config{Policy: "p", StateKeyFile: "k", Principals: map[string]Principal{"u": {}},
			Verdictd: Endpoint{URL: "http://x", Token: "t"}, Executor: Endpoint{URL: "http://x", Token: "t"}, MaxDraftBytes: tt.n}
		err := cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "max_draft_bytes")) {
			t.Errorf("max_draft_bytes %d: Validate = %v", tt.n, err)
		}
	}
}
