package api

// The decision record's names (docs/preflight.md).

// SchemaVersion is the decision-record schema version.
const SchemaVersion = "1"

// Phases.
const (
	PhaseAtInstruction = "at_instruction"
	PhaseAtTrigger     = "at_trigger"
)

// Outcomes (docs/preflight.md). Precedence: hold > definition_repair > exhausted > system_lookup > ask_user.
const (
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
)

// Unmet reasons and rejected-answer reasons.
const (
	UnmetInvalidValue   = "invalid_value"
	UnmetInvalidPayload = "invalid_payload"
	UnmetProhibited     = "prohibited"
	UnmetRequiredNull   = "required_null"

	AnswerUnknownQuestion       = "unknown_question"
	AnswerStaleQuestion         = "stale_question"
	AnswerSchemaMismatch        = "schema_mismatch"
	AnswerApprovalValueMismatch = "approval_value_mismatch"
)

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
		OutcomeHold, OutcomeExhausted, OutcomeDeferred, OutcomeNotGated}
}
