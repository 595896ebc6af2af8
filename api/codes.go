package api

// The codes the daemons answer with, declared here once so that the daemon that emits a code
// and the one that branches on it name the same constant: a code renamed in one is renamed in
// the other, or does not compile. docs/api.md lists every one (TestCodesDocumented); the
// approvals API's codes are in approval.go, the executor's credential and read refusals in
// execution.go, the transport's (malformed_json, body_too_large, ...) in internal/httpx, and
// the verifiers' typed reasons in packages verdict, identity and nonce.

// Codes of verdictd's preflight (the error envelope's code), beyond the transport's.
const (
	// CodeInvalidRequest: a request (a preflight, an approvals query or decision, a grants
	// query) that is well-formed JSON but not one the endpoint takes.
	CodeInvalidRequest = "invalid_request"
	// CodeUnknownField: a member the request's type does not have.
	CodeUnknownField = "unknown_field"
	// CodeTooLarge: a preflight request over the request decoder's size bounds.
	CodeTooLarge = "too_large"
	// CodeTooManySegments: an instruction of more segments than the decoder takes.
	CodeTooManySegments = "too_many_segments"
	// CodeTooManyChecklistItems, CodeExpressionTooLarge, CodeChecklistTooLarge: the user
	// checklist has more items than MaxChecklistItems, one expression over MaxExprBytes, or
	// all of them together over MaxChecklistBytes.
	CodeTooManyChecklistItems = "too_many_checklist_items"
	CodeExpressionTooLarge    = "expression_too_large"
	CodeChecklistTooLarge     = "checklist_too_large"
	// CodeEvaluationBudgetExceeded: the request's own checklist expressions took the run past
	// its evaluation budget.
	CodeEvaluationBudgetExceeded = "evaluation_budget_exceeded"

	CodeUnknownActionKey = "unknown_action_key"
	CodeUnknownTool      = "unknown_tool"
	CodeSigningFailed    = "signing_failed"
	CodeStoreUnavailable = "store_unavailable"
	CodePreflightTimeout = "preflight_timeout"

	// CodePrincipalNotAllowed refuses a preflight whose principal its caller may not act for:
	// not one its callers entry lists, or not the one its subject token names. Nothing is
	// recorded.
	CodePrincipalNotAllowed = "principal_not_allowed"

	// CodeApprovalLimit (429) answers a preflight whose principal already has the most pending
	// approvals allowed; the gateway ends the call with it. Nothing ran.
	CodeApprovalLimit = "approval_limit"
	// CodeApprovalChanged (409) answers a preflight whose call's approval was decided (or
	// closed) between the run's read of it and its commit: nothing was issued or recorded, and
	// the same preflight made again acts on the approval as it now is. The gateway does so.
	CodeApprovalChanged = "approval_changed"
	// CodeConversationLimit (429) answers a preflight that would start a conversation beyond
	// its principal's bound; the gateway ends the call with it.
	CodeConversationLimit = "conversation_limit"
	// CodeStateStoreUnavailable (503): a preflight or receipt could not be decided because the
	// shared state store did not give a definite answer.
	CodeStateStoreUnavailable = "state_store_unavailable"
	// CodeTooManyWaits (429) answers a long poll of an approval that already has the most
	// waits allowed.
	CodeTooManyWaits = "too_many_waits"

	// Refusals (409) of an at_trigger preflight whose deferred record has no occurrence left:
	// nothing is decided or recorded, and the stored intent is not run at all.
	//
	// CodeDeferredConsumed: a one-off intent (scheduled or conditional) was triggered to a
	// verdict already.
	CodeDeferredConsumed = "deferred_consumed"
	// CodeRecurrenceExhausted: a recurring intent has had recurrence.count verdicts.
	CodeRecurrenceExhausted = "recurrence_exhausted"
	// CodeRecurrenceTooSoon: a recurring intent's previous verdict is less than
	// recurrence.interval old.
	CodeRecurrenceTooSoon = "recurrence_too_soon"
	// CodeRecurrenceNotConfigured: a recurring intent whose tool has no recurrence in the
	// policy in force (it was removed after the intent was deferred).
	CodeRecurrenceNotConfigured = "recurrence_not_configured"
)

// Codes of verdictd's POST /v1/receipts beyond the verifier's reasons.
const (
	CodeMalformedReceipt  = "malformed_receipt"
	CodeUnknownVerdict    = "unknown_verdict"
	CodeArgumentsMismatch = "arguments_mismatch"
	CodeActionKeyMismatch = "action_key_mismatch"
	CodeNotInAudience     = "executor_not_in_audience"
	// CodeReceiptTooOld: the receipt was signed longer than receipt_max_age ago. A receipt
	// the executor posts arrives within a minute; an old one is a replay.
	CodeReceiptTooOld = "receipt_too_old"
	// CodeReceiptTimeout: a receipt of a batch was not decided within the batch's time; it may
	// be posted again.
	CodeReceiptTimeout = "receipt_timeout"
)

// Codes both daemons answer with.
const (
	// CodeBadSince (400): the since of a records or executions export is not an RFC 3339 time.
	CodeBadSince = "bad_since"
	// CodeShuttingDown (503): the daemon is stopping. The executor also records it as the
	// reason of a call it gave up on while stopping.
	CodeShuttingDown = "shutting_down"
)

// Codes of the executor's POST /v1/execute and reasons of its execution records beyond the
// verifier's, the nonce store's and the credential's.
const (
	// CodeMissingVerdict (400): the request names no verdict.
	CodeMissingVerdict = "missing_verdict"

	ExecutionReasonToolError        = "tool_error"
	ExecutionReasonUpstreamRejected = "upstream_rejected"
	ExecutionReasonCallTimeout      = "call_timeout"
	ExecutionReasonConnectionLost   = "connection_lost"
	// ExecutionReasonCatalogUnavailable: the verdict's server is configured but its tools are
	// not listed right now, so the verdict cannot be checked against the tool; it stays
	// usable (503).
	ExecutionReasonCatalogUnavailable = "catalog_unavailable"
	// ExecutionReasonConsumedNotStarted (409): the verdict was consumed and its executor
	// recorded that it never started. Nothing ran; only a fresh preflight gets a usable
	// verdict.
	ExecutionReasonConsumedNotStarted = "consumed_not_started"
	// ReasonUpstreamInputRequired: the tool's server asked for input in the middle of a call,
	// which the executor cannot give (a failed record) and the gateway gives only on a
	// pass-through call whose form it may relay.
	ReasonUpstreamInputRequired = "upstream_input_required"
)

// Keys of _meta the gateway reads on a tools/call (see the mcpgate package documentation for
// their shapes).
const (
	MetaInstruction    = "io.verdict/instruction"
	MetaIntent         = "io.verdict/intent"
	MetaLocations      = "io.verdict/locations"
	MetaConversationID = "io.verdict/conversation_id"
	MetaNewRequest     = "io.verdict/new_request"
)

// Keys of _meta the gateway writes on its results.
const (
	MetaReason          = "io.verdict/reason"
	MetaOutcome         = "io.verdict/outcome"
	MetaRecordID        = "io.verdict/record_id"
	MetaExecutionRecord = "io.verdict/execution_record"
	// MetaRequiredScopes lists, on a ReasonInsufficientScope refusal, the scopes the tool
	// requires, for a host to ask its authorization server for them.
	MetaRequiredScopes = "io.verdict/required_scopes"
)

// Reason codes of the gateway's own refusals, in _meta[MetaReason]. The gateway also ends a
// call with verdictd's CodeApprovalLimit and CodeConversationLimit, the executor's
// ExecutionReasonCredentialRequired, and GateDefinitionUnpinned.
const (
	ReasonUnauthenticated  = "unauthenticated"
	ReasonToolUnavailable  = "tool_unavailable"
	ReasonArgumentsInvalid = "arguments_invalid"
	ReasonMetaInvalid      = "meta_invalid"
	// A question round's token (requestState) refused: absent; malformed or its MAC does not
	// verify; past its expiry; issued for another principal, tool or argument object; used
	// already, or never issued by this gateway (after a restart, say).
	ReasonStateMissing    = "request_state_missing"
	ReasonStateInvalid    = "request_state_invalid"
	ReasonStateExpired    = "request_state_expired"
	ReasonStateMismatch   = "request_state_mismatch"
	ReasonStateReplayed   = "request_state_replayed"
	ReasonDeclined        = "declined"
	ReasonNotAskable      = "not_askable"
	ReasonElicitation     = "elicitation_unavailable"
	ReasonTooManyRounds   = "too_many_rounds"
	ReasonPreflightFailed = "preflight_failed"
	// ReasonDraftTooLong: a record asks to review drafted content longer than a form carries
	// (the gateway's max_draft_bytes). The call ends; nothing ran.
	ReasonDraftTooLong = "draft_too_long"
	// A call refused a place in the store of waiting continuations: the store as a whole is at
	// its bound (busy); the principal has its share (busy_principal); the continuation alone
	// is over a principal's byte share (state_too_large); the store gave no definite answer
	// (state_unavailable).
	ReasonBusy             = "busy"
	ReasonBusyPrincipal    = "busy_principal"
	ReasonStateTooLarge    = "state_too_large"
	ReasonStateUnavailable = "state_unavailable"
	ReasonExecutionRefused = "execution_refused"
	ReasonExecutionFailed  = "execution_failed"
	ReasonExecutionUnknown = "execution_outcome_unknown"
	// ReasonExecutionNotSent: the executor took the verdict but could not reach the tool's
	// server, and sent it nothing (its not_executed record, upstream_unavailable): nothing was
	// done, and the verdict is used.
	ReasonExecutionNotSent = "execution_not_sent"
	ReasonUpstreamFailed   = "upstream_failed"
	// ReasonUpstreamTimeout: a forwarded call was still unanswered when its forward_timeout
	// passed; the server was sent a cancellation, and may or may not have acted.
	ReasonUpstreamTimeout = "upstream_timeout"
	// ReasonRelayRefusedSecret: a pass-through tool's server asked the user for a secret,
	// which the policy does not allow for the tool (relay.allow_secrets); the user was not
	// asked.
	ReasonRelayRefusedSecret = "relay_refused_secret"
	// ReasonRelayRefusedWording: a pass-through tool's server asked a question in the
	// gateway's own wording, or with the attribution of a relayed question, or with a choice,
	// default or name holding characters a person does not see; the user was not asked.
	ReasonRelayRefusedWording = "relay_refused_wording"
	// ReasonSessionLimit: an initialize over HTTP is refused when max_sessions sessions are
	// open.
	ReasonSessionLimit = "session_limit"
	// ReasonRateLimited: the principal started more first-round gated calls than its
	// calls_per_minute and call_burst allow (with the etcd state store, on every replica
	// together).
	ReasonRateLimited = "rate_limited"
	// ReasonInsufficientScope refuses a call to a tool whose tools entry requires a scope the
	// caller's access token does not grant. Nothing is decided, recorded or called.
	ReasonInsufficientScope = "insufficient_scope"

	// Reasons of a call whose approvals are given in the console (docs/approvals.md).
	//
	// ReasonApprovalPendingElsewhere: the call waits for an approval the host cannot give or
	// show by URL; the result names where it is given, and the same call made again after the
	// decision finds it.
	ReasonApprovalPendingElsewhere = "approval_pending_elsewhere"
	// ReasonApprovalTimeout: the approval was not decided within its timeout. Nothing ran.
	ReasonApprovalTimeout = "approval_timeout"
)
