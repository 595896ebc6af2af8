package gates

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/policy"
)

// checkAppendJSON fails t unless rec.AppendJSON writes exactly want, json.Marshal's bytes.
func checkAppendJSON(t testing.TB, rec *Record, want []byte) {
	t.Helper()
	prefix := []byte("prefix:")
	got, err := rec.AppendJSON(bytes.Clone(prefix))
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("AppendJSON dropped what b held: %q", got)
	}
	if got = got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON differs from json.Marshal\n got: %s\nwant: %s", got, want)
	}
}

// fill sets every field reachable from v to a non-zero value, so that a field added to the
// record and missed by AppendJSON shows up as a difference.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 6 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.String:
		v.SetString("s<&>\"\\\n\u2028é\x01" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(3 + depth))
	case reflect.Float64:
		v.SetFloat(2.5)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), depth+1)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{ "type" : "string", "pattern": "<a&b>" }`))
			return
		}
		if depth > 6 {
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if v.Type() == reflect.TypeFor[map[string]any]() {
			v.Set(reflect.ValueOf(dynamicObject()))
			return
		}
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(dynamicObject()))
	}
}

// dynamicObject holds every type a decoded value or a measurement may hold.
func dynamicObject() map[string]any {
	return map[string]any{
		"z": "last", "a": json.Number("-12.50e+3"), "empty_number": json.Number(""),
		"<html>": []any{"x", true, false, nil, 1.5e-7, 1e21, 123456789.0, math.Copysign(0, -1), 7, int64(-8)},
		"nested": map[string]any{"b": map[string]any{}, "a": []any{}, "nil_list": []any(nil),
			"nil_map": map[string]any(nil)},
		"value":  Value{Set: true, V: json.Number("1")},
		"source": policy.Source("user"),
		"bytes":  []byte("raw"),
	}
}

func TestRecordAppendJSON(t *testing.T) {
	filled := &Record{}
	fill(reflect.ValueOf(filled).Elem(), 0)
	if len(filled.Slots) == 0 || filled.Deferred == nil || filled.Gate.NextIntentAttempt == nil {
		t.Fatal("fill left fields empty")
	}
	str := func(s string) *string { return &s }
	n := func(i int) *int { return &i }
	yes := true
	src := policy.Source("measured")
	cases := map[string]*Record{
		"zero":   {},
		"filled": filled,
		"issued": {
			SchemaVersion: SchemaVersion, RecordID: "rec_01", ActionKey: str("ak_1"), Phase: str(PhaseAtInstruction),
			Principal: "u_01", ConversationID: "c1", Server: "pay", Tool: "transfer", ToolSchemaDigest: str("sha256:x"),
			PolicyVersion: "p.1", Fixed: &Fixed{C1WhenCase: str("immediate"), C1Source: "user", C3Match: &C3Result{Approved: true, By: "policy"}},
			Slots: []Slot{{SlotID: "amount", Kind: KindValue, Status: StatusKnown, Value: json.Number("500000"), Source: &src,
				AllowedSources: []policy.Source{"user"}, Met: &yes, Measurements: []MeasurementRef{{Name: "b", Via: "http", At: "t"}}},
				{SlotID: "to", Kind: KindValue, Status: StatusUnknown, Route: str(RouteAskUser), AllowedSources: []policy.Source{}}},
			ExtraFields: []ExtraField{}, UserChecklist: []CheckResult{}, UnknownCount: n(0), Unmet: []Unmet{},
			AskCeiling: []string{}, Questions: []Question{}, RejectedAnswers: []RejectedAns{}, Notices: []string{},
			Gate: Gate{Kind: GateValue}, Outcome: OutcomeVerdictIssued,
			CallArguments:   map[string]any{"amount": json.Number("500000"), "to_account": "110-222-333"},
			ArgumentsDigest: str("sha256:y"), Verdict: str("a.b.c"), VerdictID: str("jti"), Timestamp: "2026-11-30T09:12:03.114Z",
		},
	}
	for _, kind := range []string{GateValue, GateIntentUndetermined, GateIntentUndeterminedExhausted, GateToolUndetermined,
		GateToolUndeterminedExhausted, GateBranchUnresolved, GateBranchConflict, GateSchemaUnsupported, GateNotGated} {
		cases["gate "+kind] = &Record{Gate: Gate{Kind: kind, UserMessage: "m"}}
		cases["gate "+kind+" filled"] = &Record{Gate: Gate{Kind: kind, UserMessage: "m", NextIntentAttempt: n(2), NextToolAttempt: n(1),
			BranchOptions: [][]string{{"a", "b"}, nil}, Detail: "d", Diag: map[string]any{"x": 1.0}}}
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			checkAppendJSON(t, rec, want)
		})
	}
}

// AppendJSON fails where json.Marshal fails, and leaves b as it was.
func TestRecordAppendJSONErrors(t *testing.T) {
	for name, v := range map[string]any{
		"NaN":            math.NaN(),
		"infinity":       math.Inf(-1),
		"invalid number": json.Number("01"),
		"channel":        make(chan int),
	} {
		t.Run(name, func(t *testing.T) {
			rec := &Record{CallArguments: map[string]any{"v": v}}
			if _, err := json.Marshal(rec); err == nil {
				t.Fatal("json.Marshal accepted it")
			}
			b, err := rec.AppendJSON([]byte("keep"))
			if err == nil || string(b) != "keep" {
				t.Fatalf("AppendJSON = %q, %v; want an error and b unchanged", b, err)
			}
		})
	}
}

func FuzzRecordAppendJSON(f *testing.F) {
	f.Add("plain", "1", 1.5)
	f.Add("<\u2028\xff\"\\\x00>", "-0.5e-10", 1e-7)
	f.Add("", "", math.MaxFloat64)
	f.Fuzz(func(t *testing.T, s, num string, fl float64) {
		rec := &Record{RecordID: s, ActionKey: &s, Notices: []string{s, s + s}, Gate: Gate{Kind: s, Detail: s},
			CallArguments: map[string]any{s: json.Number(num), s + "x": fl, "s": []any{s, fl}}}
		want, err := json.Marshal(rec)
		got, gotErr := rec.AppendJSON(nil)
		if (err != nil) != (gotErr != nil) {
			t.Fatalf("json.Marshal error %v, AppendJSON error %v", err, gotErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

func TestIsValidNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12", "1.5", "1e5", "1E+5", "-1.25e-10", "0.0"} {
		if !isValidNumber(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "0x10", "NaN", " 1"} {
		if isValidNumber(s) {
			t.Errorf("%q accepted", s)
		}
	}
}

// issuedRecord is a record as a verdict_issued preflight stores it.
func issuedRecord() *Record {
	str := func(s string) *string { return &s }
	zero := 0
	src := policy.Source("user")
	slots := make([]Slot, 3)
	for i, f := range []string{"amount", "to_account", "from_account"} {
		slots[i] = Slot{SlotID: f, Kind: KindValue, Status: StatusKnown, Value: "110-222-333", Source: &src,
			AllowedSources: []policy.Source{"user", "pre_set"}, ResolvedAt: "at_instruction", Required: true}
	}
	return &Record{
		SchemaVersion: SchemaVersion, RecordID: "rec_01KB0000000000000000000000", ActionKey: str("ak_" + strings.Repeat("a", 43)),
		Phase: str(PhaseAtInstruction), Principal: "u_01", ConversationID: "c1", Server: "pay", Tool: "transfer",
		ToolSchemaDigest: str("sha256:" + strings.Repeat("b", 64)), PolicyVersion: "bench.1",
		Fixed: &Fixed{C1WhenCase: str("immediate"), C1Source: "user", C2UserActionName: str("send money"), C2Source: str("instruction"),
			C3ProviderAction: str("transfer"), C3Match: &C3Result{Approved: true, By: "policy"}},
		Slots: slots, ExtraFields: []ExtraField{}, UserChecklist: []CheckResult{}, UnknownCount: &zero, Unmet: []Unmet{},
		AskCeiling: []string{}, Questions: []Question{}, RejectedAnswers: []RejectedAns{}, Notices: []string{},
		Gate: Gate{Kind: GateValue}, Outcome: OutcomeVerdictIssued,
		CallArguments:   map[string]any{"amount": json.Number("500000"), "to_account": "110-222-333", "from_account": "1102534471"},
		ArgumentsDigest: str("sha256:" + strings.Repeat("c", 64)), Verdict: str(strings.Repeat("x", 900)), VerdictID: str("vrd_1"),
		Timestamp: "2026-11-30T09:12:03.114Z",
	}
}

func BenchmarkRecordJSON(b *testing.B) {
	rec := issuedRecord()
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4<<10) // verdictd sizes the buffer from the previous record
		for b.Loop() {
			if _, err := rec.AppendJSON(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
