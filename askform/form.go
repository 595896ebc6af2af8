// Package askform puts the questions of a decision record to the user as one MCP elicitation
// form, and reads the user's answers back from it.
//
// [Build] turns a record's questions into a [Form]: value questions become flat primitive
// properties reduced from their JSON Schema, an approval a boolean, a branch an enum of its
// options, a value from last time a keep-or-change choice, a draft to review a choice below the
// whole draft, a Gate-1 restatement a text field and a timing enum. No property carries a
// default: the user types or picks every value. [Form.Answers] reads what the user said as the
// answers the next preflight carries.
//
// Everything a host shows of a form (the message, titles, descriptions, the labels the form
// builds) is written with the characters a person would not see marked (package visible): the
// user approves what they can see.
package askform

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/visible"
)

// Kinds of form field. The first three answer verdictd questions; the
// last two turn a Gate-1 restatement into intent the next preflight
// carries.
const (
	fieldValue       = "value"
	fieldApproval    = "approval"
	fieldBranch      = "branch"
	fieldWhenCase    = "when_case"
	fieldRestatement = "restatement"
	// fieldReview approves or refuses a draft the message shows in full.
	fieldReview = "review"
	// fieldPrior keeps the value from last time, which the message shows, or
	// asks for a new one in the optional field that follows it (fieldValue).
	fieldPrior = "prior"
)

// The choices of a review and of a prior value, as a host renders them.
const (
	choiceApprove = "approve"
	choiceRefuse  = "refuse"
	choiceKeep    = "keep"
	choiceChange  = "change"
)

// DefaultMaxDraftBytes is how much drafted content one form shows by
// default: the drafts of one record together, as their text.
const DefaultMaxDraftBytes = 16 << 10

// MaxMaxDraftBytes bounds the most drafted content a form may be set to
// show: past it, a form is no way to read a draft.
const MaxMaxDraftBytes = 256 << 10

// Slot ids of the fixed checklist (docs/design.md).
const (
	slotWhenCase   = "c1_when_case"
	slotActionName = "c2_user_action_name"
)

// The gateway's own wording in its forms: the opening line of every form,
// the mark before each of the record's notices and the announcement of a
// draft. A question relayed from a tool's server may not use them.
const (
	Opening    = "Before this goes ahead, please answer the following."
	NoticeMark = "Note:"
	// DraftMark announces a draft to review: "The memo drafted for you (12
	// characters) follows, ...".
	DraftMark = "drafted for you"
)

// maxRestatement bounds the text a user types to restate an action.
const maxRestatement = 500

// field says what one property of an elicitation form answers. Its member
// names are the stored encoding of a form (see [Form.MarshalJSON]).
type field struct {
	Key        string
	Kind       string
	QuestionID string
	Value      json.RawMessage // approval: what the approval must echo
	Options    [][]string      // branch: the options, in label order
	Labels     []string        // branch: what the user picks from
	Property   map[string]any  // the property schema shown
	// Optional fields are left out of the form's required list: the
	// new value after a prior-value choice.
	Optional bool
	// NewKey is, on a prior-value choice, the key of its new-value field.
	NewKey string
}

// Form is one elicitation: a message and flat, empty fields. A form that
// waits for its answers is kept encoded ([Form.MarshalJSON]) and read back
// to take them.
type Form struct {
	message string
	fields  []field
}

// ErrNotAskable: a question cannot be put in an MCP elicitation form
// (its schema is not one flat primitive). The call is refused rather than
// asked in a lossy way.
var ErrNotAskable = errors.New("question cannot be asked in a form")

// ErrDraftTooLong: the drafts a record asks to review are longer than a
// form may show. A draft is never shown in part: the user approves what
// they read, all of it.
var ErrDraftTooLong = errors.New("draft too long for a form")

// Build turns the record's questions into one form. whenCase is the timing
// the request carries already ("" for none): a restatement of the intent
// asks for a timing when the request has none, or when the record asks for
// one (slot c1_when_case). No property ever carries a
// default: the user types or picks every value, so a value the model
// proposed never reaches the call by a click. Drafts to review are shown in
// full at the end of the message, together at most maxDraft bytes (0:
// DefaultMaxDraftBytes).
func Build(rec *api.Record, whenCase string, maxDraft int) (*Form, error) {
	if maxDraft <= 0 {
		maxDraft = DefaultMaxDraftBytes
	}
	f := &Form{}
	var shown, drafts []string
	draftBytes := 0
	used := map[string]bool{}
	key := func(base string) string {
		k := sanitizeKey(base)
		for i := 2; used[k]; i++ {
			k = sanitizeKey(base) + "_" + strconv.Itoa(i)
		}
		used[k] = true
		return k
	}
	for _, q := range rec.Questions {
		switch q.Kind {
		case "value":
			if q.Value != nil {
				// The value from last time, offered: kept as shown or replaced.
				choice, change, err := priorFields(q, key(q.SlotID), key(q.SlotID+"_new"))
				if err != nil {
					return nil, err
				}
				shown = append(shown, "Last time the "+Humanize(q.SlotID)+" was: "+visible.Line(renderValue(q.Value)))
				f.fields = append(f.fields, choice, change)
				continue
			}
			prop, err := elicitProperty(q.Schema, q.Message)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrNotAskable, q.SlotID, err)
			}
			f.fields = append(f.fields, field{Key: key(q.SlotID), Kind: fieldValue, QuestionID: q.QuestionID, Property: prop})
		case api.QuestionReviewDraft:
			value, err := json.Marshal(q.Value)
			if q.Value == nil || err != nil {
				return nil, fmt.Errorf("%w: %s: review without a draft", ErrNotAskable, q.SlotID)
			}
			text := renderValue(q.Value)
			if draftBytes += len(text); draftBytes > maxDraft {
				return nil, fmt.Errorf("%w: %s: drafts of %d bytes, at most %d", ErrDraftTooLong, q.SlotID, draftBytes, maxDraft)
			}
			drafts = append(drafts, draftBlock(q, text))
			f.fields = append(f.fields, field{Key: key(q.SlotID), Kind: fieldReview, QuestionID: q.QuestionID,
				Value: value, Property: map[string]any{
					"type": "string", "title": q.Message, "enum": []string{choiceApprove, choiceRefuse},
					"description": "Approve the " + Humanize(q.SlotID) + " exactly as shown above (" +
						strconv.Itoa(utf8.RuneCountInString(text)) + " characters), or refuse it.",
				}})
		case "approval":
			value, err := json.Marshal(q.Value)
			if q.Value == nil || err != nil {
				return nil, fmt.Errorf("%w: %s: approval without a value", ErrNotAskable, q.SlotID)
			}
			what := visible.Line(renderShown(q.Shown))
			shown = append(shown, q.Message+" ("+what+")")
			f.fields = append(f.fields, field{Key: key(q.SlotID), Kind: fieldApproval, QuestionID: q.QuestionID,
				// A plain boolean, as MCP's form schema writes one (no "const"): an unticked box
				// must reach the gateway as false, the user's "no" (declined), not be refused by
				// the host's or the SDK's own check of the answer against the schema.
				Value: value, Property: map[string]any{
					"type": "boolean", "title": q.Message, "description": "Approve: " + what,
				}})
		case "branch":
			opts := q.Options
			if len(opts) == 0 {
				opts = rec.Gate.BranchOptions
			}
			if len(opts) == 0 {
				return nil, fmt.Errorf("%w: branch question without options", ErrNotAskable)
			}
			labels := make([]string, len(opts))
			for i, o := range opts {
				labels[i] = visible.Text(Humanize(strings.Join(o, ", ")))
			}
			f.fields = append(f.fields, field{Key: key("details"), Kind: fieldBranch, QuestionID: q.QuestionID,
				Options: opts, Labels: labels, Property: map[string]any{"type": "string", "title": q.Message, "enum": labels}})
		case "restate_intent":
			if q.SlotID == slotActionName {
				f.fields = append(f.fields, restatementField(key("action"), q.Message))
			}
			if q.SlotID == slotWhenCase || whenCase == "" {
				f.fields = append(f.fields, whenField(key("when")))
			}
		case "restate_action":
			f.fields = append(f.fields, restatementField(key("action"), q.Message))
		default:
			return nil, fmt.Errorf("%w: unknown question kind %q", ErrNotAskable, q.Kind)
		}
	}
	if len(f.fields) == 0 {
		return nil, fmt.Errorf("%w: the record asks nothing", ErrNotAskable)
	}
	var msg strings.Builder
	msg.WriteString(Opening)
	for _, n := range rec.Notices {
		msg.WriteString("\n" + NoticeMark + " " + n)
	}
	for _, s := range shown {
		msg.WriteString("\n" + s)
	}
	// Drafts come last: nothing the gateway says follows text the model
	// wrote, so a draft cannot pose as a line of the gateway's own.
	for _, d := range drafts {
		msg.WriteString("\n\n" + d)
	}
	// Titles, notices and values come from the policy, the tool's definition and the call:
	// what a host shows of them is marked where it would hide something. The drafts are
	// marked already (the same marks), and the gateway's own text has nothing to mark.
	f.message = visible.Text(msg.String())
	return f, nil
}

// draftBlock is how a draft is shown: announced with its size, then the
// whole text as it will be sent, with every character a host would not
// draw made visible (see visible.Text).
func draftBlock(q api.Question, text string) string {
	shown, n := visible.Mark(text)
	marked := ""
	if n > 0 {
		marked = "; " + strconv.Itoa(n) + " of them you would not see, each marked as ⟦U+…⟧"
	}
	return "The " + Humanize(q.SlotID) + " " + DraftMark + " (" + strconv.Itoa(utf8.RuneCountInString(text)) +
		" characters" + marked + ") follows, exactly as it will be sent:\n" + shown
}

// priorFields are the two fields of a question that offers the value from
// last time: a choice between keeping it and changing it, and the new
// value, filled only to change it. Keeping it approves exactly the value
// shown in this form, whatever the last value is by the time the answer
// arrives.
func priorFields(q api.Question, choiceKey, newKey string) (field, field, error) {
	prior, err := json.Marshal(q.Value)
	if err != nil {
		return field{}, field{}, fmt.Errorf("%w: %s: prior value: %v", ErrNotAskable, q.SlotID, err)
	}
	title := "New " + Humanize(q.SlotID) + " (only to change it)"
	prop, err := elicitProperty(q.Schema, title)
	if err != nil {
		return field{}, field{}, fmt.Errorf("%w: %s: %v", ErrNotAskable, q.SlotID, err)
	}
	choice := field{Key: choiceKey, Kind: fieldPrior, QuestionID: q.QuestionID, Value: prior, NewKey: newKey,
		Property: map[string]any{
			"type": "string", "title": q.Message, "enum": []string{choiceKeep, choiceChange},
			"description": "Keep: " + visible.Line(renderValue(q.Value)) + ". Change: give the new value below.",
		}}
	return choice, field{Key: newKey, Kind: fieldValue, QuestionID: q.QuestionID, Property: prop, Optional: true}, nil
}

func restatementField(key, message string) field {
	return field{Key: key, Kind: fieldRestatement, Property: map[string]any{
		"type": "string", "title": message, "minLength": 1, "maxLength": maxRestatement,
	}}
}

func whenField(key string) field {
	return field{Key: key, Kind: fieldWhenCase, Property: map[string]any{
		"type": "string", "title": "When should this happen?", "enum": policy.WhenCases(),
	}}
}

// AsksApproval reports whether f asks the user to approve something (an
// approval or a draft to review): declining it is then the user's refusal
// of the request, not details left missing.
func (f *Form) AsksApproval() bool {
	return slices.ContainsFunc(f.fields, func(fd field) bool { return fd.Kind == fieldApproval || fd.Kind == fieldReview })
}

// Params is the elicitation request of f: a flat object, every field
// required but the new value of a prior-value choice, no defaults.
func (f *Form) Params() *mcp.ElicitParams {
	props := make(map[string]any, len(f.fields))
	req := make([]string, 0, len(f.fields))
	for _, fl := range f.fields {
		props[fl.Key] = shownProperty(fl.Property)
		if !fl.Optional {
			req = append(req, fl.Key)
		}
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: f.message,
		RequestedSchema: map[string]any{
			"type": "object", "properties": props, "required": req,
		},
	}
}

// shownProperty is a form field's schema as the host is sent it: its title and description
// marked (visible.Text). Enumerated values are sent as they are, since the answer must echo
// one of them; the labels the form builds are marked where they are made.
func shownProperty(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		if s, ok := v.(string); ok && (k == "title" || k == "description") {
			v = visible.Text(s)
		}
		out[k] = v
	}
	return out
}

// stored is a Form as it is kept while it waits for its answers. Its member
// names, and those of field, are the encoding of continuations already
// stored: renaming one voids them (testdata/form.json pins the bytes).
type stored struct {
	Message string
	Fields  []field
}

// MarshalJSON encodes f as it is kept while it waits for its answers.
func (f Form) MarshalJSON() ([]byte, error) {
	return json.Marshal(stored{Message: f.message, Fields: f.fields})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (f *Form) UnmarshalJSON(b []byte) error {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	f.message, f.fields = s.Message, s.Fields
	return nil
}
