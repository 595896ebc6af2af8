package store

import (
	"time"

	"github.com/verdictgate/verdict/internal/jsonw"
)

// appendExecution appends the CONTRACT §7 JSON of x to b: byte for byte what encoding/json
// writes for executionJSON (the fuzz target FuzzExecutionJSON holds it to that), without
// reflection. Every execution is encoded twice on its way through the executor (started, then
// finished), so this is on the hot path. ok is false for a time encoding/json refuses (a year
// outside 0–9999); the caller then takes the encoding/json path and its error.
func appendExecution(b []byte, x *Execution) (_ []byte, ok bool) {
	started := x.StartedAt.UTC()
	if !jsonTimeOK(started) || (!x.FinishedAt.IsZero() && !jsonTimeOK(x.FinishedAt.UTC())) {
		return b, false
	}
	b = append(b, `{"record_id":`...)
	b = appendJSONString(b, x.RecordID)
	b = append(b, `,"actor":"`+executionActor+`","executor_id":`...)
	b = appendJSONString(b, x.ExecutorID)
	b = appendNullable(append(b, `,"verdict_id":`...), x.VerdictID)
	b = appendNullable(append(b, `,"action_key":`...), x.ActionKey)
	b = appendNullable(append(b, `,"ref_phase":`...), x.RefPhase)
	b = appendNullable(append(b, `,"ref_record":`...), x.RefRecord)
	b = appendNullable(append(b, `,"principal":`...), x.Principal)
	b = appendNullable(append(b, `,"server":`...), x.Server)
	b = appendNullable(append(b, `,"tool":`...), x.Tool)
	b = appendNullable(append(b, `,"arguments_digest":`...), x.ArgumentsDigest)
	b = appendJSONString(append(b, `,"execution_decision":`...), string(x.Decision))
	b = appendNullable(append(b, `,"reason":`...), x.Reason)
	b = append(b, `,"started_at":"`...)
	b = append(started.AppendFormat(b, time.RFC3339Nano), '"')
	b = append(b, `,"finished_at":`...)
	if x.FinishedAt.IsZero() {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(x.FinishedAt.UTC().AppendFormat(b, time.RFC3339Nano), '"')
	}
	b = appendNullable(append(b, `,"result_digest":`...), x.ResultDigest)
	b = appendNullable(append(b, `,"verdict":`...), x.Verdict)
	return append(b, '}'), true
}

// jsonTimeOK reports whether encoding/json encodes t (a UTC time) as RFC 3339 without error.
func jsonTimeOK(t time.Time) bool {
	y := t.Year()
	return 0 <= y && y <= 9999
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// appendJSONString quotes s as json.Marshal does.
func appendJSONString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }
