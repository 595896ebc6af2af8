package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
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

// ExecutionRecord is the executor's record of one execution or refusal (docs/api.md). It has
// one JSON form, its MarshalJSON's, which the executor stores, exports and answers with: an
// empty string member the executor may not know (no verdict id on a malformed request, no
// reason or result while started) and a zero FinishedAt are null, times are UTC, and a string
// that is not valid UTF-8 is written with U+FFFD in place of the bad bytes, so that a refusal
// is recorded whatever it was sent. UnmarshalJSON reads that form and refuses what is not an
// execution record (ErrInvalidExecution).
type ExecutionRecord struct {
	RecordID        string            `json:"record_id"`
	ExecutorID      string            `json:"executor_id"`
	VerdictID       string            `json:"verdict_id"`
	ActionKey       string            `json:"action_key"`
	RefPhase        string            `json:"ref_phase"`  // the verdict's phase
	RefRecord       string            `json:"ref_record"` // the decision record id the verdict names
	Principal       string            `json:"principal"`
	Server          string            `json:"server"`
	Tool            string            `json:"tool"`
	ArgumentsDigest string            `json:"arguments_digest"`
	Decision        ExecutionDecision `json:"execution_decision"`
	Reason          string            `json:"reason"`
	StartedAt       time.Time         `json:"started_at"`
	FinishedAt      time.Time         `json:"finished_at"` // zero while started
	ResultDigest    string            `json:"result_digest"`
	Verdict         string            `json:"verdict"` // the compact JWS
	// TraceID is the W3C trace id the execution ran under, "" when there was none.
	TraceID string `json:"trace_id"`
	// Credential is the kind of credential the call used, or would have, at the server
	// (CredentialShared, CredentialTokenExchange, CredentialUserGrant); "" when the record
	// names no server (its verdict did not verify), and on records written before it was
	// recorded.
	Credential string `json:"credential"`
	// CredentialSubject is the sub of the user's token: the account at the identity provider
	// whose authority a token_exchange or user_grant call used (or would have); never a token.
	CredentialSubject string `json:"credential_subject"`
	// CredentialGrant is the executor's id of the user's grant a user_grant call used (or
	// would have): which consent the call ran under, never a token.
	CredentialGrant string `json:"credential_grant"`
}

// ErrInvalidExecution is the class of the errors of UnmarshalJSON for JSON that is not an
// execution record: no record id, another actor, an unknown execution_decision.
var ErrInvalidExecution = errors.New("invalid execution record")

// MarshalJSON writes the record's members in their documented order, as compact JSON whose
// strings escape only what JSON requires (no HTML or U+2028 escapes).
func (x *ExecutionRecord) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 512+len(x.Verdict))
	b = append(b, `{"record_id":`...)
	b = appendQuoted(b, x.RecordID)
	b = append(b, `,"actor":"`+ExecutionActor+`","executor_id":`...)
	b = appendQuoted(b, x.ExecutorID)
	for _, m := range [...]struct{ name, v string }{
		{`,"verdict_id":`, x.VerdictID}, {`,"action_key":`, x.ActionKey}, {`,"ref_phase":`, x.RefPhase},
		{`,"ref_record":`, x.RefRecord}, {`,"principal":`, x.Principal}, {`,"server":`, x.Server},
		{`,"tool":`, x.Tool}, {`,"arguments_digest":`, x.ArgumentsDigest},
	} {
		b = appendNullable(append(b, m.name...), m.v)
	}
	b = appendQuoted(append(b, `,"execution_decision":`...), string(x.Decision))
	b = appendNullable(append(b, `,"reason":`...), x.Reason)
	var err error
	if b, err = appendTime(append(b, `,"started_at":`...), x.StartedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"finished_at":`...)
	if x.FinishedAt.IsZero() {
		b = append(b, "null"...)
	} else if b, err = appendTime(b, x.FinishedAt); err != nil {
		return nil, err
	}
	b = appendNullable(append(b, `,"result_digest":`...), x.ResultDigest)
	b = appendNullable(append(b, `,"verdict":`...), x.Verdict)
	for _, m := range [...]struct{ name, v string }{
		{`,"trace_id":`, x.TraceID}, {`,"credential":`, x.Credential},
		{`,"credential_subject":`, x.CredentialSubject}, {`,"credential_grant":`, x.CredentialGrant},
	} {
		if m.v != "" {
			b = appendQuoted(append(b, m.name...), m.v)
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the documented form, null as an empty member. It refuses, with an error
// of class ErrInvalidExecution, a record that is not the executor's, has no record id, or
// carries an execution_decision outside the five known values; and a record that names a
// member twice, or names one of its members in another case (encoding/json would read
// "Verdict_ID" as verdict_id, and the last of two as the one): every reader of the same bytes
// reads the same record. Members it does not know are left for a later version.
func (x *ExecutionRecord) UnmarshalJSON(data []byte) error {
	if err := checkExecutionNames(data); err != nil {
		return err
	}
	type members ExecutionRecord // its fields without its methods
	var w struct {
		members
		Actor string `json:"actor"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	switch {
	case w.RecordID == "":
		return fmt.Errorf("%w: no record_id", ErrInvalidExecution)
	case w.Actor != ExecutionActor:
		return fmt.Errorf("%w: %s: actor %q, want %q", ErrInvalidExecution, w.RecordID, w.Actor, ExecutionActor)
	case w.Decision != ExecutionStarted && !w.Decision.Final():
		return fmt.Errorf("%w: %s: execution_decision %q", ErrInvalidExecution, w.RecordID, w.Decision)
	}
	*x = ExecutionRecord(w.members)
	return nil
}

// executionNames are the members of an execution record, as MarshalJSON writes them.
var executionNames = [...]string{"record_id", "actor", "executor_id", "verdict_id", "action_key",
	"ref_phase", "ref_record", "principal", "server", "tool", "arguments_digest", "execution_decision",
	"reason", "started_at", "finished_at", "result_digest", "verdict", "trace_id", "credential",
	"credential_subject", "credential_grant"}

// checkExecutionNames refuses a JSON object that names a member twice, or names a member of
// the record in a case other than its own. data is one valid JSON value, as a decoder hands it
// to UnmarshalJSON; what is not an object is left to encoding/json.
func checkExecutionNames(data []byte) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil
	}
	// The names seen, in a slice while there are few (a record has 21 members) and in a map
	// past that, so that an object of many members costs linear time, not quadratic.
	var small [len(executionNames) + 4]string
	names := small[:0]
	var many map[string]struct{}
	for i = skipSpace(data, i+1); i < len(data) && data[i] == '"'; {
		end := skipString(data, i)
		if end-1 <= i || data[end-1] != '"' {
			return nil // not a whole string: encoding/json says what is wrong
		}
		raw := data[i+1 : end-1]
		name := string(raw)
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
			// As encoding/json reads it: escapes decoded, invalid UTF-8 as U+FFFD.
			if json.Unmarshal(data[i:end], &name) != nil {
				return nil
			}
		}
		if seen := slices.Contains(names, name); seen || many != nil {
			if _, dup := many[name]; seen || dup {
				return fmt.Errorf("%w: member %q named twice", ErrInvalidExecution, name)
			}
		}
		if many == nil && len(names) < cap(small) {
			names = append(names, name)
		} else {
			if many == nil {
				many = make(map[string]struct{}, 2*len(names))
				for _, n := range names {
					many[n] = struct{}{}
				}
			}
			many[name] = struct{}{}
		}
		for _, known := range executionNames {
			if name != known && strings.EqualFold(name, known) {
				return fmt.Errorf("%w: member %q is not %q", ErrInvalidExecution, name, known)
			}
		}
		i = skipSpace(data, end)
		i = skipSpace(data, skipValue(data, skipSpace(data, i+1))) // past ':' and the value
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return nil
}

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at data[i] ('"').
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

// skipValue returns the index just past the valid JSON value that starts at data[i].
func skipValue(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch c := data[i]; {
		case c == '"':
			i = skipString(data, i)
		case c == '{' || c == '[':
			depth++
			i++
		case c == '}' || c == ']':
			if depth == 0 {
				return i
			}
			depth--
			i++
		case c == ',' && depth == 0:
			return i
		default:
			i++
		}
		if depth == 0 && i > 0 && (data[i-1] == '"' || data[i-1] == '}' || data[i-1] == ']') {
			return i
		}
	}
	return i
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendQuoted(b, s)
}

// appendTime appends t in UTC, RFC 3339 with the nanoseconds it has, quoted. A year that
// RFC 3339 cannot write is an error.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("api: execution record time %v: year outside [0,9999]", t)
	}
	b = append(b, '"')
	return append(t.AppendFormat(b, time.RFC3339Nano), '"'), nil
}

// appendQuoted appends s as a JSON string in its shortest form (RFC 8785's): '"', '\\' and the
// control characters escaped, the five with a short escape by it, and every byte that is not
// UTF-8 replaced by U+FFFD.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	i := 0 // s[i:n] is still to be copied
	for n := 0; n < len(s); {
		c := s[n]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[n:])
			if r == utf8.RuneError && size == 1 {
				b = append(append(b, s[i:n]...), string(utf8.RuneError)...)
				i = n + 1
			}
			n += size
			continue
		}
		n++
		if c >= ' ' && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[i:n-1]...)
		// These are written as a backslash and the character at the same index of the second string.
		if j := strings.IndexByte("\"\\\b\f\n\r\t", c); j >= 0 {
			b = append(b, '\\', `"\bfnrt`[j])
		} else {
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i = n
	}
	return append(append(b, s[i:]...), '"')
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
