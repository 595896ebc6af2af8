package api

import (
	"encoding/json"
	"time"
)

// ExecutionDecision is an execution record's execution_decision.
type ExecutionDecision string

// The four outcomes an execution record ends in (docs/api.md), and ExecutionStarted, the state
// a record is in while its tool call is in flight.
const (
	ExecutionStarted        ExecutionDecision = "started"
	ExecutionExecuted       ExecutionDecision = "executed"
	ExecutionNotExecuted    ExecutionDecision = "not_executed"
	ExecutionFailed         ExecutionDecision = "failed"
	ExecutionOutcomeUnknown ExecutionDecision = "outcome_unknown"
)

// Final reports whether d is one of the four outcomes a record can end in.
func (d ExecutionDecision) Final() bool {
	switch d {
	case ExecutionExecuted, ExecutionNotExecuted, ExecutionFailed, ExecutionOutcomeUnknown:
		return true
	}
	return false
}

// ExecutionReasonUpstreamUnavailable is the reason of a not_executed record finished from
// started: the verdict was consumed and the call started, but its request never reached the
// tool's server (no connection could be made, or none was up before the call's time ran out),
// so the tool did not run. The verdict stays consumed.
const ExecutionReasonUpstreamUnavailable = "upstream_unavailable"

// ExecutionActor is the actor of every execution record.
const ExecutionActor = "executor"

// ExecutionRecord is the executor's record of one execution or refusal (docs/api.md), as it is
// written: a member the executor does not know (no verdict id on a malformed request, no
// finish while started) is null.
type ExecutionRecord struct {
	RecordID        string            `json:"record_id"`
	Actor           string            `json:"actor"`
	ExecutorID      string            `json:"executor_id"`
	VerdictID       *string           `json:"verdict_id"`
	ActionKey       *string           `json:"action_key"`
	RefPhase        *string           `json:"ref_phase"`
	RefRecord       *string           `json:"ref_record"`
	Principal       *string           `json:"principal"`
	Server          *string           `json:"server"`
	Tool            *string           `json:"tool"`
	ArgumentsDigest *string           `json:"arguments_digest"`
	Decision        ExecutionDecision `json:"execution_decision"`
	Reason          *string           `json:"reason"`
	StartedAt       time.Time         `json:"started_at"`
	FinishedAt      *time.Time        `json:"finished_at"`
	ResultDigest    *string           `json:"result_digest"`
	Verdict         *string           `json:"verdict"`
	// TraceID is the W3C trace id the execution ran under, when there was one.
	TraceID string `json:"trace_id,omitempty"`
}

// ExecuteRequest is the body of the executor's POST /v1/execute.
type ExecuteRequest struct {
	Verdict   string          `json:"verdict"`
	Arguments json.RawMessage `json:"arguments"`
}

// ExecuteAnswer is the body of the executor's answer to POST /v1/execute: the execution record
// (on a refusal too, beside the error envelope), the tool's MCP CallToolResult when it answered,
// and the receipt of an executed call.
type ExecuteAnswer struct {
	Execution *ExecutionRecord `json:"execution"`
	Result    json.RawMessage  `json:"result,omitzero"`
	Receipt   string           `json:"receipt,omitempty"`
	Error     *ErrorDetail     `json:"error,omitzero"`
}
