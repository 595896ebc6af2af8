package apijson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
)

func TestUnmarshalStrict(t *testing.T) {
	tests := []struct {
		name, body string
		want       error // nil = read; errAny = any *apijson.Error
	}{
		{"exact names", `{"field":"a","value":1}`, nil},
		{"unknown member", `{"field":"a","value":1,"source":"x"}`, apijson.ErrUnknownMember},
		{"case differs", `{"field":"a","Value":1}`, apijson.ErrUnknownMember},
		{"long s", `{"field":"a","value":1,"ſpan":[0,1]}`, apijson.ErrUnknownMember},
		{"duplicate", `{"field":"a","value":1,"value":2}`, apijson.ErrDuplicateMember},
		{"value missing", `{"field":"a"}`, errAny},
		{"segment without span", `{"field":"a","value":1,"segment":0}`, errAny},
		{"span null with segment", `{"field":"a","value":1,"segment":0,"span":null}`, errAny},
		{"span of three", `{"field":"a","value":1,"segment":0,"span":[0,1,2]}`, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c api.Candidate
			err := apijson.UnmarshalStrict([]byte(tt.body), &c)
			var ae *apijson.Error
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != nil && !errors.As(err, &ae):
				t.Fatalf("err = %v, want an *apijson.Error", err)
			case tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

var errAny = errors.New("any refusal")

// Values keep their exact text and their presence; an instruction reads in both its forms.
func TestUnmarshalShapes(t *testing.T) {
	var r api.Request
	body := `{"principal":"u","server":"s","tool":"t","instruction":"plain",
		"candidates":[{"field":"a","value":{"n":[1.10,1e2,-0]}},{"field":"b","value":null}],
		"user_answers":[{"question_id":"q1"},{"question_id":"q2","value":null}]}`
	if err := apijson.UnmarshalStrict([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": []any{json.Number("1.10"), json.Number("1e2"), json.Number("-0")}}
	if !reflect.DeepEqual(r.Candidates[0].Value, want) || r.Candidates[1].Value != nil {
		t.Errorf("candidates = %#v", r.Candidates)
	}
	if r.UserAnswers[0].Value.Set || !r.UserAnswers[1].Value.Set {
		t.Errorf("answer presence lost: %+v", r.UserAnswers)
	}
	if !r.Instruction.Plain || r.Instruction.Text != "plain" {
		t.Errorf("instruction = %+v", r.Instruction)
	}
	var segs api.Request
	if err := apijson.UnmarshalStrict([]byte(`{"instruction":[{"text":"x","trust":"user"}]}`), &segs); err != nil ||
		len(segs.Instruction.Segments) != 1 || segs.Instruction.Plain {
		t.Errorf("segments = %+v, %v", segs.Instruction, err)
	}
	// What encoding/json writes reads back the same.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var again api.Request
	if err := apijson.UnmarshalStrict(b, &again); err != nil || !reflect.DeepEqual(r, again) {
		t.Errorf("round trip: %v\n %#v\n %#v", err, r, again)
	}
}

// Unmarshal skips members it has no field for (a record written by a newer version), and
// reads every value of type any with exact numbers.
func TestUnmarshalLenient(t *testing.T) {
	var v struct {
		A any `json:"a"`
	}
	if err := apijson.Unmarshal([]byte(`{"a":[12345678901234567890],"later":true}`), &v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.A, []any{json.Number("12345678901234567890")}) {
		t.Errorf("a = %#v", v.A)
	}
}
