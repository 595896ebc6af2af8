package api

import "encoding/json"

// Capture is what one preflight decided from, kept in its stored decision record (member
// "capture") when verdictd's records.capture_requests is on, so that `verdictd policy replay`
// can decide the call again under another policy (docs/policy-testing.md): the request as
// verdictd decoded it (a trigger run's as expanded from its deferred record), the tool's
// definition as its server listed it, the time of the run, what the run read from the
// conversation state, the measurements as measured, the C3 webhook's answer and the console
// decisions the run was given.
//
// It is as sensitive as the call's arguments, and more: it holds the whole instruction and the
// measured values, which the record itself never shows. It is never part of the preflight's
// response; a masked export masks it whole.
type Capture struct {
	// Request is the decoded request written again as a caller writes one: replay decodes it
	// exactly as verdictd decodes a request.
	Request json.RawMessage `json:"request"`
	// Tool is the definition {name, description, inputSchema, annotations} the run was given:
	// its name alone when the tool had no usable definition (unlisted, or held by its pin).
	Tool json.RawMessage `json:"tool"`
	// Now is the time the run was decided at (the record's timestamp), RFC 3339.
	Now string `json:"now"`
	// Gate1 are the conversation's Gate-1 ask counters as the run read them, if it did.
	Gate1 *CapturedGate1 `json:"gate1,omitempty"`
	// Asks are the slot ask counts the run read.
	Asks []CapturedAsk `json:"asks,omitempty"`
	// Questions are the issued questions the request's answers were looked up as.
	Questions []CapturedQuestion `json:"questions,omitempty"`
	// Prior are the executed values the run read.
	Prior []CapturedPrior `json:"prior,omitempty"`
	// Measured are the measurements the run performed, by name.
	Measured map[string]CapturedResult `json:"measured,omitempty"`
	// Webhook is the C3 webhook's answer, when the run asked it.
	Webhook *CapturedApproval `json:"webhook,omitempty"`
	// Console are the decided console approvals of the call the run was given.
	Console []CapturedConsole `json:"console,omitempty"`
}

// CapturedGate1 are Gate-1 ask counters as read.
type CapturedGate1 struct {
	Intent int `json:"intent"`
	Tool   int `json:"tool"`
}

// CapturedAsk is how often a slot had been asked under an action key, as read.
type CapturedAsk struct {
	ActionKey string `json:"action_key"`
	SlotID    string `json:"slot_id"`
	Asks      int    `json:"asks"`
}

// CapturedQuestion is what an issued question id stood for when an answer named it; Found is
// false for an id the state did not know.
type CapturedQuestion struct {
	QuestionID string     `json:"question_id"`
	Found      bool       `json:"found"`
	Principal  string     `json:"principal,omitempty"`
	ActionKey  string     `json:"action_key,omitempty"`
	SlotID     string     `json:"slot_id,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Value      any        `json:"value,omitempty"`
	Shown      any        `json:"shown,omitempty"`
	Origin     string     `json:"origin,omitempty"`
	Options    [][]string `json:"options,omitempty"`
}

// CapturedPrior is an executed value read under an action key; Found is false when none was.
type CapturedPrior struct {
	ActionKey string `json:"action_key"`
	Field     string `json:"field"`
	Found     bool   `json:"found"`
	Value     any    `json:"value,omitempty"`
}

// CapturedResult is one measurement's result: its value (null included) or, when Error is
// set, its failure.
type CapturedResult struct {
	Value any    `json:"value"`
	Error string `json:"error,omitempty"`
}

// CapturedApproval is the C3 webhook's answer, or its failure (Error).
type CapturedApproval struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
}

// CapturedConsole is a decided console approval of the call.
type CapturedConsole struct {
	ApprovalID      string `json:"approval_id"`
	ArgumentsDigest string `json:"arguments_digest"`
	State           string `json:"state"`
	DecidedBy       string `json:"decided_by,omitempty"`
}
