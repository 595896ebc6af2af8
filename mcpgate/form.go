package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// ReasonDraftTooLong: a record asks to review drafted content longer than
// a form carries (Config.MaxDraftBytes). The call ends; nothing ran.
const ReasonDraftTooLong = "draft_too_long"

// DefaultMaxDraftBytes is how much drafted content one form shows by
// default: the drafts of one record together, as their text.
const DefaultMaxDraftBytes = 16 << 10

// MaxMaxDraftBytes bounds Config.MaxDraftBytes: past it, a form is no way
// to read a draft.
const MaxMaxDraftBytes = 256 << 10

// Slot ids of the fixed checklist (docs/design.md).
const (
	slotWhenCase   = "c1_when_case"
	slotActionName = "c2_user_action_name"
	slotTool       = "c3_tool"
)

// The gateway's own wording in its forms: the opening line of every form,
// the mark before each of the record's notices and the announcement of a
// draft. A question relayed
// from a tool's server may not use them (see reservedWording).
const (
	formOpening = "Before this goes ahead, please answer the following."
	noticeMark  = "Note:"
	// draftMark announces a draft to review: "The memo drafted for you (12
	// characters) follows, ...".
	draftMark = "drafted for you"
)

// maxRestatement bounds the text a user types to restate an action.
const maxRestatement = 500

// formField says what one property of an elicitation form answers.
type formField struct {
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

// form is one elicitation: a message and flat, empty fields.
type form struct {
	Message string
	Fields  []formField
}

// errNotAskable: a question cannot be put in an MCP elicitation form
// (its schema is not one flat primitive). The call is refused rather than
// asked in a lossy way.
var errNotAskable = errors.New("question cannot be asked in a form")

// errDraftTooLong: the drafts a record asks to review are longer than a
// form may show. A draft is never shown in part: the user approves what
// they read, all of it.
var errDraftTooLong = errors.New("draft too long for a form")

// buildForm turns the record's questions into one form. No property ever
// carries a default: the user types or picks every value, so a value the
// model proposed never reaches the call by a click. Drafts to review are
// shown in full at the end of the message, together at most maxDraft
// bytes (0: DefaultMaxDraftBytes).
func buildForm(rec *api.Record, whenCase string, maxDraft int) (*form, error) {
	if maxDraft <= 0 {
		maxDraft = DefaultMaxDraftBytes
	}
	f := &form{}
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
				shown = append(shown, "Last time the "+humanize(q.SlotID)+" was: "+visibleLine(renderValue(q.Value)))
				f.Fields = append(f.Fields, choice, change)
				continue
			}
			prop, err := elicitProperty(q.Schema, q.Message)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", errNotAskable, q.SlotID, err)
			}
			f.Fields = append(f.Fields, formField{Key: key(q.SlotID), Kind: fieldValue, QuestionID: q.QuestionID, Property: prop})
		case api.QuestionReviewDraft:
			value, err := json.Marshal(q.Value)
			if q.Value == nil || err != nil {
				return nil, fmt.Errorf("%w: %s: review without a draft", errNotAskable, q.SlotID)
			}
			text := renderValue(q.Value)
			if draftBytes += len(text); draftBytes > maxDraft {
				return nil, fmt.Errorf("%w: %s: drafts of %d bytes, at most %d", errDraftTooLong, q.SlotID, draftBytes, maxDraft)
			}
			drafts = append(drafts, draftBlock(q, text))
			f.Fields = append(f.Fields, formField{Key: key(q.SlotID), Kind: fieldReview, QuestionID: q.QuestionID,
				Value: value, Property: map[string]any{
					"type": "string", "title": q.Message, "enum": []string{choiceApprove, choiceRefuse},
					"description": "Approve the " + humanize(q.SlotID) + " exactly as shown above (" +
						strconv.Itoa(utf8.RuneCountInString(text)) + " characters), or refuse it.",
				}})
		case "approval":
			value, err := json.Marshal(q.Value)
			if q.Value == nil || err != nil {
				return nil, fmt.Errorf("%w: %s: approval without a value", errNotAskable, q.SlotID)
			}
			what := visibleLine(renderShown(q.Shown))
			shown = append(shown, q.Message+" ("+what+")")
			f.Fields = append(f.Fields, formField{Key: key(q.SlotID), Kind: fieldApproval, QuestionID: q.QuestionID,
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
				return nil, fmt.Errorf("%w: branch question without options", errNotAskable)
			}
			labels := make([]string, len(opts))
			for i, o := range opts {
				words := make([]string, len(o))
				for j, n := range o {
					words[j] = humanize(n)
				}
				labels[i] = visibleText(strings.Join(words, ", "))
			}
			f.Fields = append(f.Fields, formField{Key: key("details"), Kind: fieldBranch, QuestionID: q.QuestionID,
				Options: opts, Labels: labels, Property: map[string]any{"type": "string", "title": q.Message, "enum": labels}})
		case "restate_intent":
			if q.SlotID == slotActionName {
				f.Fields = append(f.Fields, restatementField(key("action"), q.Message))
			}
			if q.SlotID == slotWhenCase || whenCase == "" {
				f.Fields = append(f.Fields, whenField(key("when")))
			}
		case "restate_action":
			f.Fields = append(f.Fields, restatementField(key("action"), q.Message))
		default:
			return nil, fmt.Errorf("%w: unknown question kind %q", errNotAskable, q.Kind)
		}
	}
	if len(f.Fields) == 0 {
		return nil, fmt.Errorf("%w: the record asks nothing", errNotAskable)
	}
	var msg strings.Builder
	msg.WriteString(formOpening)
	for _, n := range rec.Notices {
		msg.WriteString("\n" + noticeMark + " " + n)
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
	f.Message = visibleText(msg.String())
	return f, nil
}

// draftBlock is how a draft is shown: announced with its size, then the
// whole text as it will be sent, with every character a host would not
// draw made visible (see visibleText).
func draftBlock(q api.Question, text string) string {
	shown, n := visible.Mark(text)
	marked := ""
	if n > 0 {
		marked = "; " + strconv.Itoa(n) + " of them you would not see, each marked as ⟦U+…⟧"
	}
	return "The " + humanize(q.SlotID) + " " + draftMark + " (" + strconv.Itoa(utf8.RuneCountInString(text)) +
		" characters" + marked + ") follows, exactly as it will be sent:\n" + shown
}

// visibleText is s as the user is shown it: every character a host would not draw, or not
// where it stands, marked by its code point (visible.Mark). A bidirectional override reorders
// what a host displays (so "pay 100" can show as something else), zero-width characters and
// variation selectors hide text, and the user approves what they can see.
func visibleText(s string) string {
	t, _ := visible.Mark(s)
	return t
}

// visibleLine is visibleText for a value quoted inside a line of the gateway's (a value from
// last time, what an approval approves): its newlines and tabs are marked too, so that a value
// cannot begin a line of its own that reads as the gateway's ("The memo drafted for you …").
func visibleLine(s string) string {
	t, _ := visible.MarkLine(s)
	return t
}

// priorFields are the two fields of a question that offers the value from
// last time: a choice between keeping it and changing it, and the new
// value, filled only to change it. Keeping it approves exactly the value
// shown in this form, whatever the last value is by the time the answer
// arrives.
func priorFields(q api.Question, choiceKey, newKey string) (formField, formField, error) {
	prior, err := json.Marshal(q.Value)
	if err != nil {
		return formField{}, formField{}, fmt.Errorf("%w: %s: prior value: %v", errNotAskable, q.SlotID, err)
	}
	title := "New " + humanize(q.SlotID) + " (only to change it)"
	prop, err := elicitProperty(q.Schema, title)
	if err != nil {
		return formField{}, formField{}, fmt.Errorf("%w: %s: %v", errNotAskable, q.SlotID, err)
	}
	choice := formField{Key: choiceKey, Kind: fieldPrior, QuestionID: q.QuestionID, Value: prior, NewKey: newKey,
		Property: map[string]any{
			"type": "string", "title": q.Message, "enum": []string{choiceKeep, choiceChange},
			"description": "Keep: " + visibleLine(renderValue(q.Value)) + ". Change: give the new value below.",
		}}
	return choice, formField{Key: newKey, Kind: fieldValue, QuestionID: q.QuestionID, Property: prop, Optional: true}, nil
}

func restatementField(key, message string) formField {
	return formField{Key: key, Kind: fieldRestatement, Property: map[string]any{
		"type": "string", "title": message, "minLength": 1, "maxLength": maxRestatement,
	}}
}

func whenField(key string) formField {
	return formField{Key: key, Kind: fieldWhenCase, Property: map[string]any{
		"type": "string", "title": "When should this happen?", "enum": policy.WhenCases(),
	}}
}

// params is the elicitation request of f: a flat object, every field
// required, no defaults.
// declined is the answer to a form the user declined or cancelled. A
// form that asks for approval is the user's refusal of the request; one
// that asks only for details leaves them missing.
func (f *form) declined() *mcp.CallToolResult {
	for _, fd := range f.Fields {
		if fd.Kind == fieldApproval || fd.Kind == fieldReview {
			return toolError(ReasonDeclined, "You did not approve the request."+nothingDone)
		}
	}
	return toolError(ReasonDeclined, "You did not provide the details needed."+nothingDone)
}

func (f *form) params() *mcp.ElicitParams {
	props := make(map[string]any, len(f.Fields))
	req := make([]string, 0, len(f.Fields))
	for _, fl := range f.Fields {
		props[fl.Key] = shownProperty(fl.Property)
		if !fl.Optional {
			req = append(req, fl.Key)
		}
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: f.Message,
		RequestedSchema: map[string]any{
			"type": "object", "properties": props, "required": req,
		},
	}
}

// shownProperty is a form field's schema as the host is sent it: its title and description
// marked (visibleText). Enumerated values are sent as they are, since the answer must echo
// one of them; the labels the gateway builds are marked where they are made.
func shownProperty(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		if s, ok := v.(string); ok && (k == "title" || k == "description") {
			v = visibleText(s)
		}
		out[k] = v
	}
	return out
}

// errNotApproved: the user accepted the form but did not approve.
var errNotApproved = errors.New("not approved")

// apply records the user's answers on st. A value missing from content
// stays unanswered (verdictd asks again); an approval or a review that is
// missing or not given ends the call.
func (f *form) apply(content map[string]any, st *callState) error {
	// The new-value fields a prior-value choice answers itself.
	handled := map[string]bool{}
	for _, fl := range f.Fields {
		v, ok := content[fl.Key]
		if handled[fl.Key] {
			continue
		}
		switch fl.Kind {
		case fieldReview:
			if s, _ := v.(string); s != choiceApprove {
				return errNotApproved
			}
			yes := true
			st.Req.UserAnswers = append(st.Req.UserAnswers, api.Answer{QuestionID: fl.QuestionID, Approved: &yes, Value: rawValue(fl.Value)})
		case fieldPrior:
			handled[fl.NewKey] = true
			s, _ := v.(string)
			nv, hasNew := content[fl.NewKey]
			hasNew = hasNew && nv != nil && nv != ""
			switch {
			case s == choiceKeep && !hasNew:
				// An approval of exactly the value this form showed.
				yes := true
				st.Req.UserAnswers = append(st.Req.UserAnswers, api.Answer{QuestionID: fl.QuestionID, Approved: &yes, Value: rawValue(fl.Value)})
			case s == choiceChange && hasNew:
				raw, err := answerJSON(nv)
				if err != nil {
					return fmt.Errorf("answer %s: %w", fl.NewKey, err)
				}
				st.Req.UserAnswers = append(st.Req.UserAnswers, api.Answer{QuestionID: fl.QuestionID, Value: rawValue(raw)})
			}
			// Anything else (no choice, a change without a value, keep with a
			// new value beside it) is not clear: the question stays open and
			// verdictd asks it again.
		case fieldApproval:
			if b, isBool := v.(bool); !ok || !isBool || !b {
				return errNotApproved
			}
			yes := true
			st.Req.UserAnswers = append(st.Req.UserAnswers, api.Answer{QuestionID: fl.QuestionID, Approved: &yes, Value: rawValue(fl.Value)})
		case fieldValue:
			if !ok || v == nil {
				continue
			}
			raw, err := answerJSON(v)
			if err != nil {
				return fmt.Errorf("answer %s: %w", fl.Key, err)
			}
			st.Req.UserAnswers = append(st.Req.UserAnswers, api.Answer{QuestionID: fl.QuestionID, Value: rawValue(raw)})
		case fieldBranch:
			s, _ := v.(string)
			i := slices.Index(fl.Labels, s)
			if i < 0 {
				continue
			}
			raw, err := json.Marshal(fl.Options[i])
			if err != nil {
				return err
			}
			st.Req.UserAnswers = append(st.Req.UserAnswers, api.Answer{QuestionID: fl.QuestionID, Value: rawValue(raw)})
		case fieldWhenCase:
			if s, _ := v.(string); slices.Contains(policy.WhenCases(), s) {
				st.setWhenCase(s)
			}
		case fieldRestatement:
			s, _ := v.(string)
			s = strings.TrimSpace(s)
			if s == "" || utf8.RuneCountInString(s) > maxRestatement {
				continue
			}
			// Typed by the user into a form the host rendered: it is the
			// user's own words, and the action name points at all of it.
			segs := append(st.Req.Instruction.Segments, api.Segment{Text: s, Trust: "user", Origin: "mcpgate:elicitation"})
			st.Req.Instruction.Segments = segs
			st.intent().ActionName = &api.Location{Segment: len(segs) - 1, Span: api.Span{0, utf8.RuneCountInString(s)}}
		}
	}
	return nil
}

// answerJSON encodes an answer exactly. Form answers arrive as float64: an
// integral value within the exact range is written as an integer, and one
// outside it is refused rather than rounded. 2^53 itself is outside: it is
// also what 2^53+1 decodes to, so it may not be what the user typed.
func answerJSON(v any) (json.RawMessage, error) {
	if f, ok := v.(float64); ok {
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, errors.New("not a finite number")
		}
		if f == math.Trunc(f) {
			if math.Abs(f) >= 1<<53 {
				return nil, errors.New("integer too large to be exact")
			}
			return json.RawMessage(strconv.FormatInt(int64(f), 10)), nil
		}
	}
	return json.Marshal(v)
}

// elicitTypes are the primitive types an elicitation form can render.
var elicitTypes = []string{"string", "number", "integer", "boolean"}

// elicitFormats are the string formats the MCP form schema allows.
var elicitFormats = []string{"email", "uri", "date", "date-time"}

// elicitProperty reduces a question's JSON Schema to an MCP form property
// with title. Only keywords the form schema knows are kept; a schema that
// is not one primitive is not askable.
func elicitProperty(schema json.RawMessage, title string) (map[string]any, error) {
	var s map[string]any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, errors.New("no schema")
	}
	if err := dec.Decode(&s); err != nil || s == nil {
		return nil, errors.New("schema is not an object")
	}
	typ, _ := s["type"].(string)
	enum, hasEnum := s["enum"].([]any)
	if typ == "" && hasEnum && allStrings(enum) {
		typ = "string"
	}
	if !slices.Contains(elicitTypes, typ) {
		return nil, fmt.Errorf("type %v is not a form primitive", s["type"])
	}
	p := map[string]any{"type": typ, "title": title}
	switch typ {
	case "string":
		if hasEnum {
			if !allStrings(enum) {
				return nil, errors.New("enum of non-strings")
			}
			// The user picks a member as the host draws it, and the member is the answer:
			// one holding a character the host would not draw ("savings" and "savings" with a
			// zero-width space) cannot be told apart, so the question is not asked in a form.
			for _, m := range enum {
				if visible.Count(m.(string)) > 0 {
					return nil, fmt.Errorf("enum member %q holds characters a person does not see", m)
				}
			}
			p["enum"] = enum
		}
		for _, k := range []string{"minLength", "maxLength"} {
			if n, ok := s[k].(json.Number); ok {
				p[k] = n
			}
		}
		if f, ok := s["format"].(string); ok && slices.Contains(elicitFormats, f) {
			p["format"] = f
		}
	case "number", "integer":
		if hasEnum {
			return nil, errors.New("enum of numbers")
		}
		for _, k := range []string{"minimum", "maximum"} {
			if n, ok := s[k].(json.Number); ok {
				p[k] = n
			}
		}
	}
	return p, nil
}

func allStrings(vs []any) bool {
	for _, v := range vs {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return len(vs) > 0
}

// renderShown writes what an approval approves in plain words: an
// argument object as "name: value" pairs in key order, anything else as
// its text.
func renderShown(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = humanize(k) + ": " + renderValue(t[k])
		}
		return strings.Join(parts, "; ")
	default:
		return renderValue(t)
	}
}

func renderValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func humanize(name string) string { return strings.ReplaceAll(name, "_", " ") }

// sanitizeKey makes a property name hosts render without surprises.
func sanitizeKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "answer"
	}
	return b.String()
}

// rawValue is an answer's value as the gateway holds it, raw JSON: none when it is empty.
func rawValue(raw json.RawMessage) api.Value {
	if len(raw) == 0 {
		return api.Value{}
	}
	return api.Value{Set: true, V: raw}
}
