package apijson_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
)

// executionMembers is an execution record as its members are documented (docs/api.md): what
// json/v2 writes of it is the record's form.
type executionMembers struct {
	RecordID          string                `json:"record_id"`
	Actor             string                `json:"actor"`
	ExecutorID        string                `json:"executor_id"`
	VerdictID         *string               `json:"verdict_id"`
	ActionKey         *string               `json:"action_key"`
	RefPhase          *string               `json:"ref_phase"`
	RefRecord         *string               `json:"ref_record"`
	Principal         *string               `json:"principal"`
	Server            *string               `json:"server"`
	Tool              *string               `json:"tool"`
	ArgumentsDigest   *string               `json:"arguments_digest"`
	Decision          api.ExecutionDecision `json:"execution_decision"`
	Reason            *string               `json:"reason"`
	StartedAt         time.Time             `json:"started_at"`
	FinishedAt        *time.Time            `json:"finished_at"`
	ResultDigest      *string               `json:"result_digest"`
	Verdict           *string               `json:"verdict"`
	TraceID           string                `json:"trace_id,omitempty"`
	Credential        string                `json:"credential,omitempty"`
	CredentialSubject string                `json:"credential_subject,omitempty"`
	CredentialGrant   string                `json:"credential_grant,omitempty"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// An execution record's MarshalJSON writes what json/v2 writes of its documented members, an
// empty optional member null and bytes that are not UTF-8 as U+FFFD; UnmarshalJSON reads it
// back, with U+FFFD where those bytes were.
func TestExecutionRecordIsItsDocumentedForm(t *testing.T) {
	odd := rapid.SampledFrom([]string{"", "a", "<&>", "\u2028\u2029", "\x00\x1f\x7f", "\b\f\n\r\t\"\\", "\xff", "a\xc3", "\ufffd", "é😀"})
	bytesOf := rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) })
	str := rapid.OneOf(odd, rapid.String(), bytesOf)
	rapid.Check(t, func(rt *rapid.T) {
		zone := time.FixedZone("z", rapid.IntRange(-12, 14).Draw(rt, "zone")*3600)
		at := func(label string) time.Time {
			return time.Unix(rapid.Int64Range(0, 253402300799).Draw(rt, label), rapid.Int64Range(0, 999_999_999).Draw(rt, label+" ns")).In(zone)
		}
		x := &api.ExecutionRecord{
			RecordID: str.Draw(rt, "id"), ExecutorID: str.Draw(rt, "executor"), VerdictID: str.Draw(rt, "jti"),
			ActionKey: str.Draw(rt, "key"), RefPhase: str.Draw(rt, "phase"), RefRecord: str.Draw(rt, "ref"),
			Principal: str.Draw(rt, "principal"), Server: str.Draw(rt, "server"), Tool: str.Draw(rt, "tool"),
			ArgumentsDigest: str.Draw(rt, "args"),
			Decision:        rapid.SampledFrom([]api.ExecutionDecision{api.ExecutionStarted, api.ExecutionExecuted, api.ExecutionFailed, api.ExecutionNotExecuted, api.ExecutionOutcomeUnknown}).Draw(rt, "decision"),
			Reason:          str.Draw(rt, "reason"), StartedAt: at("started"), ResultDigest: str.Draw(rt, "result"),
			Verdict: str.Draw(rt, "verdict"), TraceID: str.Draw(rt, "trace"), Credential: str.Draw(rt, "credential"),
			CredentialSubject: str.Draw(rt, "subject"), CredentialGrant: str.Draw(rt, "grant"),
		}
		if rapid.Bool().Draw(rt, "finished") {
			x.FinishedAt = at("finished")
		}
		m := executionMembers{
			RecordID: x.RecordID, Actor: api.ExecutionActor, ExecutorID: x.ExecutorID, VerdictID: orNull(x.VerdictID),
			ActionKey: orNull(x.ActionKey), RefPhase: orNull(x.RefPhase), RefRecord: orNull(x.RefRecord),
			Principal: orNull(x.Principal), Server: orNull(x.Server), Tool: orNull(x.Tool),
			ArgumentsDigest: orNull(x.ArgumentsDigest), Decision: x.Decision, Reason: orNull(x.Reason),
			StartedAt: x.StartedAt.UTC(), ResultDigest: orNull(x.ResultDigest), Verdict: orNull(x.Verdict),
			TraceID: x.TraceID, Credential: x.Credential, CredentialSubject: x.CredentialSubject, CredentialGrant: x.CredentialGrant,
		}
		if !x.FinishedAt.IsZero() {
			f := x.FinishedAt.UTC()
			m.FinishedAt = &f
		}
		want, err := jsonv2.Marshal(&m, jsontext.AllowInvalidUTF8(true))
		if err != nil {
			rt.Fatal(err)
		}
		got, err := x.MarshalJSON()
		if err != nil {
			rt.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			rt.Fatalf("MarshalJSON\n%q\njson/v2\n%q", got, want)
		}
		var back api.ExecutionRecord
		err = back.UnmarshalJSON(got)
		if x.RecordID == "" {
			if !errors.Is(err, api.ErrInvalidExecution) {
				rt.Fatalf("a record without record_id read: %v", err)
			}
			return
		}
		if err != nil {
			rt.Fatalf("%s: %v", got, err)
		}
		again, err := back.MarshalJSON()
		if err != nil || !bytes.Equal(again, got) {
			rt.Fatalf("read back and written again:\n%q\n%q (%v)", again, got, err)
		}
	})
}

// UnmarshalJSON refuses what is not an execution record.
func TestExecutionRecordRefused(t *testing.T) {
	for _, body := range []string{
		`{"actor":"executor","execution_decision":"executed"}`,
		`{"record_id":"exe_1","actor":"verdictd","execution_decision":"executed"}`,
		`{"record_id":"exe_1","actor":"executor","execution_decision":"done"}`,
	} {
		var x api.ExecutionRecord
		if err := x.UnmarshalJSON([]byte(body)); !errors.Is(err, api.ErrInvalidExecution) {
			t.Errorf("%s: %v, want %v", body, err, api.ErrInvalidExecution)
		}
	}
}
