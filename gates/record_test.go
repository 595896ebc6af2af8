package gates

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// member returns the raw JSON at path in the object doc (names and array indexes joined by
// dots), and whether it is there.
func member(t *testing.T, doc []byte, path string) (jsontext.Value, bool) {
	t.Helper()
	v := jsontext.Value(doc)
	for _, step := range strings.Split(path, ".") {
		switch v.Kind() {
		case '{':
			var m map[string]jsontext.Value
			if err := jsonv2.Unmarshal(v, &m); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			var ok bool
			if v, ok = m[step]; !ok {
				return nil, false
			}
		case '[':
			var a []jsontext.Value
			if err := jsonv2.Unmarshal(v, &a); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			i, err := strconv.Atoi(step)
			if err != nil || i >= len(a) {
				return nil, false
			}
			v = a[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// absent marks a member that must not be written.
const absent = "<absent>"

// TestRecordWire pins the record's JSON where the struct tags and apijson's record options decide it: null
// against absent against [], the Gate-1 attempts, json.Number values, map order, floats and
// strings. Each want is the member's exact bytes.
func TestRecordWire(t *testing.T) {
	str := func(s string) *string { return &s }
	n := func(i int) *int { return &i }
	no := false
	user := api.Source("user")
	for _, c := range []struct {
		name string
		rec  *api.Record
		want map[string]string
	}{{
		name: "zero",
		rec:  &api.Record{},
		want: map[string]string{
			// No count made, no run finished: null, never [] or {}.
			"action_key": "null", "phase": "null", "tool_schema_digest": "null", "fixed": "null",
			"slots": "null", "extra_fields": "null", "user_checklist": "null", "unknown_count": "null",
			"unmet": "null", "ask_ceiling_reached": "null", "questions": "null", "rejected_answers": "null",
			"notices": "null", "call_arguments": "null", "arguments_digest": "null", "verdict": "null",
			"verdict_id": "null", "advisory_notes": `""`, "instruction_plain_string": "false", "timestamp": `""`,
			"conversation_id": absent, "measurement_errors": absent, "deferred_input": absent,
			"gate": `{"kind":""}`,
		},
	}, {
		name: "counted",
		rec: &api.Record{Slots: []api.Slot{}, ExtraFields: []api.ExtraField{}, UserChecklist: []api.CheckResult{}, UnknownCount: n(0),
			Unmet: []api.Unmet{}, AskCeiling: []string{}, Questions: []api.Question{}, RejectedAnswers: []api.RejectedAns{},
			Notices: []string{}, MeasurementErrs: []api.MeasureError{}, CallArguments: map[string]any{}},
		want: map[string]string{
			"slots": "[]", "extra_fields": "[]", "user_checklist": "[]", "unknown_count": "0", "unmet": "[]",
			"ask_ceiling_reached": "[]", "questions": "[]", "rejected_answers": "[]", "notices": "[]",
			"call_arguments": "{}", "measurement_errors": absent,
		},
	}, {
		name: "gate intent_undetermined",
		rec:  &api.Record{Gate: api.Gate{Kind: api.GateIntentUndetermined, NextIntentAttempt: &api.NextIntentAttempt{Attempt: n(2)}}},
		want: map[string]string{"gate.next_intent_attempt": "2", "gate.next_tool_attempt": absent,
			"gate.user_message": absent, "gate.branch_options": absent, "gate.detail": absent, "gate._diag": absent},
	}, {
		name: "gate intent_undetermined_exhausted",
		rec:  &api.Record{Gate: api.Gate{Kind: api.GateIntentUndeterminedExhausted, NextIntentAttempt: &api.NextIntentAttempt{}}},
		want: map[string]string{"gate.next_intent_attempt": "null", "gate.next_tool_attempt": absent},
	}, {
		name: "gate tool_undetermined",
		rec: &api.Record{Gate: api.Gate{Kind: api.GateToolUndetermined, UserMessage: "which tool?",
			NextToolAttempt: &api.NextToolAttempt{Attempt: n(1)}}},
		want: map[string]string{"gate.next_tool_attempt": "1", "gate.next_intent_attempt": absent,
			"gate.user_message": `"which tool?"`},
	}, {
		// A question's schema is written whenever it is set, {} (anything goes) included:
		// only a question without one leaves the member out.
		name: "question schemas",
		rec: &api.Record{Questions: []api.Question{{QuestionID: "q1", Schema: json.RawMessage(`{}`)},
			{QuestionID: "q2", Schema: json.RawMessage(`[]`)}, {QuestionID: "q3"}}},
		want: map[string]string{"questions.0.schema": "{}", "questions.1.schema": "[]", "questions.2.schema": absent},
	}, {
		name: "gate tool_undetermined_exhausted",
		rec:  &api.Record{Gate: api.Gate{Kind: api.GateToolUndeterminedExhausted, NextToolAttempt: &api.NextToolAttempt{}}},
		want: map[string]string{"gate.next_tool_attempt": "null", "gate.next_intent_attempt": absent},
	}, {
		name: "gate value_gate",
		rec:  &api.Record{Gate: api.Gate{Kind: api.GateValue, Diag: map[string]any{}}},
		want: map[string]string{"gate": `{"kind":"value_gate"}`},
	}, {
		name: "gate branch_conflict",
		rec: &api.Record{Gate: api.Gate{Kind: api.GateBranchConflict, BranchOptions: [][]string{{"isbn"}, {"title", "author"}},
			Detail: "d", Diag: map[string]any{"matched": []int{0, 1}, "issues": []map[string]any(nil)}}},
		want: map[string]string{"gate.branch_options": `[["isbn"],["title","author"]]`, "gate.detail": `"d"`,
			"gate._diag": `{"issues":null,"matched":[0,1]}`, "gate.next_intent_attempt": absent},
	}, {
		name: "numbers",
		rec: &api.Record{CallArguments: map[string]any{
			"amount": json.Number("500000"), "big": json.Number("123456789012345678901234567890"),
			"exp": json.Number("-12.50e+3"), "zero": json.Number(""), "int": 7, "int64": int64(-8),
			"f1": 1.5e-7, "f2": 1e21, "f3": 123456789.0, "f4": 0.1, "f5": math.Copysign(0, -1), "f6": 1e20,
			"list": []any{json.Number("1.0"), 2.5, nil, true},
		}},
		want: map[string]string{
			"call_arguments.amount": "500000", "call_arguments.big": "123456789012345678901234567890",
			"call_arguments.exp": "-12.50e+3", "call_arguments.zero": "0", "call_arguments.int": "7",
			"call_arguments.int64": "-8", "call_arguments.f1": "1.5e-7", "call_arguments.f2": "1e+21",
			"call_arguments.f3": "123456789", "call_arguments.f4": "0.1", "call_arguments.f5": "-0",
			"call_arguments.f6": "100000000000000000000", "call_arguments.list": "[1.0,2.5,null,true]",
		},
	}, {
		name: "maps sorted",
		rec: &api.Record{CallArguments: map[string]any{"b": "x", "a": map[string]any{"z": 1, "y": map[string]any(nil)},
			"c": []any(nil)}},
		want: map[string]string{"call_arguments": `{"a":{"y":null,"z":1},"b":"x","c":null}`},
	}, {
		name: "strings",
		rec:  &api.Record{RecordID: "a\xffb", Principal: "<&>\u2028\"\\\n\x01"},
		// Invalid UTF-8 becomes U+FFFD; HTML characters and U+2028 are written as they are.
		want: map[string]string{"record_id": "\"a\ufffdb\"", "principal": "\"<&>\u2028\\\"\\\\\\n\\u0001\""},
	}, {
		name: "slot values",
		rec: &api.Record{Slots: []api.Slot{
			{SlotID: "empty", Value: "", Met: &no, Source: &user},
			{SlotID: "unset", AllowedSources: []api.Source{}},
			{SlotID: "list", Value: []any{}, Shown: map[string]any{}, Required: true, Asks: 2,
				Offered: &api.Offer{Value: nil, Source: user}},
		}},
		want: map[string]string{
			// A known "" or [] is a value, where encoding/json/v2's omitempty would drop it.
			"slots.0.value": `""`, "slots.0.met": "false", "slots.0.source": `"user"`, "slots.0.allowed_sources": "null",
			"slots.0.lookup_failed": "false", "slots.0.proposed": absent, "slots.0.asks": absent,
			"slots.1.value": absent, "slots.1.met": absent, "slots.1.source": "null", "slots.1.allowed_sources": "[]",
			"slots.1.shown": absent, "slots.1.offered": absent,
			"slots.2.value": "[]", "slots.2.shown": "{}", "slots.2.required": "true", "slots.2.asks": "2",
			"slots.2.offered": `{"value":null,"source":"user"}`,
		},
	}, {
		name: "checklist and questions",
		rec: &api.Record{
			UserChecklist: []api.CheckResult{{ItemID: "c", Value: false, LookupFailed: true}, {ItemID: "d"}},
			Questions: []api.Question{{QuestionID: "q", Schema: json.RawMessage(`{ "const" : true }`), Value: 0,
				Options: [][]string{}}, {QuestionID: "r"}},
		},
		want: map[string]string{
			"user_checklist.0.value": "false", "user_checklist.0.lookup_failed": "true", "user_checklist.0.kind": absent,
			"user_checklist.1.value": absent, "user_checklist.1.lookup_failed": absent, "user_checklist.1.source": "null",
			"questions.0.schema": `{"const":true}`, "questions.0.value": "0", "questions.0.options": absent,
			"questions.1.schema": absent, "questions.1.value": absent, "questions.1.shown": absent,
		},
	}, {
		name: "deferred",
		rec: &api.Record{ActionKey: str("ak_1"), Deferred: &api.DeferredIntent{
			Instruction: api.Instruction{Plain: true, Text: "pay"},
			Candidates:  []api.Candidate{{Field: "amount", Value: json.Number("5")}}}},
		want: map[string]string{
			"deferred_input": `{"instruction":"pay","candidates":[{"field":"amount","value":5}],` +
				`"user_answers":null,"user_checklist":null}`,
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			prefix := []byte("prefix:")
			out, err := apijson.AppendRecord(bytes.Clone(prefix), c.rec)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(out, prefix) {
				t.Fatalf("AppendRecord dropped what b held: %q", out)
			}
			out = out[len(prefix):]
			if !jsontext.Value(out).IsValid() || out[0] != '{' || bytes.ContainsAny(out, "\r\n") {
				t.Fatalf("not one compact JSON object on one line: %s", out)
			}
			for path, want := range c.want {
				got, ok := member(t, out, path)
				switch {
				case want == absent && ok:
					t.Errorf("%s = %s, want it absent", path, got)
				case want != absent && !ok:
					t.Errorf("%s absent, want %s", path, want)
				case want != absent && string(got) != want:
					t.Errorf("%s = %s, want %s", path, got, want)
				}
			}
			if t.Failed() {
				t.Logf("record: %s", out)
			}
		})
	}
}

// A stored record is read back with encoding/json (convstate reads a deferred record so): the
// struct tags alone must bring back what was written, Gate-1 attempts included. The gate is
// read back with encoding/json/v2 too.
func TestRecordRoundTrip(t *testing.T) {
	n := func(i int) *int { return &i }
	src := api.Source("instruction")
	for _, g := range []api.Gate{
		{Kind: api.GateIntentUndetermined, UserMessage: "m", NextIntentAttempt: &api.NextIntentAttempt{Attempt: n(1)},
			Diag: map[string]any{"attempt": json.Number("0")}},
		{Kind: api.GateIntentUndeterminedExhausted, NextIntentAttempt: &api.NextIntentAttempt{}},
		{Kind: api.GateToolUndetermined, NextToolAttempt: &api.NextToolAttempt{Attempt: n(2)}},
		{Kind: api.GateToolUndeterminedExhausted, NextToolAttempt: &api.NextToolAttempt{}},
		{Kind: api.GateBranchUnresolved, BranchOptions: [][]string{{"a"}, {"b", "c"}}},
		{Kind: api.GateValue},
	} {
		rec := &api.Record{
			SchemaVersion: api.SchemaVersion, RecordID: "rec_1", Principal: "u", Server: "s", Tool: "t",
			Slots: []api.Slot{{SlotID: "a", Kind: api.KindValue, Status: api.StatusKnown, Value: json.Number("1.50"), Source: &src,
				AllowedSources: []api.Source{src}, Measurements: []api.MeasurementRef{{Name: "m", Via: "http", At: "t"}},
				RejectedCandidates: []api.Rejected{{Segment: 1, Span: api.Span{2, 3}, Value: "x", Reason: "r"}}}},
			Gate: g, Outcome: api.OutcomeAskUser, CallArguments: map[string]any{"a": json.Number("1.50")},
		}
		t.Run(g.Kind, func(t *testing.T) {
			out, err := apijson.AppendRecord(nil, rec)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(out))
			dec.UseNumber()
			var back api.Record
			if err := dec.Decode(&back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&back, rec) {
				t.Errorf("encoding/json read back\n%#v\nwant\n%#v", back, *rec)
			}
			gate, _ := member(t, out, "gate")
			var g2 api.Gate
			if err := jsonv2.Unmarshal(gate, &g2); err != nil {
				t.Fatal(err)
			}
			if g2.Diag != nil { // v2 reads numbers in an any as float64
				g2.Diag = g.Diag
			}
			if !reflect.DeepEqual(g2, g) {
				t.Errorf("encoding/json/v2 read back %#v, want %#v", g2, g)
			}
		})
	}
}

// AppendRecord fails on what JSON cannot hold, and leaves b as it was.
func TestAppendRecordErrors(t *testing.T) {
	for name, v := range map[string]any{
		"NaN":               math.NaN(),
		"infinity":          math.Inf(-1),
		"leading zero":      json.Number("01"),
		"trailing garbage":  json.Number("1x"),
		"space":             json.Number(" 1"),
		"string in number":  json.Number(`"1"`),
		"literal in number": json.Number("true"),
		"channel":           make(chan int),
	} {
		t.Run(name, func(t *testing.T) {
			rec := &api.Record{CallArguments: map[string]any{"v": v}}
			b, err := apijson.AppendRecord([]byte("keep"), rec)
			if err == nil || string(b) != "keep" {
				t.Fatalf("AppendRecord = %q, %v; want an error and b unchanged", b, err)
			}
		})
	}
}

// issuedRecord is a record as a verdict_issued preflight stores it.
func issuedRecord() *api.Record {
	str := func(s string) *string { return &s }
	zero := 0
	src := api.Source("user")
	slots := make([]api.Slot, 3)
	for i, f := range []string{"amount", "to_account", "from_account"} {
		slots[i] = api.Slot{SlotID: f, Kind: api.KindValue, Status: api.StatusKnown, Value: "110-222-333", Source: &src,
			AllowedSources: []api.Source{"user", "pre_set"}, ResolvedAt: "at_instruction", Required: true}
	}
	return &api.Record{
		SchemaVersion: api.SchemaVersion, RecordID: "rec_01KB0000000000000000000000", ActionKey: str("ak_" + strings.Repeat("a", 43)),
		Phase: str(api.PhaseAtInstruction), Principal: "u_01", ConversationID: "c1", Server: "pay", Tool: "transfer",
		ToolSchemaDigest: str("sha256:" + strings.Repeat("b", 64)), PolicyVersion: "bench.1",
		Fixed: &api.Fixed{C1WhenCase: str("immediate"), C1Source: "user", C2UserActionName: str("send money"), C2Source: str("instruction"),
			C3ProviderAction: str("transfer"), C3Match: &api.C3Result{Approved: true, By: "policy"}},
		Slots: slots, ExtraFields: []api.ExtraField{}, UserChecklist: []api.CheckResult{}, UnknownCount: &zero, Unmet: []api.Unmet{},
		AskCeiling: []string{}, Questions: []api.Question{}, RejectedAnswers: []api.RejectedAns{}, Notices: []string{},
		Gate: api.Gate{Kind: api.GateValue}, Outcome: api.OutcomeVerdictIssued,
		CallArguments:   map[string]any{"amount": json.Number("500000"), "to_account": "110-222-333", "from_account": "1102534471"},
		ArgumentsDigest: str("sha256:" + strings.Repeat("c", 64)), Verdict: str(strings.Repeat("x", 900)), VerdictID: str("vrd_1"),
		Timestamp: "2026-11-30T09:12:03.114Z",
	}
}

// BenchmarkRecordJSON is the encoding of a verdict_issued record, into a buffer sized as
// verdictd sizes it: from the previous record, a little more than it.
func BenchmarkRecordJSON(b *testing.B) {
	rec := issuedRecord()
	b.Run("AppendRecord", func(b *testing.B) {
		b.ReportAllocs()
		out, err := apijson.AppendRecord(nil, rec)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 0, len(out)*9/8+64)
		for b.Loop() {
			if _, err := apijson.AppendRecord(buf, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
