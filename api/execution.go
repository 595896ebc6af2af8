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

// Reasons of a not_executed record refused for the user's credential at a token_exchange server
// (docs/credentials.md): checked after the verdict and before its nonce is consumed, so that
// nothing is spent and the verdict may be presented again, until it expires, with a good token.
const (
	// ExecutionReasonCredentialRequired: no subject token came with the verdict; or, at a
	// user_grant server, the user has no usable account connected there, and the refusal
	// carries the page where it is connected (ErrorDetail.ConnectURL), which the gateway shows.
	ExecutionReasonCredentialRequired = "credential_required"
	// ExecutionReasonCredentialInvalid: the subject token does not verify (expired, another
	// resource's, an issuer the server's exchange does not take, ...), or its issuer cannot be
	// reached to verify it.
	ExecutionReasonCredentialInvalid = "credential_invalid"
	// ExecutionReasonCredentialForeign: the subject token is another principal's than the
	// verdict's.
	ExecutionReasonCredentialForeign = "credential_foreign"
	// ExecutionReasonCredentialExchangeFailed: the identity provider refused the exchange, or
	// could not be reached.
	ExecutionReasonCredentialExchangeFailed = "credential_exchange_failed"
	// ExecutionReasonCredentialUnavailable: no connection of the user to the server could be
	// had (all in use, or it could not be made); send the verdict again.
	ExecutionReasonCredentialUnavailable = "credential_unavailable"
)

// Credential kinds: whose authority an execution record's call used at the tool's server.
const (
	// CredentialShared is the server's own configured credential (its headers): a service
	// identity, the same for every principal.
	CredentialShared = "shared"
	// CredentialTokenExchange is the principal's own: an access token the identity provider
	// issued for the server in exchange for the user's token (RFC 8693).
	CredentialTokenExchange = "token_exchange"
	// CredentialUserGrant is the principal's own: an access token of the grant the user gave
	// the server's authorization server, which the executor keeps in its vault.
	CredentialUserGrant = "user_grant"
)

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
	// Credential is the kind of credential the call used, or would have, at the server
	// (CredentialShared, CredentialTokenExchange); absent when the record names no server
	// (its verdict did not verify), and on records written before it was recorded.
	Credential string `json:"credential,omitempty"`
	// CredentialSubject is the sub of the user's token: the account at the identity provider
	// whose authority a token_exchange call used (or would have); never a token.
	CredentialSubject string `json:"credential_subject,omitempty"`
	// CredentialGrant is the executor's id of the user's grant a user_grant call used (or
	// would have): which consent the call ran under, never a token.
	CredentialGrant string `json:"credential_grant,omitempty"`
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

// ReadRequest is the body of the executor's POST /v1/read: a pass-through call of a tool of a
// server the executor calls with each user's own authority, for the user whose access token
// comes with it (docs/credentials.md#reads).
type ReadRequest struct {
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// ReadAnswer is the body of the executor's answer to POST /v1/read: the tool's MCP
// CallToolResult, an error result of the tool's own included.
type ReadAnswer struct {
	Result json.RawMessage `json:"result"`
}

// Reasons of a refused POST /v1/read (beside the credential's and definition_unpinned).
const (
	// ReadReasonNotPassThrough: the policy in force gates the tool (or names no such tool):
	// only a verdict runs it.
	ReadReasonNotPassThrough = "not_pass_through"
	// ReadReasonNoPolicy: the executor has no policy to check the tool's class in.
	ReadReasonNoPolicy = "no_policy"
	// ReadReasonSharedServer: the server is called with its shared credential; the gateway
	// reads it itself.
	ReadReasonSharedServer = "shared_server"
)
