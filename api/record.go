package api

import "encoding/json"

// The decision record's names (docs/preflight.md).

// SchemaVersion is the decision-record schema version.
const SchemaVersion = "1"

// Phases.
const (
	PhaseAtInstruction = "at_instruction"
	PhaseAtTrigger     = "at_trigger"
)

// Outcomes (docs/preflight.md). Precedence: hold > definition_repair > exhausted > system_lookup > ask_user.
// Refuse stands apart: a console approval of exactly this call was denied or expired, and
// the call ends there, whatever else is open.
const (
	OutcomeRefuse           = "refuse"
	OutcomeVerdictIssued    = "verdict_issued"
	OutcomeAskUser          = "ask_user"
	OutcomeSystemLookup     = "system_lookup"
	OutcomeDefinitionRepair = "definition_repair"
	OutcomeHold             = "hold"
	OutcomeExhausted        = "exhausted"
	OutcomeDeferred         = "deferred"
	OutcomeNotGated         = "not_gated"
)

// Gate kinds.
const (
	GateValue                       = "value_gate"
	GateIntentUndetermined          = "intent_undetermined"
	GateIntentUndeterminedExhausted = "intent_undetermined_exhausted"
	GateToolUndetermined            = "tool_undetermined"
	GateToolUndeterminedExhausted   = "tool_undetermined_exhausted"
	GateBranchUnresolved            = "branch_unresolved"
	GateBranchConflict              = "branch_conflict"
	GateSchemaUnsupported           = "schema_unsupported"
	GateLabelInvalid                = "label_invalid"
	// GatePolicyMismatch: the policy constrains an argument the tool does not declare (a typo
	// in a fields entry, or an argument the server dropped since): the constraint would silently
	// vanish, so the tool is repaired, never run unconstrained.
	GatePolicyMismatch = "policy_mismatch"
	GatePayloadInvalid = "payload_invalid"
	GateNotGated       = "not_gated"
	// GateDefinitionUnpinned: the policy pins the tool (or its whole server) and the listed
	// definition is not the pinned one, or has no pin: held until an operator pins it again.
	// The executor refuses such a verdict with it as its reason, and the gateway ends such a
	// call with it in _meta[MetaReason].
	GateDefinitionUnpinned = "definition_unpinned"
	// GateApprovalRefused: the console approval of exactly this call was denied or expired
	// (the detail and the unmet item's reason say which); outcome refuse.
	GateApprovalRefused = "approval_refused"
)

// Slot kinds, statuses and routes.
const (
	KindValue     = "value"
	KindCondition = "condition"
	KindApproval  = "approval"
	KindBranch    = "branch"

	StatusKnown   = "known"
	StatusNull    = "null"
	StatusUnknown = "unknown"

	RouteAskUser          = "ask_user"
	RouteSystemLookup     = "system_lookup"
	RouteDefinitionRepair = "definition_repair"
)

// Question kinds.
const (
	QuestionValue         = "value"
	QuestionApproval      = "approval"
	QuestionBranch        = "branch"
	QuestionRestateIntent = "restate_intent"
	QuestionRestateAction = "restate_action"
	// QuestionReviewDraft shows a drafted value in full (Value), with its digest and size
	// (Draft), for the user to approve exactly as shown.
	QuestionReviewDraft = "review_draft"
)

// Unmet reasons and rejected-answer reasons.
const (
	UnmetInvalidValue   = "invalid_value"
	UnmetInvalidPayload = "invalid_payload"
	UnmetProhibited     = "prohibited"
	UnmetRequiredNull   = "required_null"
	// UnmetDraftHiddenCharacters: a drafted field's draft holds characters a person does not
	// see (default-ignorable, bidirectional controls, controls, private use, unassigned), which
	// its policy does not allow; the draft is not shown for review.
	UnmetDraftHiddenCharacters = "draft_hidden_characters"

	AnswerUnknownQuestion       = "unknown_question"
	AnswerStaleQuestion         = "stale_question"
	AnswerSchemaMismatch        = "schema_mismatch"
	AnswerApprovalValueMismatch = "approval_value_mismatch"
	// AnswerChannelNotAllowed: an approval answered in the host for a tool whose policy takes
	// its approvals in the console only.
	AnswerChannelNotAllowed = "channel_not_allowed"
)

// ApprovalSlotID is the slot id of the unmet item of a record refused on its console
// approval.
const ApprovalSlotID = "$approval"

// Fixed slot ids.
const (
	BranchSlotID  = "$branch"
	PayloadSlotID = "$payload"
	C1SlotID      = "c1_when_case"
	C2SlotID      = "c2_user_action_name"
	C3SlotID      = "c3_tool"
)

// Ask ceilings (docs/design.md): the attempt at the ceiling is exhausted.
const (
	IntentAskLimit = 2
	ToolAskLimit   = 2
	ValueAskLimit  = 3
)

// Outcomes lists every outcome, for whoever counts or checks them.
func Outcomes() []string {
	return []string{OutcomeVerdictIssued, OutcomeAskUser, OutcomeSystemLookup, OutcomeDefinitionRepair,
		OutcomeHold, OutcomeExhausted, OutcomeDeferred, OutcomeNotGated, OutcomeRefuse}
}

// Record is the decision record (docs/preflight.md). Package apijson writes it from the struct tags
// of Record and the types it holds. Nil slices marshal as null where the contract wants null ("no
// count was made"), so a run that made the count always sets them non-nil.
type Record struct {
	SchemaVersion    string          `json:"schema_version"`
	RecordID         string          `json:"record_id"`
	ActionKey        *string         `json:"action_key"`
	Phase            *string         `json:"phase"`
	Principal        string          `json:"principal"`
	ConversationID   string          `json:"conversation_id,omitempty"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	ToolSchemaDigest *string         `json:"tool_schema_digest"`
	PolicyVersion    string          `json:"policy_version"`
	Fixed            *Fixed          `json:"fixed"`
	Slots            []Slot          `json:"slots"`
	ExtraFields      []ExtraField    `json:"extra_fields"`
	UserChecklist    []CheckResult   `json:"user_checklist"`
	UnknownCount     *int            `json:"unknown_count"`
	Unmet            []Unmet         `json:"unmet"`
	AskCeiling       []string        `json:"ask_ceiling_reached"`
	Questions        []Question      `json:"questions"`
	RejectedAnswers  []RejectedAns   `json:"rejected_answers"`
	Notices          []string        `json:"notices"`
	AdvisoryNotes    string          `json:"advisory_notes"`
	InstructionPlain bool            `json:"instruction_plain_string"`
	MeasurementErrs  []MeasureError  `json:"measurement_errors,omitempty"`
	Gate             Gate            `json:"gate"`
	Outcome          string          `json:"outcome"`
	CallArguments    map[string]any  `json:"call_arguments"`
	ArgumentsDigest  *string         `json:"arguments_digest"`
	Verdict          *string         `json:"verdict"`
	VerdictID        *string         `json:"verdict_id"`
	Timestamp        string          `json:"timestamp"`
	Deferred         *DeferredIntent `json:"deferred_input,omitzero"`
	// Occurrence names, on the record of a trigger run, the deferred record it ran and which
	// occurrence of it the run was: only a verdict_issued run uses the occurrence up.
	Occurrence *Occurrence `json:"deferred,omitzero"`
	// PrincipalAuth says how Principal was established; verdictd sets it on every record it
	// decides for an HTTP caller.
	PrincipalAuth *PrincipalAuth `json:"principal_auth,omitzero"`
	// TraceID is the W3C trace id the preflight ran under (32 hex digits): verdictd's own when
	// it traces, or its caller's when the caller is trusted for tracing and sent trace context;
	// never one an untrusted caller chose. It joins the record to the trace in a tracing backend.
	TraceID string `json:"trace_id,omitempty"`
	// Approval is the call's console approval, when its tool takes approvals in the console
	// and the record created, found or acted on one (docs/approvals.md).
	Approval *RecordApproval `json:"approval,omitzero"`
}

// PrincipalAuth says how a record's principal was established: by the caller's entry, which
// lists the principals it may act for, or by the user's own token the caller forwarded. It
// never holds the token: TokenHash is "sha256:" and the hex SHA-256 of the token's jti (with
// its issuer), or of the token when it has no jti.
type PrincipalAuth struct {
	Method    string `json:"method"`
	Caller    string `json:"caller,omitempty"`
	Issuer    string `json:"issuer,omitempty"`
	TokenHash string `json:"token_hash,omitempty"`
}

// PrincipalAuth methods: the caller's entry listed the principal, or a subject token named it
// (a JWT verified against its issuer's keys, or an opaque token its issuer introspected).
const (
	PrincipalByCaller        = "caller"
	PrincipalByJWT           = "oidc_jwt"
	PrincipalByIntrospection = "introspection"
)

// Fixed is the fixed checklist (C1–C3).
type Fixed struct {
	C1WhenCase       *string   `json:"c1_when_case"`
	C1Source         string    `json:"c1_source,omitempty"`
	C2UserActionName *string   `json:"c2_user_action_name"`
	C2Source         *string   `json:"c2_source"`
	C3ProviderAction *string   `json:"c3_provider_action_name"`
	C3Match          *C3Result `json:"c3_match"`
}

// C3Result is the tool-match decision. Approved is true only on an explicit approval.
type C3Result struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Slot is one item that must be settled.
type Slot struct {
	SlotID             string     `json:"slot_id"`
	Kind               string     `json:"kind"`
	Status             string     `json:"status"`
	Value              any        `json:"value,omitzero"`
	Source             *Source    `json:"source"`
	OriginSource       *Source    `json:"origin_source"`
	AllowedSources     []Source   `json:"allowed_sources"`
	Route              *string    `json:"route"`
	LookupFailed       bool       `json:"lookup_failed"`
	PendingAtTrigger   bool       `json:"pending_at_trigger"`
	ResolvedAt         string     `json:"resolved_at"`
	Met                *bool      `json:"met,omitzero"`
	Proposed           bool       `json:"proposed,omitzero"`
	Required           bool       `json:"required,omitzero"`
	RejectedCandidates []Rejected `json:"rejected_candidates,omitempty"`
	AskCeilingReached  bool       `json:"ask_ceiling_reached,omitzero"`
	Asks               int        `json:"asks,omitzero"`
	Inputs             []string   `json:"inputs,omitempty"`
	Approves           string     `json:"approves,omitempty"`
	// ApprovedBy is the approver of an approval slot settled out of band (source
	// console_approval): "<issuer>#<sub>" in the console, DecidedByWebhook for the webhook.
	ApprovedBy string `json:"approved_by,omitempty"`
	Shown      any    `json:"shown,omitzero"`
	Offered    *Offer `json:"offered,omitzero"`
	// Draft is the digest and size of a drafted field's proposed value: set on every slot of a
	// drafted field that has a draft, reviewed or not.
	Draft *DraftRef `json:"draft,omitzero"`
	// Measurements are the measurements the value or condition was settled from, with when.
	Measurements []MeasurementRef `json:"measurements,omitempty"`
	Note         string           `json:"note,omitempty"`
}

// DraftRef identifies a drafted value: the canonical digest of its JSON value ("sha256:…") and
// the size in bytes of that canonical form. An approval counts only for the draft of exactly
// this digest.
type DraftRef struct {
	Digest string `json:"digest"`
	Bytes  int    `json:"bytes"`
}

// Offer is a prior-state value offered to the user for confirmation; it settles nothing.
type Offer struct {
	Value  any    `json:"value"`
	Source Source `json:"source"`
}

// Rejected is a located candidate that did not ground.
type Rejected struct {
	Segment int    `json:"segment"`
	Span    Span   `json:"span"`
	Value   any    `json:"value"`
	Reason  string `json:"reason"`
}

// ExtraField is a known optional argument outside the slot set: sent, never counted.
type ExtraField struct {
	Field  string `json:"field"`
	Value  any    `json:"value"`
	Source Source `json:"source"`
}

// CheckResult is the state of one user-checklist item. An item of kind confirm carries the
// approval's value and what was shown, like an approval slot.
type CheckResult struct {
	ItemID       string   `json:"item_id"`
	Kind         string   `json:"kind,omitempty"`
	Status       string   `json:"status"`
	Source       *Source  `json:"source"`
	Route        *string  `json:"route"`
	Met          *bool    `json:"met,omitzero"`
	Inputs       []string `json:"inputs,omitempty"`
	LookupFailed bool     `json:"lookup_failed,omitzero"`
	Value        any      `json:"value,omitzero"`
	Shown        any      `json:"shown,omitzero"`
	// ApprovedBy is the approver of a confirm item settled in the console.
	ApprovedBy        string           `json:"approved_by,omitempty"`
	AskCeilingReached bool             `json:"ask_ceiling_reached,omitzero"`
	Asks              int              `json:"asks,omitzero"`
	Measurements      []MeasurementRef `json:"measurements,omitempty"`
	Note              string           `json:"note,omitempty"`
}

// Unmet is a finished check that prohibits.
type Unmet struct {
	SlotID string `json:"slot_id"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Question is one ask in the batched list.
type Question struct {
	QuestionID string `json:"question_id"`
	SlotID     string `json:"slot_id"`
	Kind       string `json:"kind"`
	Message    string `json:"message"`
	// Schema is the JSON Schema an answer must satisfy.
	Schema  json.RawMessage `json:"schema,omitzero"`
	Shown   any             `json:"shown,omitzero"`
	Value   any             `json:"value,omitzero"`
	Options [][]string      `json:"options,omitempty"`
	// Draft is set on a review_draft question: the digest and size of the draft in Value.
	Draft *DraftRef `json:"draft,omitzero"`
}

// RejectedAns is an answer that counted for nothing.
type RejectedAns struct {
	QuestionID string `json:"question_id"`
	SlotID     string `json:"slot_id,omitempty"`
	Reason     string `json:"reason"`
}

// MeasureError is a failed measurement.
type MeasureError struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// Occurrence is the deferred record a trigger run ran, the occurrence (from 1) the run was —
// one more than the verdicts the deferred record had issued before it — and how many verdicts
// the policy in force allowed the deferred record: 1 for a one-off intent, the recurrence's
// count for a recurring one, 0 when the count is not bounded. The audit holds the records to
// it.
type Occurrence struct {
	RecordID   string `json:"record_id"`
	Occurrence int    `json:"occurrence"`
	Allowed    int    `json:"allowed"`
}

// DeferredIntent is what an at_instruction run stores for its trigger run: the intent — the
// instruction, the caller's reading of it (timing, action name, proposed call), the answers and
// the user checklist — and never a measurement or pre-set value, which the trigger re-fetches.
type DeferredIntent struct {
	Instruction   Instruction        `json:"instruction"`
	Intent        *Intent            `json:"intent,omitzero"`
	Candidates    []Candidate        `json:"candidates,omitempty"`
	UserAnswers   []Answer           `json:"user_answers"`
	UserChecklist []RequestCheckItem `json:"user_checklist"`
}

// Gate describes which gate decided the record. Gate-1 kinds, and only they, carry the attempt
// the next ask will be: intent kinds next_intent_attempt, tool kinds next_tool_attempt, null
// once the asks are spent. Each is a pointer to a struct embedded in Gate, so that the member
// is present exactly when the pointer is set, for encoding/json and encoding/json/v2 alike.
type Gate struct {
	Kind        string `json:"kind"`
	UserMessage string `json:"user_message,omitempty"`
	*NextIntentAttempt
	*NextToolAttempt
	// BranchOptions are set on branch kinds only, which always have at least one.
	BranchOptions [][]string     `json:"branch_options,omitempty"`
	Detail        string         `json:"detail,omitempty"`
	Diag          map[string]any `json:"_diag,omitempty"`
}

// NextIntentAttempt is the next_intent_attempt of an intent_undetermined gate; Attempt is nil
// on intent_undetermined_exhausted.
type NextIntentAttempt struct {
	Attempt *int `json:"next_intent_attempt"`
}

// NextToolAttempt is the next_tool_attempt of a tool_undetermined gate; Attempt is nil on
// tool_undetermined_exhausted.
type NextToolAttempt struct {
	Attempt *int `json:"next_tool_attempt"`
}

// VerdictSlot is one entry of the verdict's `slots` claim.
type VerdictSlot struct {
	ID     string  `json:"id"`
	Status string  `json:"status"`
	Source *Source `json:"source"`
}

// MeasurementRef records which declared measurement produced a value, how, and when.
type MeasurementRef struct {
	Name string `json:"name"`
	Via  string `json:"via"` // http | mcp
	At   string `json:"at"`
}

// Source names a place a slot value can come from, in cascade order, or evaluation (for
// conditions).
type Source string

// The sources of the cascade, in search order, plus evaluation.
const (
	SourceUserAnswer   Source = "user_answer"
	SourceInstruction  Source = "instruction"
	SourcePreSetData   Source = "pre_set_data"
	SourceMeasuredData Source = "measured_data"
	SourcePriorState   Source = "prior_state"
	SourceEvaluation   Source = "evaluation"
	// SourceReviewedDraft is content the model drafted on purpose (a message body, a memo) that
	// the user approved as shown, bound to its digest. It is not on the cascade: only a field
	// the policy marks drafted is settled from it, and it settles nothing else.
	SourceReviewedDraft Source = "reviewed_draft"
	// SourceConsoleApproval is an approval slot settled by an approver's decision in the
	// console, bound to the call's arguments digest (the slot's approved_by names who).
	SourceConsoleApproval Source = "console_approval"
)
