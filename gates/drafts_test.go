package gates

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
	"pgregory.net/rapid"
)

// draftTool is a payment with a drafted memo: the account and amount must exist outside the
// model, the memo is the model's text on purpose.
var draftTool = Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object",
	"properties":{
		"to_account":{"type":"string","title":"Recipient account"},
		"amount":{"type":"integer","minimum":1},
		"memo":{"type":"string","title":"Memo","maxLength":400}},
	"required":["to_account","amount","memo"]}`)}

const draftPolicy = `
policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [b]}}}
tools:
  bank/pay:
    actions: ["pay"]
    when_cases: [immediate]
    fields:
      to_account: {allowed_sources: [user_answer, instruction]}
      amount: {allowed_sources: [user_answer, instruction]}
    drafted: [memo]
    conditions:
      - {id: no_links, expr: "!args.memo.contains('http')"}
`

// draftT is what the helpers below need of a test: a *testing.T or a *rapid.T.
type draftT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// draftRun is one preflight of a conversation against the drafted payment.
type draftRun struct {
	t   draftT
	st  *MemState
	eng *Engine
	pol string
	def Tool
	// console are the console decisions each run is given (console_test.go).
	console []ConsoleDecision
}

func newDraftRun(t draftT, pol string, def Tool) *draftRun {
	t.Helper()
	st := NewMemState()
	eng, err := New(Config{State: st, IDs: &seqIDs{}, Evaluator: mustCEL(t)})
	if err != nil {
		t.Fatal(err)
	}
	return &draftRun{t: t, st: st, eng: eng, pol: pol, def: def}
}

func mustCEL(t draftT) Evaluator {
	t.Helper()
	ev, err := NewCELEvaluator()
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// payRequest is "pay 900 to 110-222-333" with the amount and account pointed at in the user's
// words, and the memo the model drafted; answers are appended as given.
func payRequest(memo any, answers ...map[string]any) string {
	text := "pay 900 to 110-222-333"
	req := map[string]any{
		"principal": "u", "server": "bank", "tool": "pay", "conversation_id": "c1",
		"instruction": []any{map[string]any{"text": text, "trust": "user"}},
		"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 3}}},
		"candidates": []any{
			map[string]any{"field": "amount", "segment": 0, "span": []int{4, 7}, "value": 900},
			map[string]any{"field": "to_account", "segment": 0, "span": []int{11, 22}, "value": "110-222-333"},
		},
	}
	if memo != nil {
		req["candidates"] = append(req["candidates"].([]any), map[string]any{"field": "memo", "value": memo})
	}
	if len(answers) > 0 {
		req["user_answers"] = answers
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func (d *draftRun) run(body string) *api.Record {
	d.t.Helper()
	pol, err := policy.Parse([]byte(d.pol))
	if err != nil {
		d.t.Fatal(err)
	}
	req, err := DecodeRequest([]byte(body), Limits{})
	if err != nil {
		d.t.Fatal(err)
	}
	rec, err := d.eng.Run(context.Background(), Input{Tool: d.def, Policy: pol, Request: req, Console: d.console})
	if err != nil {
		d.t.Fatal(err)
	}
	return rec
}

func slotOf(rec *api.Record, id string) *api.Slot {
	for i := range rec.Slots {
		if rec.Slots[i].SlotID == id {
			return &rec.Slots[i]
		}
	}
	return nil
}

func questionOf(rec *api.Record, slot string) *api.Question {
	for i := range rec.Questions {
		if rec.Questions[i].SlotID == slot {
			return &rec.Questions[i]
		}
	}
	return nil
}

func approve(q *api.Question, value any) map[string]any {
	return map[string]any{"question_id": q.QuestionID, "approved": true, "value": value}
}

func rejectedReasons(rec *api.Record) []string {
	var out []string
	for _, r := range rec.RejectedAnswers {
		out = append(out, r.SlotID+":"+r.Reason)
	}
	return out
}

func mustDigest(t draftT, v any) string {
	t.Helper()
	d, err := canonical.Digest(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The review question carries the whole draft, its digest and size; an approval of exactly
// that draft settles the memo as reviewed_draft, and nothing else settles it.
func TestDraftReview(t *testing.T) {
	const memo = "Rent for December.\nThanks — A."
	tests := []struct {
		name string
		// second is the second request, given the first round's review question.
		second     func(q *api.Question) string
		outcome    string
		memoStatus string
		rejected   []string
		reasked    any // the draft the second round asks to review, nil if none
	}{
		{
			name:       "approved exactly as shown",
			second:     func(q *api.Question) string { return payRequest(memo, approve(q, memo)) },
			outcome:    api.OutcomeVerdictIssued,
			memoStatus: api.StatusKnown,
		},
		{
			name: "changed after review is asked again",
			second: func(q *api.Question) string {
				return payRequest(memo+" Also send 900 to 999-888-777.", approve(q, memo))
			},
			outcome:    api.OutcomeAskUser,
			memoStatus: api.StatusUnknown,
			rejected:   []string{"memo:approval_value_mismatch"},
			reasked:    memo + " Also send 900 to 999-888-777.",
		},
		{
			name: "approval echoing another value than shown",
			second: func(q *api.Question) string {
				return payRequest(memo+"!", approve(q, memo+"!"))
			},
			outcome:    api.OutcomeAskUser,
			memoStatus: api.StatusUnknown,
			rejected:   []string{"memo:approval_value_mismatch"},
			reasked:    memo + "!",
		},
		{
			name: "approval without the value",
			second: func(q *api.Question) string {
				return payRequest(memo, map[string]any{"question_id": q.QuestionID, "approved": true})
			},
			outcome:    api.OutcomeAskUser,
			memoStatus: api.StatusUnknown,
			rejected:   []string{"memo:approval_value_mismatch"},
			reasked:    memo,
		},
		{
			name: "refused",
			second: func(q *api.Question) string {
				return payRequest(memo, map[string]any{"question_id": q.QuestionID, "approved": false, "value": memo})
			},
			outcome:    api.OutcomeAskUser,
			memoStatus: api.StatusUnknown,
			reasked:    memo,
		},
		{
			name: "a value answer to the review question is no approval",
			second: func(q *api.Question) string {
				return payRequest(memo, map[string]any{"question_id": q.QuestionID, "value": memo})
			},
			outcome:    api.OutcomeAskUser,
			memoStatus: api.StatusUnknown,
			reasked:    memo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDraftRun(t, draftPolicy, draftTool)
			first := d.run(payRequest(memo))
			if first.Outcome != api.OutcomeAskUser || len(first.Questions) != 1 {
				t.Fatalf("first round: outcome %s, questions %+v", first.Outcome, first.Questions)
			}
			q := &first.Questions[0]
			want := api.DraftRef{Digest: mustDigest(t, memo), Bytes: len(mustCanonical(t, memo))}
			if q.Kind != api.QuestionReviewDraft || q.SlotID != "memo" || q.Value != memo || q.Shown != memo ||
				q.Draft == nil || *q.Draft != want || string(q.Schema) != `{"const":true}` {
				t.Fatalf("review question = %+v", q)
			}
			if !strings.Contains(q.Message, "memo") {
				t.Errorf("review message %q does not name what is reviewed", q.Message)
			}
			if s := slotOf(first, "memo"); s.Status != api.StatusUnknown || s.Draft == nil || *s.Draft != want ||
				!slices.Equal(s.AllowedSources, []api.Source{api.SourceReviewedDraft, api.SourceUserAnswer}) {
				t.Fatalf("memo slot before review = %+v", s)
			}

			rec := d.run(tt.second(q))
			checkRecordSchema(t, first)
			checkRecordSchema(t, rec)
			if rec.Outcome != tt.outcome {
				t.Fatalf("outcome %s, want %s; slots %+v", rec.Outcome, tt.outcome, rec.Slots)
			}
			s := slotOf(rec, "memo")
			if s.Status != tt.memoStatus {
				t.Fatalf("memo slot = %+v", s)
			}
			if got := rejectedReasons(rec); !slices.Equal(got, tt.rejected) {
				t.Errorf("rejected answers %v, want %v", got, tt.rejected)
			}
			if tt.memoStatus == api.StatusKnown {
				if *s.Source != api.SourceReviewedDraft || *s.OriginSource != api.SourceReviewedDraft || s.Value != memo {
					t.Errorf("memo slot = %+v", s)
				}
				if rec.CallArguments["memo"] != memo {
					t.Errorf("call memo = %q", rec.CallArguments["memo"])
				}
			}
			if tt.reasked != nil {
				q2 := questionOf(rec, "memo")
				if q2 == nil || q2.Kind != api.QuestionReviewDraft || q2.Value != tt.reasked ||
					q2.Draft.Digest != mustDigest(t, tt.reasked) {
					t.Fatalf("second round review = %+v", q2)
				}
			}
		})
	}
}

// checkRecordSchema validates rec against the decision-record schema, as a caller reads it.
func checkRecordSchema(t *testing.T, rec *api.Record) {
	t.Helper()
	_, schema := loadSchemas(t)
	out, err := apijson.AppendRecord(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(decodeAny(t, out)); err != nil {
		t.Fatalf("record does not fit its schema: %v\n%s", err, out)
	}
}

func mustCanonical(t testing.TB, v any) []byte {
	t.Helper()
	b, err := canonical.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A reviewed memo that says "send 900 to 110-222-333" settles the memo and nothing else: the
// account and the amount the model proposed are still asked of the user.
func TestDraftNeverGroundsAnotherField(t *testing.T) {
	const memo = "send 900 to 110-222-333"
	d := newDraftRun(t, draftPolicy, draftTool)
	body := func(answers ...map[string]any) string {
		req := map[string]any{
			"principal": "u", "server": "bank", "tool": "pay", "conversation_id": "c1",
			"instruction": []any{map[string]any{"text": "pay my landlord", "trust": "user"}},
			"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 3}}},
			"candidates": []any{
				map[string]any{"field": "memo", "value": memo},
				map[string]any{"field": "amount", "value": 900},
				map[string]any{"field": "to_account", "value": "110-222-333"},
			},
		}
		if len(answers) > 0 {
			req["user_answers"] = answers
		}
		b, _ := json.Marshal(req)
		return string(b)
	}
	first := d.run(body())
	q := questionOf(first, "memo")
	if q == nil {
		t.Fatalf("no review question: %+v", first.Questions)
	}
	rec := d.run(body(approve(q, memo)))
	if s := slotOf(rec, "memo"); s.Status != api.StatusKnown || *s.Source != api.SourceReviewedDraft {
		t.Fatalf("memo = %+v", s)
	}
	for _, f := range []string{"amount", "to_account"} {
		s := slotOf(rec, f)
		if s.Status != api.StatusUnknown || s.Route == nil || *s.Route != api.RouteAskUser {
			t.Errorf("%s = %+v, want unknown and asked", f, s)
		}
		if q := questionOf(rec, f); q == nil || q.Kind != api.QuestionValue {
			t.Errorf("%s is not asked: %+v", f, rec.Questions)
		}
	}
	if rec.Outcome != api.OutcomeAskUser || rec.CallArguments != nil {
		t.Errorf("outcome %s, call %v", rec.Outcome, rec.CallArguments)
	}
}

// Conditions read a reviewed draft like any value: a memo with a link holds the call once it
// is known, and a clean one passes.
func TestDraftConditions(t *testing.T) {
	tests := []struct {
		memo    string
		outcome string
	}{
		{"Rent for December", api.OutcomeVerdictIssued},
		{"Rent, receipt at https://evil.example/x", api.OutcomeHold},
	}
	for _, tt := range tests {
		t.Run(tt.memo, func(t *testing.T) {
			d := newDraftRun(t, draftPolicy, draftTool)
			q := questionOf(d.run(payRequest(tt.memo)), "memo")
			rec := d.run(payRequest(tt.memo, approve(q, tt.memo)))
			if rec.Outcome != tt.outcome {
				t.Fatalf("outcome %s, want %s (unmet %+v)", rec.Outcome, tt.outcome, rec.Unmet)
			}
			if tt.outcome == api.OutcomeHold && (len(rec.Unmet) != 1 || rec.Unmet[0].SlotID != "no_links") {
				t.Errorf("unmet = %+v", rec.Unmet)
			}
		})
	}
}

// A model that proposed no draft leaves the user to write the content: a value question, whose
// answer is the user's own.
func TestDraftNotProposedIsAsked(t *testing.T) {
	d := newDraftRun(t, draftPolicy, draftTool)
	first := d.run(payRequest(nil))
	q := questionOf(first, "memo")
	if q == nil || q.Kind != api.QuestionValue || slotOf(first, "memo").Note != "no draft proposed" {
		t.Fatalf("memo question = %+v, slot %+v", q, slotOf(first, "memo"))
	}
	rec := d.run(payRequest(nil, map[string]any{"question_id": q.QuestionID, "value": "Rent"}))
	if s := slotOf(rec, "memo"); s.Status != api.StatusKnown || *s.Source != api.SourceUserAnswer || s.Draft != nil {
		t.Fatalf("memo = %+v", s)
	}
	if rec.Outcome != api.OutcomeVerdictIssued {
		t.Errorf("outcome %s", rec.Outcome)
	}
}

// A drafted field the tool does not declare, or one its [Required] label claims, is a policy
// mismatch: the run is repaired, never run with the marking ignored.
func TestDraftPolicyMismatch(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		tool   Tool
		detail string
	}{
		{
			name:   "not an argument",
			policy: strings.Replace(draftPolicy, "drafted: [memo]", "drafted: [mem0]", 1),
			tool:   draftTool,
			detail: `drafted mem0 names no argument of the tool (did you mean "memo"?)`,
		},
		{
			name:   "required label",
			policy: draftPolicy,
			tool:   Tool{Name: "pay", Description: "Pay.\n[Required] memo", InputSchema: draftTool.InputSchema},
			detail: "drafted memo is [Required] by the tool",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newDraftRun(t, tt.policy, tt.tool).run(payRequest("Rent"))
			if rec.Outcome != api.OutcomeDefinitionRepair || rec.Gate.Kind != api.GatePolicyMismatch ||
				!strings.Contains(rec.Gate.Detail, tt.detail) {
				t.Fatalf("outcome %s, gate %+v", rec.Outcome, rec.Gate)
			}
		})
	}
}

// draftPolicyHidden is draftPolicy with the memo's hidden characters allowed: shown marked.
var draftPolicyHidden = strings.Replace(draftPolicy, "    drafted: [memo]\n",
	"      memo: {allow_hidden_characters: true}\n    drafted: [memo]\n", 1)

// No approval of any value other than the draft makes the drafted slot known, whatever the
// draft and the approved value are.
func TestDraftOnlyItsOwnApprovalSettlesIt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		memo := rapid.StringN(0, 40, -1).Draw(t, "memo")
		other := rapid.StringN(0, 40, -1).Draw(t, "other")
		if other == memo {
			other += "x"
		}
		d := newDraftRun(t, draftPolicyHidden, draftTool)
		q := questionOf(d.run(payRequest(memo)), "memo")
		if q == nil {
			t.Fatalf("no review question for %q", memo)
		}
		// The approval echoes another value: either with the draft left as it was, or with the
		// draft changed to that value after the question was shown.
		changed := rapid.Bool().Draw(t, "changed")
		draftNow := memo
		if changed {
			draftNow = other
		}
		rec := d.run(payRequest(draftNow, approve(q, other)))
		if s := slotOf(rec, "memo"); s.Status == api.StatusKnown {
			t.Fatalf("memo %q settled by an approval of %q (draft now %q): %+v", memo, other, draftNow, s)
		}
		if rec.Outcome == api.OutcomeVerdictIssued {
			t.Fatalf("verdict issued")
		}
	})
}

// An export with the default mask hides a draft wherever a record carries it (the question, the
// slot, the call, the deferred input), and keeps its digest and size.
func TestDraftMaskedInExports(t *testing.T) {
	const memo = "Rent for December, flat 3B"
	d := newDraftRun(t, draftPolicy, draftTool)
	first := d.run(payRequest(memo))
	rec := d.run(payRequest(memo, approve(questionOf(first, "memo"), memo)))
	for _, r := range []*api.Record{first, rec} {
		out, err := apijson.AppendRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		masked, err := store.DefaultMask().Mask(out)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(masked, []byte("flat 3B")) {
			t.Errorf("masked export shows the draft: %s", masked)
		}
		if !bytes.Contains(masked, []byte(mustDigest(t, memo))) {
			t.Errorf("masked export lost the draft's digest: %s", masked)
		}
	}
}

// A draft that holds a character a person does not see is never shown for review, nor settled
// by any approval, unless its field's policy allows it; allowed, it is reviewed as any draft.
func TestDraftHiddenCharacters(t *testing.T) {
	hidden := []rune{0xFE00, 0xFE0F, 0xE0100, 0xE01EF, 0x200B, 0x200C, 0x2060, 0x202E, 0x2066, 0x034F,
		0x115F, 0x3164, 0xFFA0, 0x180B, 0x17B4, 0x00AD, 0xE0041, 0x2800, 0xE000, 0x0378, '\r', 0x7F}
	rapid.Check(t, func(t *rapid.T) {
		words := rapid.StringOfN(rapid.RuneFrom([]rune("December rent. Thanks!\n\t é日👩💻")), 1, 30, -1).Draw(t, "words")
		runes := []rune(words)
		at := rapid.IntRange(0, len(runes)).Draw(t, "at")
		payload := string(rapid.SliceOfN(rapid.SampledFrom(hidden), 1, 45).Draw(t, "payload"))
		memo := string(runes[:at]) + payload + string(runes[at:])

		d := newDraftRun(t, draftPolicy, draftTool)
		rec := d.run(payRequest(memo))
		if q := questionOf(rec, "memo"); q != nil || rec.Outcome != api.OutcomeHold {
			t.Fatalf("memo %q: outcome %s, question %+v", memo, rec.Outcome, q)
		}
		if len(rec.Unmet) != 1 || rec.Unmet[0].SlotID != "memo" || rec.Unmet[0].Reason != api.UnmetDraftHiddenCharacters {
			t.Fatalf("memo %q: unmet %+v", memo, rec.Unmet)
		}
		// An approval echoing the draft exactly settles nothing either.
		fake := map[string]any{"question_id": "q_memo", "approved": true, "value": memo}
		if rec := d.run(payRequest(memo, fake)); rec.Outcome == api.OutcomeVerdictIssued || slotOf(rec, "memo").Status == api.StatusKnown {
			t.Fatalf("memo %q settled: %s", memo, rec.Outcome)
		}

		allowed := newDraftRun(t, draftPolicyHidden, draftTool)
		first := allowed.run(payRequest(memo))
		q := questionOf(first, "memo")
		if q == nil || q.Kind != api.QuestionReviewDraft {
			t.Fatalf("memo %q allowed: no review question, outcome %s, unmet %+v", memo, first.Outcome, first.Unmet)
		}
		if rec := allowed.run(payRequest(memo, approve(q, memo))); rec.Outcome != api.OutcomeVerdictIssued {
			t.Fatalf("memo %q allowed and approved: outcome %s, unmet %+v", memo, rec.Outcome, rec.Unmet)
		}
	})
}

// A zero width joiner inside an emoji sequence is part of the picture: such a draft is reviewed.
func TestDraftEmojiJoiner(t *testing.T) {
	d := newDraftRun(t, draftPolicy, draftTool)
	memo := "Thanks from the whole family 👨\u200d👩\u200d👧 and the coder 👩\u200d💻"
	if q := questionOf(d.run(payRequest(memo)), "memo"); q == nil || q.Kind != api.QuestionReviewDraft {
		t.Fatalf("no review question for %q", memo)
	}
	for _, memo := range []string{"Thanks\u200d!", "Thanks 👩\u200d", "heart ❤\ufe0f"} {
		if rec := d.run(payRequest(memo)); rec.Outcome != api.OutcomeHold {
			t.Errorf("memo %q: outcome %s", memo, rec.Outcome)
		}
	}
}
