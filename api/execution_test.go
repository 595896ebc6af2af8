package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
)

// An execution record is read only in the one form every reader reads alike: a member named
// twice, or a member of the record named in another case (which encoding/json would take for
// it), is refused; a member the record does not know is left for a later version.
func TestExecutionRecordNames(t *testing.T) {
	const valid = `{"record_id":"x1","actor":"executor","executor_id":"e","verdict_id":"v","execution_decision":"executed","started_at":"2026-12-07T00:00:00Z"%s}`
	for _, tc := range []struct {
		name  string
		extra string
		ok    bool
	}{
		{"as written", ``, true},
		{"an unknown member", `,"later":{"a":[1,2]}`, true},
		{"an unknown member's value naming a member", `,"later":{"verdict_id":"w","Verdict_ID":"w"}`, true},
		{"a member twice", `,"verdict_id":"w"`, false},
		{"a member in another case", `,"Verdict_ID":"w"`, false},
		{"the decision in upper case", `,"EXECUTION_DECISION":"failed"`, false},
		{"a Kelvin sign for k", `,"action_\u212aey":"k"`, false},
		{"an unknown member twice", `,"later":1,"later":2`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var x api.ExecutionRecord
			err := json.Unmarshal([]byte(strings.Replace(valid, "%s", tc.extra, 1)), &x)
			if tc.ok && (err != nil || x.VerdictID != "v" || x.Decision != api.ExecutionExecuted) {
				t.Fatalf("read %+v, %v", x, err)
			}
			if !tc.ok && !errors.Is(err, api.ErrInvalidExecution) {
				t.Fatalf("read %+v, %v; want ErrInvalidExecution", x, err)
			}
		})
	}
}

// executionNamesRef is checkExecutionNames by encoding/json's tokenizer: the names of the
// top-level members, or an error for a repeated one or one that folds to a record member.
func executionNamesRef(data []byte) bool {
	known := []string{"record_id", "actor", "executor_id", "verdict_id", "action_key", "ref_phase", "ref_record",
		"principal", "server", "tool", "arguments_digest", "execution_decision", "reason", "started_at",
		"finished_at", "result_digest", "verdict", "trace_id", "credential", "credential_subject", "credential_grant"}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return true
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, _ := dec.Token()
		name := tok.(string)
		if seen[name] {
			return false
		}
		seen[name] = true
		for _, k := range known {
			if name != k && strings.EqualFold(name, k) {
				return false
			}
		}
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	return true
}

// The record's own scan of its member names decides as encoding/json's tokenizer would, on
// objects of any shape: escaped names, nested values, strings holding quotes and brackets.
func TestExecutionNamesScan(t *testing.T) {
	names := rapid.SampledFrom([]string{`"verdict_id"`, `"Verdict_ID"`, `"v\u0065rdict_id"`, `"later"`, `"a\"b"`,
		`"record_id"`, `"action_\u212aey"`, `"x"`, `"\\"`, `""`, "\"\xff\"", "\"\xfe\"", `"\ufffd"`})
	var value *rapid.Generator[string]
	value = rapid.Deferred(func() *rapid.Generator[string] {
		return rapid.OneOf(
			rapid.SampledFrom([]string{`1`, `-2.5e3`, `true`, `null`, `"s"`, `"a\"}]"`, `"\\"`, `""`, `"{"`}),
			rapid.Custom(func(t *rapid.T) string {
				vs := rapid.SliceOfN(value, 0, 3).Draw(t, "items")
				return "[" + strings.Join(vs, ", ") + "]"
			}),
			rapid.Custom(func(t *rapid.T) string {
				n := rapid.IntRange(0, 3).Draw(t, "n")
				var ms []string
				for range n {
					ms = append(ms, names.Draw(t, "name")+":"+value.Draw(t, "value"))
				}
				return "{" + strings.Join(ms, ",") + "}"
			}),
		)
	})
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 6).Draw(t, "members")
		var ms []string
		for range n {
			sp := rapid.SampledFrom([]string{"", " ", "\n\t"}).Draw(t, "space")
			ms = append(ms, sp+names.Draw(t, "name")+sp+":"+sp+value.Draw(t, "value")+sp)
		}
		data := []byte("{" + strings.Join(ms, ",") + "}")
		if !json.Valid(data) {
			t.Fatalf("generated invalid JSON %s", data)
		}
		want := executionNamesRef(data)
		if got := api.CheckExecutionNames(data) == nil; got != want {
			t.Fatalf("%s: scan accepts %v, the tokenizer %v", data, got, want)
		}
	})
}

// The scan never panics on bytes that are not a whole object (a truncated stored record), reads
// names that are not UTF-8 as encoding/json does (U+FFFD), and finds a repeated name among
// many members.
func TestExecutionNamesScanEdges(t *testing.T) {
	for _, in := range []string{`{`, `{"`, `{"a`, `{"a"`, `{"a":`, `{"a":"`, `{"a":[`, `{"a":{"b"`, `{"a":1,`, `{"\`, `{"a\"`} {
		if err := api.CheckExecutionNames([]byte(in)); err != nil {
			t.Errorf("%q: %v (a truncated object is left to encoding/json)", in, err)
		}
	}
	if err := api.CheckExecutionNames([]byte("{\"\xff\":1,\"\xfe\":2}")); !errors.Is(err, api.ErrInvalidExecution) {
		t.Errorf("two names that both read as U+FFFD: %v", err)
	}
	var b strings.Builder
	b.WriteString(`{"record_id":"x"`)
	for i := range 1000 {
		fmt.Fprintf(&b, `,"m%04d":0`, i)
	}
	if err := api.CheckExecutionNames([]byte(b.String() + "}")); err != nil {
		t.Errorf("1,000 distinct members: %v", err)
	}
	if err := api.CheckExecutionNames([]byte(b.String() + `,"m0500":1}`)); !errors.Is(err, api.ErrInvalidExecution) {
		t.Errorf("a member repeated after 1,000: %v", err)
	}
}

// The names the scan guards are the members MarshalJSON writes: a member added to the record
// and not to executionNames would be read in any case.
func TestExecutionNamesAreTheRecordsMembers(t *testing.T) {
	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	x := api.ExecutionRecord{RecordID: "x", ExecutorID: "e", VerdictID: "v", ActionKey: "k", RefPhase: "p", RefRecord: "r",
		Principal: "u", Server: "s", Tool: "t", ArgumentsDigest: "d", Decision: api.ExecutionExecuted, Reason: "why",
		StartedAt: at, FinishedAt: at, ResultDigest: "rd", Verdict: "jws", TraceID: "tr", Credential: "c",
		CredentialSubject: "cs", CredentialGrant: "cg"}
	b, err := x.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		t.Fatal(err)
	}
	var written []string
	for name := range members {
		written = append(written, name)
	}
	slices.Sort(written)
	guarded := slices.Sorted(slices.Values(api.ExecutionNames))
	if !slices.Equal(written, guarded) {
		t.Fatalf("MarshalJSON writes %v, the scan guards %v", written, guarded)
	}
}
