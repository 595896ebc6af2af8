package policytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/yamlpos"
)

// File is one test file: the definitions of the tools the policy lists from a server, and the
// cases (docs/policy-testing.md).
type File struct {
	// Servers gives, per server id, the tool definitions as that server lists them: a policy
	// that names tools_from is tested against these, never against the live server.
	Servers map[string]*ServerTools `json:"servers"`
	Cases   []*Case                 `json:"cases"`

	path  string
	root  *yaml.Node
	tools map[string]map[string]gates.Tool // server → tool name → definition
}

// ServerTools is a server's tool list: inline, or in a JSON file (a list of tools, or a
// tools/list result) named relative to the test file.
type ServerTools struct {
	Tools     []json.RawMessage `json:"tools"`
	ToolsFile string            `json:"tools_file"`
}

// Case is one conversation: steps run in order against one fresh conversation state.
type Case struct {
	Name      string `json:"name"`
	Principal string `json:"principal"`
	// Conversation is the conversation id of every step; default the case's index.
	Conversation string `json:"conversation"`
	// Prior are executed values by action key, as accepted receipts leave them (prior_state).
	Prior map[string]map[string]any `json:"prior"`
	Steps []*Step                   `json:"steps"`

	line int
}

// Step is one preflight of a case. What the call is made of (server, tool, instruction,
// intent, arguments, pre-set data, checklist) and what the world answers (measurements, the
// approver, the clock) carry over from the step before unless the step gives them again;
// answers, approvals and console decisions add to those of the steps before, as a conversation
// resends them.
type Step struct {
	Server        *string                `json:"server"`
	Tool          *string                `json:"tool"`
	NewRequest    bool                   `json:"new_request"`
	Instruction   []api.Segment          `json:"instruction"`
	Intent        *Intent                `json:"intent"`
	Arguments     map[string]*Argument   `json:"arguments"`
	PreSetData    map[string]*PreSet     `json:"pre_set_data"`
	UserChecklist []api.RequestCheckItem `json:"user_checklist"`
	Measured      map[string]*Measured   `json:"measured"`
	Approver      *Approver              `json:"approver"`
	Clock         *time.Time             `json:"clock"`

	// Answers answer the latest question asked for each slot with a value.
	Answers map[string]any `json:"answers"`
	// Approve and Refuse answer the latest approval, review or offer question of each slot,
	// approving exactly what it showed, or not.
	Approve []string `json:"approve"`
	Refuse  []string `json:"refuse"`
	// Console decides, in the console, the approval the step before left pending.
	Console *Console `json:"console"`
	// Trigger runs the latest deferred record's stored intent at trigger time, with this
	// step's answers and pre-set data.
	Trigger bool `json:"trigger"`

	Expect *Expect `json:"expect"`

	line int
}

// Intent is C1 and C2: the timing, and the user's name for the action, as text found in a
// user segment or as a pre-set value.
type Intent struct {
	WhenCase json.RawMessage `json:"when_case"`
	Action   *Location       `json:"action"`
	Preset   *PreSet         `json:"action_preset"`
}

// Argument is one argument of the model's proposed call: its value and, optionally, where in
// the instruction it stands.
type Argument struct {
	Value any       `json:"value"`
	At    *Location `json:"at"`

	set bool // value was given (null is a value)
}

// UnmarshalJSON keeps whether value was given at all.
func (a *Argument) UnmarshalJSON(b []byte) error {
	var raw struct {
		Value json.RawMessage `json:"value"`
		At    *Location       `json:"at"`
	}
	if err := decodeStrict(b, &raw); err != nil {
		return err
	}
	if raw.Value == nil {
		return errors.New("an argument gives its value")
	}
	if err := decodeNumber(raw.Value, &a.Value); err != nil {
		return err
	}
	a.At, a.set = raw.At, true
	return nil
}

// PreSet is a value the user stored in advance, with its trust (only user counts).
type PreSet struct {
	Value  any    `json:"value"`
	Trust  string `json:"trust"`
	Origin string `json:"origin"`

	set bool
}

// UnmarshalJSON keeps whether value was given.
func (p *PreSet) UnmarshalJSON(b []byte) error {
	var raw struct {
		Value  json.RawMessage `json:"value"`
		Trust  string          `json:"trust"`
		Origin string          `json:"origin"`
	}
	if err := decodeStrict(b, &raw); err != nil {
		return err
	}
	if raw.Value == nil || raw.Trust == "" {
		return errors.New("a pre-set value is {value, trust, origin}: give its value and trust")
	}
	p.Trust, p.Origin, p.set = raw.Trust, raw.Origin, true
	return decodeNumber(raw.Value, &p.Value)
}

// Location is text of the instruction: the first occurrence of Text in segment Segment, or in
// the first segment that holds it. Written as the text alone, or as {text, segment}.
type Location struct {
	Text    string `json:"text"`
	Segment *int   `json:"segment"`
}

// UnmarshalJSON reads "text" or {text, segment}.
func (l *Location) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &l.Text)
	}
	type plain Location
	var p plain
	if err := decodeStrict(b, &p); err != nil {
		return fmt.Errorf("a location is the text, or {text, segment}: %w", err)
	}
	*l = Location(p)
	return nil
}

// Measured is what one measurement answers in this step: a value (null is a value: nothing is
// there), or an error (the lookup failed).
type Measured struct {
	Value any    `json:"value"`
	Error string `json:"error"`

	set bool
}

// UnmarshalJSON keeps whether value was given.
func (m *Measured) UnmarshalJSON(b []byte) error {
	var raw struct {
		Value json.RawMessage `json:"value"`
		Error string          `json:"error"`
	}
	if err := decodeStrict(b, &raw); err != nil {
		return err
	}
	switch {
	case raw.Value != nil && raw.Error != "":
		return errors.New("a measurement gives a value or an error, not both")
	case raw.Value == nil && raw.Error == "":
		return errors.New("a measurement gives a value (null included) or an error")
	case raw.Value != nil:
		m.set = true
		return decodeNumber(raw.Value, &m.Value)
	}
	m.Error = raw.Error
	return nil
}

// Approver is what a webhook approver answers about C3.
type Approver struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason"`
}

// Console is an approver's decision in the console on the pending approval of the call.
type Console struct {
	State string `json:"state"` // approved | denied | expired | lapsed
	By    string `json:"by"`
}

// Expect is what a step must come to. Every member left out is not checked.
type Expect struct {
	Outcome string `json:"outcome"`
	Gate    string `json:"gate"`
	// Known are slots known, each with its source, or "source from origin_source".
	Known map[string]string `json:"known"`
	// Unknown are slots unknown, each with its route.
	Unknown map[string]string `json:"unknown"`
	// Asked are exactly the questions asked, by slot, with their kind.
	Asked map[string]string `json:"asked"`
	// Unmet are exactly the unmet items' slot ids.
	Unmet []string `json:"unmet"`
	// Checklist are user-checklist items: met, unmet or unknown.
	Checklist map[string]string `json:"checklist"`
	// Call is exactly the call_arguments of a verdict (null: none).
	Call json.RawMessage `json:"call"`
	// Notices are exactly the notices shown.
	Notices []string `json:"notices"`
}

// Load reads the test file at path strictly: an unknown key, a misspelt outcome or source, a
// step that answers nothing, each is an error with the file, line and column. Tools files are
// read here too, relative to the test file.
func Load(path string) (*File, error) {
	f, err := confx.LoadValid[File](path)
	if err != nil {
		return nil, err
	}
	f.path = path
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policytest: %w", err)
	}
	if f.root, err = yamlpos.Parse(data); err != nil {
		return nil, fmt.Errorf("policytest: %s: %w", path, err)
	}
	for i, c := range f.Cases {
		c.line = f.pos(yamlpos.Index("cases", i)).Line
		for j, s := range c.Steps {
			s.line = f.pos(yamlpos.Index(yamlpos.Index("cases", i)+".steps", j)).Line
		}
	}
	if err := f.readTools(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) pos(path string) yamlpos.Pos {
	p, _ := yamlpos.Find(f.root, path)
	return p
}

// readTools decodes every server's tool definitions.
func (f *File) readTools(dir string) error {
	f.tools = map[string]map[string]gates.Tool{}
	var errs []error
	for id, st := range f.Servers {
		path := yamlpos.Key("servers", id)
		raw := st.Tools
		if st.ToolsFile != "" {
			var err error
			file := st.ToolsFile
			if !filepath.IsAbs(file) {
				file = filepath.Join(dir, file)
			}
			if raw, err = readToolsFile(file); err != nil {
				errs = append(errs, confx.At(yamlpos.Key(path, "tools_file"), err))
				continue
			}
		}
		f.tools[id] = map[string]gates.Tool{}
		for i, r := range raw {
			var t gates.Tool
			if err := json.Unmarshal(r, &t); err != nil || t.Name == "" {
				errs = append(errs, confx.Errorf(yamlpos.Index(yamlpos.Key(path, "tools"), i), "not a tool definition: it needs a name"))
				continue
			}
			if _, dup := f.tools[id][t.Name]; dup {
				errs = append(errs, confx.Errorf(yamlpos.Index(yamlpos.Key(path, "tools"), i), "tool %q is listed twice", t.Name))
			}
			f.tools[id][t.Name] = t
		}
	}
	if len(errs) > 0 {
		return confx.Locate(f.path, errors.Join(errs...))
	}
	return nil
}

// readToolsFile reads a JSON list of tools, or a tools/list result ({"tools": [...]}).
func readToolsFile(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err == nil {
		return list, nil
	}
	var res struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Tools == nil {
		return nil, fmt.Errorf("%s: not a JSON list of tools, nor a tools/list result", path)
	}
	return res.Tools, nil
}

// Validate checks what the schema alone cannot: the words each member may hold, and that
// every case and step says something.
func (f *File) Validate() error {
	var errs []error
	fail := func(path, format string, args ...any) { errs = append(errs, confx.Errorf(path, format, args...)) }
	for id, st := range f.Servers {
		path := yamlpos.Key("servers", id)
		if st == nil || (st.Tools == nil) == (st.ToolsFile == "") {
			fail(path, "give the server's tools, or its tools_file (one of the two)")
		}
	}
	if len(f.Cases) == 0 {
		fail("cases", "a test file holds at least one case")
	}
	names := map[string]int{}
	for i, c := range f.Cases {
		path := yamlpos.Index("cases", i)
		if c == nil {
			fail(path, "a case is a mapping")
			continue
		}
		if c.Name == "" {
			fail(path, "a case has a name")
		} else if j, dup := names[c.Name]; dup {
			fail(yamlpos.Key(path, "name"), "case %q is named twice (also cases[%d])", c.Name, j)
		} else {
			names[c.Name] = i
		}
		if c.Principal == "" {
			fail(path, "a case names its principal")
		}
		if len(c.Steps) == 0 {
			fail(path, "a case has at least one step")
		}
		for j, s := range c.Steps {
			sp := yamlpos.Index(yamlpos.Key(path, "steps"), j)
			if s == nil {
				fail(sp, "a step is a mapping")
				continue
			}
			errs = append(errs, s.validate(sp, j == 0))
		}
	}
	return errors.Join(errs...)
}

func (s *Step) validate(path string, first bool) error {
	var errs []error
	fail := func(p, format string, args ...any) { errs = append(errs, confx.Errorf(p, format, args...)) }
	if first && !s.Trigger && (s.Server == nil || s.Tool == nil) {
		fail(path, "the first step names the server and the tool")
	}
	if first && s.Trigger {
		fail(yamlpos.Key(path, "trigger"), "a trigger reruns a deferred step: it cannot be the first step")
	}
	if s.Expect == nil {
		fail(path, "a step says what it must come to (expect)")
	} else {
		errs = append(errs, confx.At(yamlpos.Key(path, "expect"), s.Expect.validate()))
	}
	for i, seg := range s.Instruction {
		if seg.Trust == "" {
			fail(yamlpos.Index(yamlpos.Key(path, "instruction"), i), "a segment says its trust (user, or what it came from)")
		}
	}
	for name, a := range s.Arguments {
		if a == nil || !a.set {
			fail(yamlpos.Key(yamlpos.Key(path, "arguments"), name), "an argument is {value, at}: give its value")
		}
	}
	for name, m := range s.Measured {
		if m == nil {
			fail(yamlpos.Key(yamlpos.Key(path, "measured"), name), "a measurement gives a value (null included) or an error")
		}
	}
	if c := s.Console; c != nil && !slices.Contains(consoleStates, c.State) {
		fail(yamlpos.Key(yamlpos.Key(path, "console"), "state"), "state %q: want one of %v", c.State, consoleStates)
	}
	return errors.Join(errs...)
}

var consoleStates = []string{api.ApprovalApproved, api.ApprovalDenied, api.ApprovalExpired, api.ApprovalLapsed}

var (
	outcomes = []string{api.OutcomeVerdictIssued, api.OutcomeAskUser, api.OutcomeSystemLookup, api.OutcomeDefinitionRepair,
		api.OutcomeHold, api.OutcomeExhausted, api.OutcomeDeferred, api.OutcomeNotGated, api.OutcomeRefuse}
	routes         = []string{api.RouteAskUser, api.RouteSystemLookup, api.RouteDefinitionRepair}
	questionKinds  = []string{api.QuestionValue, api.QuestionApproval, api.QuestionBranch, api.QuestionRestateIntent, api.QuestionRestateAction, api.QuestionReviewDraft}
	checkOutcomes  = []string{checkMet, checkUnmet, api.StatusUnknown}
	checkMet       = "met"
	checkUnmet     = "unmet"
	recordSources  = []string{string(api.SourceUserAnswer), string(api.SourceInstruction), string(api.SourcePreSetData), string(api.SourceMeasuredData), string(api.SourcePriorState), string(api.SourceEvaluation), string(api.SourceReviewedDraft), string(api.SourceConsoleApproval)}
	sourceFromWord = " from "
)

func (e *Expect) validate() error {
	var errs []error
	fail := func(p, format string, args ...any) { errs = append(errs, confx.Errorf(p, format, args...)) }
	if e.Outcome != "" && !slices.Contains(outcomes, e.Outcome) {
		fail("outcome", "outcome %q: want one of %v", e.Outcome, outcomes)
	}
	for slot, src := range e.Known {
		s, o, _ := cutFrom(src)
		if !slices.Contains(recordSources, s) || o != "" && !slices.Contains(recordSources, o) {
			fail(yamlpos.Key("known", slot), "%q: want a source (%v), or \"source from origin_source\"", src, recordSources)
		}
	}
	for _, words := range []struct {
		key, what string
		got       map[string]string
		want      []string
	}{{"unknown", "route ", e.Unknown, routes}, {"asked", "question kind ", e.Asked, questionKinds}, {"checklist", "", e.Checklist, checkOutcomes}} {
		for k, w := range words.got {
			if !slices.Contains(words.want, w) {
				fail(yamlpos.Key(words.key, k), "%s%q: want one of %v", words.what, w, words.want)
			}
		}
	}
	if e.Call != nil {
		var v any
		if err := decodeNumber(e.Call, &v); err != nil {
			fail("call", "%v", err)
		} else if _, isObj := v.(map[string]any); !isObj && v != nil {
			fail("call", "the call's arguments are a mapping, or null for no call")
		}
	}
	return errors.Join(errs...)
}

// cutFrom reads "source" or "source from origin".
func cutFrom(s string) (source, origin string, both bool) {
	return strings.Cut(s, sourceFromWord)
}

// decodeStrict decodes the JSON object b into v, refusing a member v does not have.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeNumber decodes JSON b into v with its numbers exact (json.Number).
func decodeNumber(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
