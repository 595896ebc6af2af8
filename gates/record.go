package gates

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/verdictgate/verdict/internal/jsonw"
	"github.com/verdictgate/verdict/policy"
)

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

const approvalSlotPrefix = "confirm:"

// Record is the decision record (docs/preflight.md). Nil slices marshal as null where the contract
// wants null ("no count was made"), so a run that made the count always sets them non-nil.
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
	Deferred         *DeferredIntent `json:"deferred_input,omitempty"`
}

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
	SlotID             string          `json:"slot_id"`
	Kind               string          `json:"kind"`
	Status             string          `json:"status"`
	Value              any             `json:"value,omitempty"`
	Source             *policy.Source  `json:"source"`
	OriginSource       *policy.Source  `json:"origin_source"`
	AllowedSources     []policy.Source `json:"allowed_sources"`
	Route              *string         `json:"route"`
	LookupFailed       bool            `json:"lookup_failed"`
	PendingAtTrigger   bool            `json:"pending_at_trigger"`
	ResolvedAt         string          `json:"resolved_at"`
	Met                *bool           `json:"met,omitempty"`
	Proposed           bool            `json:"proposed,omitempty"`
	Required           bool            `json:"required,omitempty"`
	RejectedCandidates []Rejected      `json:"rejected_candidates,omitempty"`
	AskCeilingReached  bool            `json:"ask_ceiling_reached,omitempty"`
	Asks               int             `json:"asks,omitempty"`
	Inputs             []string        `json:"inputs,omitempty"`
	Approves           string          `json:"approves,omitempty"`
	Shown              any             `json:"shown,omitempty"`
	Offered            *Offer          `json:"offered,omitempty"`
	// Measurements are the measurements the value or condition was settled from, with when.
	Measurements []MeasurementRef `json:"measurements,omitempty"`
	Note         string           `json:"note,omitempty"`
}

// Offer is a prior-state value offered to the user for confirmation; it settles nothing.
type Offer struct {
	Value  any           `json:"value"`
	Source policy.Source `json:"source"`
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
	Field  string        `json:"field"`
	Value  any           `json:"value"`
	Source policy.Source `json:"source"`
}

// CheckResult is the state of one user-checklist item. An item of kind confirm carries the
// approval's value and what was shown, like an approval slot.
type CheckResult struct {
	ItemID            string           `json:"item_id"`
	Kind              string           `json:"kind,omitempty"`
	Status            string           `json:"status"`
	Source            *policy.Source   `json:"source"`
	Route             *string          `json:"route"`
	Met               *bool            `json:"met,omitempty"`
	Inputs            []string         `json:"inputs,omitempty"`
	LookupFailed      bool             `json:"lookup_failed,omitempty"`
	Value             any              `json:"value,omitempty"`
	Shown             any              `json:"shown,omitempty"`
	AskCeilingReached bool             `json:"ask_ceiling_reached,omitempty"`
	Asks              int              `json:"asks,omitempty"`
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
	Schema  json.RawMessage `json:"schema,omitempty"`
	Shown   any             `json:"shown,omitempty"`
	Value   any             `json:"value,omitempty"`
	Options [][]string      `json:"options,omitempty"`
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

// DeferredIntent is what an at_instruction run stores for its trigger run: the intent — the
// instruction, the caller's reading of it (timing, action name, proposed call), the answers and
// the user checklist — and never a measurement or pre-set value, which the trigger re-fetches.
type DeferredIntent struct {
	Instruction   Instruction        `json:"instruction"`
	Intent        *Intent            `json:"intent,omitempty"`
	Candidates    []Candidate        `json:"candidates,omitempty"`
	UserAnswers   []Answer           `json:"user_answers"`
	UserChecklist []RequestCheckItem `json:"user_checklist"`
}

// Gate describes which gate decided the record. Gate-1 fields appear only on Gate-1 kinds.
type Gate struct {
	Kind              string
	UserMessage       string
	NextIntentAttempt *int
	NextToolAttempt   *int
	BranchOptions     [][]string
	Detail            string
	Diag              map[string]any
}

// MarshalJSON writes next_*_attempt (null when exhausted) only on the kinds that carry them.
func (g Gate) MarshalJSON() ([]byte, error) {
	m := map[string]any{"kind": g.Kind}
	if g.UserMessage != "" {
		m["user_message"] = g.UserMessage
	}
	switch g.Kind {
	case GateIntentUndetermined, GateIntentUndeterminedExhausted:
		m["next_intent_attempt"] = g.NextIntentAttempt
	case GateToolUndetermined, GateToolUndeterminedExhausted:
		m["next_tool_attempt"] = g.NextToolAttempt
	case GateBranchUnresolved, GateBranchConflict:
		m["branch_options"] = g.BranchOptions
	}
	if g.Detail != "" {
		m["detail"] = g.Detail
	}
	if len(g.Diag) > 0 {
		m["_diag"] = g.Diag
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (g *Gate) UnmarshalJSON(b []byte) error {
	var w struct {
		Kind              string         `json:"kind"`
		UserMessage       string         `json:"user_message"`
		NextIntentAttempt *int           `json:"next_intent_attempt"`
		NextToolAttempt   *int           `json:"next_tool_attempt"`
		BranchOptions     [][]string     `json:"branch_options"`
		Detail            string         `json:"detail"`
		Diag              map[string]any `json:"_diag"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*g = Gate{w.Kind, w.UserMessage, w.NextIntentAttempt, w.NextToolAttempt, w.BranchOptions, w.Detail, w.Diag}
	return nil
}

// VerdictSlot is one entry of the verdict's `slots` claim.
type VerdictSlot struct {
	ID     string         `json:"id"`
	Status string         `json:"status"`
	Source *policy.Source `json:"source"`
}

// VerdictSlots lists every slot, condition and checklist item for the verdict's `slots` claim.
func (r *Record) VerdictSlots() []VerdictSlot {
	out := make([]VerdictSlot, 0, len(r.Slots)+len(r.UserChecklist))
	for _, s := range r.Slots {
		out = append(out, VerdictSlot{ID: s.SlotID, Status: s.Status, Source: s.Source})
	}
	for _, c := range r.UserChecklist {
		out = append(out, VerdictSlot{ID: c.ItemID, Status: c.Status, Source: c.Source})
	}
	return out
}

// TriggerRequest builds the at_trigger request of a deferred record: the stored intent with
// the trigger's fresh answers after the stored ones and the pre-set data as it is now. The
// run re-fetches everything else (schema, policy, measurements).
func (r *Record) TriggerRequest(answers []Answer, preSet map[string]PreSet) (*Request, error) {
	if r.Outcome != OutcomeDeferred || r.Deferred == nil || r.ActionKey == nil {
		return nil, fmt.Errorf("gates: record %s is not a deferred record", r.RecordID)
	}
	phase, key := PhaseAtTrigger, *r.ActionKey
	d := r.Deferred
	return &Request{
		Principal:      r.Principal,
		ConversationID: r.ConversationID,
		Server:         r.Server,
		Tool:           r.Tool,
		Phase:          &phase,
		ActionKey:      &key,
		Instruction:    d.Instruction,
		Intent:         d.Intent,
		Candidates:     slices.Clone(d.Candidates),
		UserAnswers:    append(slices.Clone(d.UserAnswers), answers...),
		PreSetData:     preSet,
		UserChecklist:  slices.Clone(d.UserChecklist),
	}, nil
}

// AppendJSON appends the record's JSON to b: byte for byte what json.Marshal writes for r
// (TestRecordAppendJSON and every scenario hold it to that), without reflection for the parts
// of a record that every preflight has. verdictd encodes each record once, and those bytes are
// both the stored record and the response body. Values of rarer types (the deferred intent,
// question schemas, values of other dynamic types) are written by encoding/json itself; an
// error is what json.Marshal would report.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	e := recordEncoder{b: b}
	e.record(r)
	if e.err != nil {
		return b, e.err
	}
	return e.b, nil
}

// recordEncoder appends JSON to b; the first failure is kept in err and ends the output.
type recordEncoder struct {
	b   []byte
	err error
}

func (e *recordEncoder) raw(s string) { e.b = append(e.b, s...) }

func (e *recordEncoder) str(s string) { e.b = appendJSONString(e.b, s) }

func (e *recordEncoder) strPtr(s *string) {
	if s == nil {
		e.raw("null")
		return
	}
	e.str(*s)
}

func (e *recordEncoder) sourcePtr(s *policy.Source) {
	if s == nil {
		e.raw("null")
		return
	}
	e.str(string(*s))
}

func (e *recordEncoder) boolean(v bool) {
	if v {
		e.raw("true")
	} else {
		e.raw("false")
	}
}

func (e *recordEncoder) integer(n int) { e.b = strconv.AppendInt(e.b, int64(n), 10) }

func (e *recordEncoder) strings(ss []string) {
	if ss == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i, s := range ss {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(s)
	}
	e.b = append(e.b, ']')
}

func (e *recordEncoder) stringLists(ls [][]string) {
	if ls == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i, l := range ls {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.strings(l)
	}
	e.b = append(e.b, ']')
}

// marshal writes v with encoding/json.
func (e *recordEncoder) marshal(v any) {
	out, err := json.Marshal(v)
	if err != nil {
		e.fail(err)
		return
	}
	e.b = append(e.b, out...)
}

func (e *recordEncoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// value writes a dynamic value: the types decoded JSON holds directly, anything else through
// encoding/json.
func (e *recordEncoder) value(v any) {
	switch x := v.(type) {
	case nil:
		e.raw("null")
	case string:
		e.str(x)
	case bool:
		e.boolean(x)
	case json.Number:
		s := string(x)
		if s == "" {
			s = "0" // as encoding/json writes an empty Number
		}
		if !isValidNumber(s) {
			e.marshal(x) // for encoding/json's error
			return
		}
		e.raw(s)
	case float64:
		e.float(x)
	case int:
		e.integer(x)
	case int64:
		e.b = strconv.AppendInt(e.b, x, 10)
	case map[string]any:
		e.object(x)
	case []any:
		if x == nil {
			e.raw("null")
			return
		}
		e.b = append(e.b, '[')
		for i, el := range x {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.value(el)
		}
		e.b = append(e.b, ']')
	default:
		e.marshal(x)
	}
}

// object writes a map with its keys sorted, as encoding/json does.
func (e *recordEncoder) object(m map[string]any) {
	if m == nil {
		e.raw("null")
		return
	}
	var small [16]string // call arguments and diagnostics are small objects: no allocation
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.b = append(e.b, '{')
	for i, k := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(k)
		e.b = append(e.b, ':')
		e.value(m[k])
	}
	e.b = append(e.b, '}')
}

// float writes f as encoding/json writes a float64.
func (e *recordEncoder) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		e.marshal(f) // for encoding/json's error
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json (and ES6) write exponents.
		if n := len(e.b); n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
			e.b[n-2] = e.b[n-1]
			e.b = e.b[:n-1]
		}
	}
}

func (e *recordEncoder) record(r *Record) {
	if r == nil {
		e.raw("null")
		return
	}
	e.raw(`{"schema_version":`)
	e.str(r.SchemaVersion)
	e.raw(`,"record_id":`)
	e.str(r.RecordID)
	e.raw(`,"action_key":`)
	e.strPtr(r.ActionKey)
	e.raw(`,"phase":`)
	e.strPtr(r.Phase)
	e.raw(`,"principal":`)
	e.str(r.Principal)
	if r.ConversationID != "" {
		e.raw(`,"conversation_id":`)
		e.str(r.ConversationID)
	}
	e.raw(`,"server":`)
	e.str(r.Server)
	e.raw(`,"tool":`)
	e.str(r.Tool)
	e.raw(`,"tool_schema_digest":`)
	e.strPtr(r.ToolSchemaDigest)
	e.raw(`,"policy_version":`)
	e.str(r.PolicyVersion)
	e.raw(`,"fixed":`)
	e.fixed(r.Fixed)
	e.raw(`,"slots":`)
	if r.Slots == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i := range r.Slots {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.slot(&r.Slots[i])
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"extra_fields":`)
	if r.ExtraFields == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i, x := range r.ExtraFields {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.raw(`{"field":`)
			e.str(x.Field)
			e.raw(`,"value":`)
			e.value(x.Value)
			e.raw(`,"source":`)
			e.str(string(x.Source))
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"user_checklist":`)
	if r.UserChecklist == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i := range r.UserChecklist {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.check(&r.UserChecklist[i])
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"unknown_count":`)
	if r.UnknownCount == nil {
		e.raw("null")
	} else {
		e.integer(*r.UnknownCount)
	}
	e.raw(`,"unmet":`)
	if r.Unmet == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i, u := range r.Unmet {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.raw(`{"slot_id":`)
			e.str(u.SlotID)
			e.raw(`,"reason":`)
			e.str(u.Reason)
			if u.Detail != "" {
				e.raw(`,"detail":`)
				e.str(u.Detail)
			}
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"ask_ceiling_reached":`)
	e.strings(r.AskCeiling)
	e.raw(`,"questions":`)
	if r.Questions == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i := range r.Questions {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.question(&r.Questions[i])
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"rejected_answers":`)
	if r.RejectedAnswers == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i, a := range r.RejectedAnswers {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.raw(`{"question_id":`)
			e.str(a.QuestionID)
			if a.SlotID != "" {
				e.raw(`,"slot_id":`)
				e.str(a.SlotID)
			}
			e.raw(`,"reason":`)
			e.str(a.Reason)
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"notices":`)
	e.strings(r.Notices)
	e.raw(`,"advisory_notes":`)
	e.str(r.AdvisoryNotes)
	e.raw(`,"instruction_plain_string":`)
	e.boolean(r.InstructionPlain)
	if len(r.MeasurementErrs) > 0 {
		e.raw(`,"measurement_errors":[`)
		for i, m := range r.MeasurementErrs {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.raw(`{"name":`)
			e.str(m.Name)
			e.raw(`,"error":`)
			e.str(m.Error)
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"gate":`)
	e.gate(&r.Gate)
	e.raw(`,"outcome":`)
	e.str(r.Outcome)
	e.raw(`,"call_arguments":`)
	e.object(r.CallArguments)
	e.raw(`,"arguments_digest":`)
	e.strPtr(r.ArgumentsDigest)
	e.raw(`,"verdict":`)
	e.strPtr(r.Verdict)
	e.raw(`,"verdict_id":`)
	e.strPtr(r.VerdictID)
	e.raw(`,"timestamp":`)
	e.str(r.Timestamp)
	if r.Deferred != nil {
		// Request types, written by their own encoders; only deferred records carry them.
		e.raw(`,"deferred_input":`)
		e.marshal(r.Deferred)
	}
	e.b = append(e.b, '}')
}

func (e *recordEncoder) fixed(f *Fixed) {
	if f == nil {
		e.raw("null")
		return
	}
	e.raw(`{"c1_when_case":`)
	e.strPtr(f.C1WhenCase)
	if f.C1Source != "" {
		e.raw(`,"c1_source":`)
		e.str(f.C1Source)
	}
	e.raw(`,"c2_user_action_name":`)
	e.strPtr(f.C2UserActionName)
	e.raw(`,"c2_source":`)
	e.strPtr(f.C2Source)
	e.raw(`,"c3_provider_action_name":`)
	e.strPtr(f.C3ProviderAction)
	e.raw(`,"c3_match":`)
	if m := f.C3Match; m == nil {
		e.raw("null")
	} else {
		e.raw(`{"approved":`)
		e.boolean(m.Approved)
		if m.By != "" {
			e.raw(`,"by":`)
			e.str(m.By)
		}
		if m.Reason != "" {
			e.raw(`,"reason":`)
			e.str(m.Reason)
		}
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, '}')
}

func (e *recordEncoder) measurements(ms []MeasurementRef) {
	e.b = append(e.b, '[')
	for i, m := range ms {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.raw(`{"name":`)
		e.str(m.Name)
		e.raw(`,"via":`)
		e.str(m.Via)
		e.raw(`,"at":`)
		e.str(m.At)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ']')
}

func (e *recordEncoder) slot(s *Slot) {
	e.raw(`{"slot_id":`)
	e.str(s.SlotID)
	e.raw(`,"kind":`)
	e.str(s.Kind)
	e.raw(`,"status":`)
	e.str(s.Status)
	if s.Value != nil {
		e.raw(`,"value":`)
		e.value(s.Value)
	}
	e.raw(`,"source":`)
	e.sourcePtr(s.Source)
	e.raw(`,"origin_source":`)
	e.sourcePtr(s.OriginSource)
	e.raw(`,"allowed_sources":`)
	if s.AllowedSources == nil {
		e.raw("null")
	} else {
		e.b = append(e.b, '[')
		for i, src := range s.AllowedSources {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.str(string(src))
		}
		e.b = append(e.b, ']')
	}
	e.raw(`,"route":`)
	e.strPtr(s.Route)
	e.raw(`,"lookup_failed":`)
	e.boolean(s.LookupFailed)
	e.raw(`,"pending_at_trigger":`)
	e.boolean(s.PendingAtTrigger)
	e.raw(`,"resolved_at":`)
	e.str(s.ResolvedAt)
	if s.Met != nil {
		e.raw(`,"met":`)
		e.boolean(*s.Met)
	}
	if s.Proposed {
		e.raw(`,"proposed":true`)
	}
	if s.Required {
		e.raw(`,"required":true`)
	}
	if len(s.RejectedCandidates) > 0 {
		e.raw(`,"rejected_candidates":[`)
		for i, c := range s.RejectedCandidates {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.raw(`{"segment":`)
			e.integer(c.Segment)
			e.raw(`,"span":[`)
			e.integer(c.Span[0])
			e.b = append(e.b, ',')
			e.integer(c.Span[1])
			e.raw(`],"value":`)
			e.value(c.Value)
			e.raw(`,"reason":`)
			e.str(c.Reason)
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	if s.AskCeilingReached {
		e.raw(`,"ask_ceiling_reached":true`)
	}
	if s.Asks != 0 {
		e.raw(`,"asks":`)
		e.integer(s.Asks)
	}
	if len(s.Inputs) > 0 {
		e.raw(`,"inputs":`)
		e.strings(s.Inputs)
	}
	if s.Approves != "" {
		e.raw(`,"approves":`)
		e.str(s.Approves)
	}
	if s.Shown != nil {
		e.raw(`,"shown":`)
		e.value(s.Shown)
	}
	if o := s.Offered; o != nil {
		e.raw(`,"offered":{"value":`)
		e.value(o.Value)
		e.raw(`,"source":`)
		e.str(string(o.Source))
		e.b = append(e.b, '}')
	}
	if len(s.Measurements) > 0 {
		e.raw(`,"measurements":`)
		e.measurements(s.Measurements)
	}
	if s.Note != "" {
		e.raw(`,"note":`)
		e.str(s.Note)
	}
	e.b = append(e.b, '}')
}

func (e *recordEncoder) check(c *CheckResult) {
	e.raw(`{"item_id":`)
	e.str(c.ItemID)
	if c.Kind != "" {
		e.raw(`,"kind":`)
		e.str(c.Kind)
	}
	e.raw(`,"status":`)
	e.str(c.Status)
	e.raw(`,"source":`)
	e.sourcePtr(c.Source)
	e.raw(`,"route":`)
	e.strPtr(c.Route)
	if c.Met != nil {
		e.raw(`,"met":`)
		e.boolean(*c.Met)
	}
	if len(c.Inputs) > 0 {
		e.raw(`,"inputs":`)
		e.strings(c.Inputs)
	}
	if c.LookupFailed {
		e.raw(`,"lookup_failed":true`)
	}
	if c.Value != nil {
		e.raw(`,"value":`)
		e.value(c.Value)
	}
	if c.Shown != nil {
		e.raw(`,"shown":`)
		e.value(c.Shown)
	}
	if c.AskCeilingReached {
		e.raw(`,"ask_ceiling_reached":true`)
	}
	if c.Asks != 0 {
		e.raw(`,"asks":`)
		e.integer(c.Asks)
	}
	if len(c.Measurements) > 0 {
		e.raw(`,"measurements":`)
		e.measurements(c.Measurements)
	}
	if c.Note != "" {
		e.raw(`,"note":`)
		e.str(c.Note)
	}
	e.b = append(e.b, '}')
}

func (e *recordEncoder) question(q *Question) {
	e.raw(`{"question_id":`)
	e.str(q.QuestionID)
	e.raw(`,"slot_id":`)
	e.str(q.SlotID)
	e.raw(`,"kind":`)
	e.str(q.Kind)
	e.raw(`,"message":`)
	e.str(q.Message)
	if len(q.Schema) > 0 {
		// encoding/json checks and compacts a raw message, escaping HTML characters.
		e.raw(`,"schema":`)
		e.marshal(q.Schema)
	}
	if q.Shown != nil {
		e.raw(`,"shown":`)
		e.value(q.Shown)
	}
	if q.Value != nil {
		e.raw(`,"value":`)
		e.value(q.Value)
	}
	if len(q.Options) > 0 {
		e.raw(`,"options":`)
		e.stringLists(q.Options)
	}
	e.b = append(e.b, '}')
}

// gate writes what Gate.MarshalJSON writes: its members in sorted order, as encoding/json
// writes a map.
func (e *recordEncoder) gate(g *Gate) {
	e.b = append(e.b, '{')
	if len(g.Diag) > 0 {
		e.raw(`"_diag":`)
		e.object(g.Diag)
		e.b = append(e.b, ',')
	}
	switch g.Kind {
	case GateBranchUnresolved, GateBranchConflict:
		e.raw(`"branch_options":`)
		e.stringLists(g.BranchOptions)
		e.b = append(e.b, ',')
	}
	if g.Detail != "" {
		e.raw(`"detail":`)
		e.str(g.Detail)
		e.b = append(e.b, ',')
	}
	e.raw(`"kind":`)
	e.str(g.Kind)
	var next *int
	switch g.Kind {
	case GateIntentUndetermined, GateIntentUndeterminedExhausted:
		e.raw(`,"next_intent_attempt":`)
		next = g.NextIntentAttempt
	case GateToolUndetermined, GateToolUndeterminedExhausted:
		e.raw(`,"next_tool_attempt":`)
		next = g.NextToolAttempt
	}
	switch g.Kind {
	case GateIntentUndetermined, GateIntentUndeterminedExhausted, GateToolUndetermined, GateToolUndeterminedExhausted:
		if next == nil {
			e.raw("null")
		} else {
			e.integer(*next)
		}
	}
	if g.UserMessage != "" {
		e.raw(`,"user_message":`)
		e.str(g.UserMessage)
	}
	e.b = append(e.b, '}')
}

// isValidNumber reports whether s is a JSON number literal, as encoding/json requires of a
// json.Number it writes.
func isValidNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}

// appendJSONString quotes s as json.Marshal does.
func appendJSONString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }
