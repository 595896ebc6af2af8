package api

import "encoding/json"

// Request is a preflight request (docs/preflight.md). Argument values (candidate values, answers,
// pre-set values) keep numbers as json.Number holding the exact text sent.
type Request struct {
	Principal      string             `json:"principal"`
	ConversationID string             `json:"conversation_id,omitempty"`
	NewRequest     bool               `json:"new_request,omitempty"`
	Server         string             `json:"server"`
	Tool           string             `json:"tool"`
	Phase          *string            `json:"phase,omitempty"`
	ActionKey      *string            `json:"action_key,omitempty"`
	Instruction    Instruction        `json:"instruction"`
	Intent         *Intent            `json:"intent,omitempty"`
	Candidates     []Candidate        `json:"candidates,omitempty"`
	UserAnswers    []Answer           `json:"user_answers,omitempty"`
	PreSetData     map[string]PreSet  `json:"pre_set_data,omitempty"`
	UserChecklist  []RequestCheckItem `json:"user_checklist,omitempty"`
	ToolAttempt    int                `json:"tool_attempt,omitempty"`
	IntentAttempt  int                `json:"intent_attempt,omitempty"`
}

// Instruction is the conversation up to the tool decision: trust-labelled segments, or a plain
// string, which disables the instruction source.
type Instruction struct {
	Segments []Segment
	// Plain is set when the instruction arrived as a plain string (kept in Text): the
	// instruction source is then disabled.
	Plain bool
	Text  string
}

// MarshalJSON writes the form the instruction arrived in.
func (in Instruction) MarshalJSON() ([]byte, error) {
	if in.Plain {
		return json.Marshal(in.Text)
	}
	if in.Segments == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(in.Segments)
}

// Segment is one trust-labelled piece of the conversation.
type Segment struct {
	Text   string `json:"text"`
	Trust  string `json:"trust"`
	Origin string `json:"origin,omitempty"`
}

// Location points at text the model says holds a value: a segment index and a [start, end)
// span in Unicode code points.
type Location struct {
	Segment int  `json:"segment"`
	Span    Span `json:"span"`
}

// Span is a [start, end) pair of code-point offsets. Any two integers decode; whether they
// point anywhere is decided when the location is checked.
type Span [2]int

// Intent is the caller's reading of C1 and C2.
type Intent struct {
	// WhenCase is kept raw: anything but one of the four strings is out of enum, never a
	// decoding error, because the timing is the model's reading and must be asked about.
	WhenCase         json.RawMessage `json:"when_case,omitzero"`
	ActionName       *Location       `json:"action_name,omitempty"`
	ActionNamePreset *PreSet         `json:"action_name_preset,omitempty"`
}

// Candidate is one argument of the model's proposed call, with or without a location. Its
// value is required on the wire (null is a value), and segment and span come together.
type Candidate struct {
	Field   string `json:"field"`
	Segment *int   `json:"segment,omitempty"`
	Span    *Span  `json:"span,omitempty"`
	Value   any    `json:"value"`
}

// Located reports whether the candidate carries a location.
func (c Candidate) Located() bool { return c.Segment != nil && c.Span != nil }

// Answer is a user answer to an issued question. An entry with Approved is an approval of
// exactly Value.
type Answer struct {
	QuestionID string `json:"question_id"`
	Value      Value  `json:"value,omitzero"`
	Approved   *bool  `json:"approved,omitempty"`
	Segment    *int   `json:"segment,omitempty"`
	Span       *Span  `json:"span,omitempty"`
}

// PreSet is a value stored in advance, with its trust.
type PreSet struct {
	Value  Value  `json:"value,omitzero"`
	Trust  string `json:"trust"`
	Origin string `json:"origin,omitempty"`
}

// RequestCheckItem is a user-checklist item sent with the request. Its Status, if any, is
// never trusted: items are verified afresh.
type RequestCheckItem struct {
	ID          string `json:"id,omitempty"`
	Description string `json:"description,omitempty"`
	Expr        string `json:"expr,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Status      string `json:"status,omitempty"`
}

// Value is a JSON value whose presence is tracked: an absent value and an explicit null differ.
type Value struct {
	Set bool
	V   any
}

// MarshalJSON writes the value, or null.
func (v Value) MarshalJSON() ([]byte, error) { return json.Marshal(v.V) }

// IsZero reports an unset value, which omitzero leaves out of the JSON: written and read again,
// it is still unset, where null would read back as an explicit null.
func (v Value) IsZero() bool { return !v.Set }
