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
)

// Slot ids of the fixed checklist (docs/design.md).
const (
	slotWhenCase   = "c1_when_case"
	slotActionName = "c2_user_action_name"
	slotTool       = "c3_tool"
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

// buildForm turns the record's questions into one form. No property ever
// carries a default: the user types or picks every value, so a value the
// model proposed never reaches the call by a click.
func buildForm(rec *api.Record, whenCase string) (*form, error) {
	f := &form{}
	var shown []string
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
			prop, err := elicitProperty(q.Schema, q.Message)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", errNotAskable, q.SlotID, err)
			}
			f.Fields = append(f.Fields, formField{Key: key(q.SlotID), Kind: fieldValue, QuestionID: q.QuestionID, Property: prop})
		case "approval":
			value, err := json.Marshal(q.Value)
			if q.Value == nil || err != nil {
				return nil, fmt.Errorf("%w: %s: approval without a value", errNotAskable, q.SlotID)
			}
			what := renderShown(q.Shown)
			shown = append(shown, q.Message+" ("+what+")")
			f.Fields = append(f.Fields, formField{Key: key(q.SlotID), Kind: fieldApproval, QuestionID: q.QuestionID,
				Value: value, Property: map[string]any{
					"type": "boolean", "const": true, "title": q.Message, "description": "Approve: " + what,
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
				labels[i] = strings.Join(words, ", ")
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
	msg.WriteString("Before this goes ahead, please answer the following.")
	for _, n := range rec.Notices {
		msg.WriteString("\nNote: " + n)
	}
	for _, s := range shown {
		msg.WriteString("\n" + s)
	}
	f.Message = msg.String()
	return f, nil
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
		if fd.Kind == fieldApproval {
			return toolError(ReasonDeclined, "You did not approve the request."+nothingDone)
		}
	}
	return toolError(ReasonDeclined, "You did not provide the details needed."+nothingDone)
}

func (f *form) params() *mcp.ElicitParams {
	props := make(map[string]any, len(f.Fields))
	req := make([]string, 0, len(f.Fields))
	for _, fl := range f.Fields {
		props[fl.Key] = fl.Property
		req = append(req, fl.Key)
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: f.Message,
		RequestedSchema: map[string]any{
			"type": "object", "properties": props, "required": req,
		},
	}
}

// errNotApproved: the user accepted the form but did not approve.
var errNotApproved = errors.New("not approved")

// apply records the user's answers on st. A value missing from content
// stays unanswered (verdictd asks again); an approval that is missing or
// not true ends the call.
func (f *form) apply(content map[string]any, st *callState) error {
	for _, fl := range f.Fields {
		v, ok := content[fl.Key]
		switch fl.Kind {
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
