package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/jsonptr"
	"github.com/verdictgate/verdict/internal/opfile"
)

// Problem is one thing wrong with a policy file, at a path such as
// tools["bank/transfer"].fields.to_account.allowed_sources[2].
type Problem struct {
	Path string
	Msg  string
	// Line and Column place the problem in the file (1-based; see Locate): the value at Path,
	// or the nearest one there when Path names a key that is missing. Zero when unknown.
	Line, Column int
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Issue is a definition problem that does not stop a load; see [Policy.Issues].
type Issue = Problem

// Error is returned by [Parse] and [Load] when the file is not a valid policy. It lists every
// problem found.
type Error struct {
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	fmt.Fprintf(&b, "invalid policy (%d problem", len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	b.WriteString(")")
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.In(e.File))
	}
	return b.String()
}

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	data, err := opfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := Parse(data)
	var pe *Error
	if errors.As(err, &pe) {
		pe.File = path
	}
	return p, err
}

// Parse parses and validates a policy document (YAML, or JSON, being YAML). On failure the error
// is an *Error listing every problem.
func Parse(data []byte) (*Policy, error) { return parse(data, true) }

// ParsePins reads the policy document data for what the executor holds tools to: the Policy it
// returns holds its version, its pins, and its servers and tools (for their classes: the
// executor runs a read of a user's server only for a tool the policy passes through), never an
// expression. The document is checked whole, as Parse checks it, so that a policy Parse refuses
// is refused here too, but its expressions are not compiled: the executor evaluates none.
func ParsePins(data []byte) (*Policy, error) {
	p, err := parse(data, false)
	if err != nil {
		return nil, err
	}
	return &Policy{Version: p.Version, Pins: p.Pins, Servers: p.Servers, Tools: p.Tools}, nil
}

func parse(data []byte, compile bool) (*Policy, error) {
	root, problems := document(data)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	r := &reader{compile: compile}
	p := &Policy{}
	value{r, "", root}.object(p.read)
	if len(r.problems) > 0 {
		return nil, &Error{Problems: locate(root, r.problems)}
	}
	p.Issues = locate(root, r.issues)
	return p, nil
}

func (p *Policy) read(o *object) {
	o.need("policy_version", &p.Version)
	p.Servers = mapOf(o, "servers", func(id string, v value) *Server {
		if !serverID.MatchString(id) {
			v.fail("a server id is letters, digits, '_' and '-' only (at most 128): it is one part of tool keys, action keys and the gateway's <server>.<tool> names")
		}
		return readAs[Server](v)
	})
	p.Pins = mapOf(o, "pins", func(id string, v value) *Pin {
		if p.Servers[id] == nil {
			v.fail("unknown server %q", id)
		}
		return readAs[Pin](v)
	})
	p.Tools = mapOf(o, "tools", func(k string, v value) *Tool {
		srv, name, found := strings.Cut(k, "/")
		if !found || srv == "" || name == "" {
			v.fail(`tool key must be "server/tool"`)
		} else if p.Servers[srv] == nil {
			v.fail("unknown server %q", srv)
		}
		t := readAs[Tool](v)
		t.Key = k
		return t
	})
	p.checkMeasurements(o.r)
	p.Principals = mapOf(o, "principals", func(_ string, v value) *Principal { return readAs[Principal](v) })
}

func (s *Server) read(o *object) {
	if v, ok := o.get("withhold"); ok {
		v.object(func(w *object) {
			set(w, "resources", &s.Withhold.Resources, value.strList)
			set(w, "prompts", &s.Withhold.Prompts, value.strList)
		})
	}
	if v, ok := o.required("audience"); ok {
		if s.Audience, _ = v.strList(); len(s.Audience) == 0 {
			v.fail("must name at least one executor")
		}
	}
	from, hasFrom, tools, hasTools := o.oneOf("tools_from", "tools")
	if hasFrom {
		s.ToolsFrom = readAs[ToolsFrom](from)
	}
	if !hasTools {
		return
	}
	list, _ := tools.list()
	for _, e := range list {
		if e.object(inlineTool) {
			raw, _ := json.Marshal(jsonValue(e.n))
			s.Tools = append(s.Tools, raw)
		}
	}
}

func (f *ToolsFrom) read(o *object) {
	command, hasCommand, url, hasURL := o.oneOf("command", "url")
	if hasCommand {
		if f.Command, _ = command.strList(); len(f.Command) == 0 {
			command.fail("must not be empty")
		}
	}
	if hasURL {
		f.URL, _ = url.nonEmpty()
	}
}

// inlineTool checks an MCP tool definition given in the policy; the server keeps it as JSON.
func inlineTool(o *object) {
	o.need("name", new(string))
	if v, ok := o.get("description"); ok {
		if desc, ok := v.str(); ok {
			if _, err := ParseLabels(desc); err != nil {
				v.issue(err.Error())
			}
		}
	}
	if v, ok := o.get("inputSchema"); !ok {
		v.issue("missing: preflights on this tool end in definition repair")
	}
	o.allow("title", "outputSchema", "annotations", "_meta")
}

func (t *Tool) read(o *object) {
	if v, ok := o.get("class"); ok {
		if s, ok := v.str(); ok {
			switch c := Class(s); c {
			case Irreversible, Reversible, Read:
				t.Class = c
			default:
				v.fail("unknown class %q (want irreversible, reversible or read)", s)
			}
		}
	}
	set(o, "actions", &t.Actions, value.strList)
	if v, ok := o.get("approver"); ok {
		v.object(func(a *object) {
			t.Approver = &Approver{}
			a.need("webhook", &t.Approver.Webhook)
		})
	}
	if v, ok := o.get("when_cases"); ok {
		t.readWhenCases(v)
	}
	t.Fields = mapOf(o, "fields", func(_ string, v value) *Field { return readAs[Field](v) })
	t.Measurements = mapOf(o, "measurements", func(name string, v value) *Measurement {
		m := readAs[Measurement](v)
		m.Name = name
		return m
	})
	if v, ok := o.get("conditions"); ok {
		t.readConditions(v)
	}
	if v, ok := o.get("pending_at_trigger"); ok {
		if list, ok := v.strList(); ok {
			t.PendingAtTrigger = list
		}
	}
	set(o, "notices", &t.Notices, value.strList)
	t.readRecurrence(o)
	if v, ok := o.get("drafted"); ok {
		t.readDrafted(o.path, v)
	}
	t.checkHiddenCharacters(o)
	if v, ok := o.get("approval"); ok {
		a := DefaultApprovalRule()
		v.object(a.read)
		t.Approval = &a
	}
	if v, ok := o.get("relay"); ok {
		t.readRelay(v)
	}
}

func (t *Tool) readWhenCases(v value) {
	list, ok := v.strList()
	if !ok {
		return
	}
	if len(list) == 0 {
		v.fail("must not be empty (omit it to allow all four)")
	}
	for i, w := range list {
		if !slices.Contains(whenCases[:], w) {
			v.r.fail(index(v.path, i), "unknown when_case %q", w)
		}
	}
	t.WhenCases = list
}

// readConditions reads a tool's conditions, each id once, at most MaxConditions.
func (t *Tool) readConditions(v value) {
	list, ok := v.list()
	if ok && len(list) > MaxConditions {
		v.fail("%d conditions, at most %d", len(list), MaxConditions)
	}
	seen := map[string]bool{}
	for _, e := range list {
		c := readAs[Condition](e)
		if c.ID != "" && seen[c.ID] {
			v.r.fail(key(e.path, "id"), "duplicate condition id %q", c.ID)
		}
		seen[c.ID] = true
		t.Conditions = append(t.Conditions, c)
	}
}

// readRecurrence reads a tool's recurrence, which must bound something when_cases allows:
// recurring, which in turn needs a recurrence.
func (t *Tool) readRecurrence(o *object) {
	if v, ok := o.get("recurrence"); ok {
		t.Recurrence = readAs[Recurrence](v)
		if t.WhenCases != nil && !slices.Contains(t.WhenCases, Recurring) {
			v.fail("names nothing: when_cases does not allow recurring")
		}
	}
	if i := slices.Index(t.WhenCases, Recurring); i >= 0 && t.Recurrence == nil {
		o.r.fail(index(key(o.path, "when_cases"), i), "recurring needs a recurrence (count and/or interval) to bound it")
	}
}

// readRelay reads a tool's relay rule: allow_secrets, required, on a read or reversible tool
// only. On a gated tool it would name nothing, since a gated call's server never asks the user,
// and a rule that does nothing is an error rather than a rule silently ignored.
func (t *Tool) readRelay(v value) {
	t.Relay = &RelayRule{}
	ok := v.object(func(o *object) {
		if v, ok := o.required("allow_secrets"); ok {
			t.Relay.AllowSecrets, _ = v.boolean()
		}
	})
	if class := t.EffectiveClass(); ok && class != Read && class != Reversible {
		v.fail("names nothing: only read and reversible tools relay their server's questions, and this tool is %s", class)
	}
}

// read reads a tool's recurrence: count and/or interval.
func (rec *Recurrence) read(o *object) {
	if len(o.m) == 0 {
		o.fail("needs count, interval or both")
	}
	if v, ok := o.get("count"); ok {
		if num, ok := v.number(); ok {
			if i, err := num.Int64(); err != nil || i < 1 || i > MaxRecurrenceCount {
				v.fail("%s: want an integer from 1 to %d", num, MaxRecurrenceCount)
			} else {
				rec.Count = int(i)
			}
		}
	}
	if v, ok := o.get("interval"); ok {
		if d, ok := v.duration(); ok && d < time.Second {
			v.fail("%s: want at least 1s", d)
		} else if ok {
			rec.Interval = d
		}
	}
}

// readDrafted reads a tool's drafted fields: content the model drafts on purpose, settled only
// by the user's review of exactly that draft. A drafted field has no other source, so any rule
// that would give it one (allowed_sources, a confirmation, a measurement, a deferral to the
// trigger) is an error rather than a rule silently ignored.
func (t *Tool) readDrafted(toolPath string, v value) {
	list, _ := v.strList() // an empty name is reported there and skipped here
	if list == nil {
		return
	}
	if len(list) == 0 {
		v.fail("must not be empty (omit it when no field is drafted)")
	}
	field := func(name string) string { return key(key(toolPath, "fields"), name) }
	for i, name := range list {
		switch {
		case name == "":
			continue
		case slices.Contains(t.Drafted, name):
			v.r.fail(index(v.path, i), "duplicate drafted field %q", name)
			continue
		}
		if f := t.Fields[name]; f != nil && f.AllowedSources != nil {
			v.r.fail(key(field(name), "allowed_sources"), "a drafted field is settled only by the user's review of the draft")
		}
		if f := t.Fields[name]; f != nil && f.Confirm {
			v.r.fail(key(field(name), "confirm"), "a drafted field is already approved by its review")
		}
		if t.Measurements[name] != nil {
			v.r.fail(key(key(toolPath, "measurements"), name), "a drafted field is never measured")
		}
		if slices.Contains(t.PendingAtTrigger, name) {
			v.r.fail(index(v.path, i), "a drafted field cannot be pending_at_trigger: it is reviewed before the request is deferred")
		}
		t.Drafted = append(t.Drafted, name)
	}
}

// checkHiddenCharacters refuses allow_hidden_characters on a field that is not drafted.
func (t *Tool) checkHiddenCharacters(o *object) {
	for _, name := range slices.Sorted(maps.Keys(t.Fields)) {
		if t.Fields[name].AllowHiddenCharacters && !slices.Contains(t.Drafted, name) {
			o.r.fail(key(key(key(o.path, "fields"), name), "allow_hidden_characters"),
				"names nothing: only a drafted field's review is refused for characters a person does not see")
		}
	}
}

func (f *Field) read(o *object) {
	set(o, "allow_hidden_characters", &f.AllowHiddenCharacters, value.boolean)
	set(o, "question", &f.Question, value.nonEmpty)
	if v, ok := o.get("allowed_sources"); ok {
		if list, ok := v.strList(); ok {
			if len(list) == 0 {
				v.fail("must not be empty")
			}
			f.AllowedSources = []api.Source{}
			for i, s := range list {
				if !slices.Contains(cascade[:], api.Source(s)) {
					o.r.fail(index(v.path, i), "unknown source %q", s)
					continue
				}
				f.AllowedSources = append(f.AllowedSources, api.Source(s))
			}
		}
	}
	set(o, "confirm", &f.Confirm, value.boolean)
}

func (m *Measurement) read(o *object) {
	h, hasHTTP, c, hasMCP := o.oneOf("http", "mcp")
	if hasHTTP {
		h.object(func(o *object) {
			m.HTTP = &HTTPMeasurement{}
			o.need("url", &m.HTTP.URL)
			set(o, "pointer", &m.HTTP.Pointer, value.pointer)
		})
	}
	if hasMCP {
		c.object(func(o *object) {
			m.MCP = &MCPMeasurement{}
			o.need("server", &m.MCP.Server)
			o.need("tool", &m.MCP.Tool)
			if v, ok := o.get("args"); ok {
				if _, ok := v.mapping(); ok {
					m.MCP.Args = jsonValue(v.n).(map[string]any)
				}
			}
			set(o, "pointer", &m.MCP.Pointer, value.pointer)
		})
	}
	m.Inputs = templateNames(m)
	if v, ok := o.get("timeout"); ok {
		if d, ok := v.duration(); ok && d <= 0 {
			v.fail("must be positive")
		} else if ok {
			m.Timeout = d
		}
	}
}

// pointer reads a measurement's JSON pointer.
func (v value) pointer() (string, bool) {
	s, ok := v.str()
	if _, err := jsonptr.Split(s); ok && err != nil {
		v.fail("%v", err)
	}
	return s, ok
}

var templateRE = regexp.MustCompile(`\{\{\s*([^{}\s]+)\s*\}\}`)

// templateNames lists the names a measurement's templates read, sorted: in the URL of an HTTP
// measurement, the string arguments of an MCP one.
func templateNames(m *Measurement) []string {
	var texts, out []string
	if m.HTTP != nil {
		texts = append(texts, m.HTTP.URL)
	}
	if m.MCP != nil {
		for _, a := range m.MCP.Args {
			if s, ok := a.(string); ok {
				texts = append(texts, s)
			}
		}
	}
	for _, t := range texts {
		for _, mm := range templateRE.FindAllStringSubmatch(t, -1) {
			out = append(out, mm[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkMeasurements marks MCP measurements that must never run: a measurement calls its tool
// without a verdict, so the tool must be on a declared server and classified read by this
// policy. Server self-description (readOnlyHint) does not count.
func (p *Policy) checkMeasurements(r *reader) {
	for _, tk := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[tk]
		for _, n := range slices.Sorted(maps.Keys(t.Measurements)) {
			ms := t.Measurements[n]
			if ms.MCP == nil || ms.MCP.Server == "" || ms.MCP.Tool == "" {
				continue
			}
			switch {
			case p.Servers[ms.MCP.Server] == nil:
				ms.Err = fmt.Errorf("server %q is not declared", ms.MCP.Server)
			case p.Tool(ms.MCP.Server, ms.MCP.Tool).EffectiveClass() != Read:
				ms.Err = fmt.Errorf("tool %s/%s is not classified read by the policy", ms.MCP.Server, ms.MCP.Tool)
			default:
				continue
			}
			path := key(key(key("tools", tk), "measurements"), n) + ".mcp"
			r.issues = append(r.issues, Issue{Path: path, Msg: ms.Err.Error() + ": the measurement never runs"})
		}
	}
}

func (c *Condition) read(o *object) {
	o.need("id", &c.ID)
	o.need("expr", &c.Expr)
	set(o, "description", &c.Description, value.str)
	if c.Expr != "" {
		v, _ := o.get("expr")
		c.AST, c.Reads, c.CompileErr = v.expression(c.Expr)
	}
}

func (p *Principal) read(o *object) {
	v, ok := o.get("user_checklist")
	if !ok {
		return
	}
	list, ok := v.list()
	if ok && len(list) > MaxChecklistItems {
		v.fail("%d items, at most %d", len(list), MaxChecklistItems)
	}
	seen := map[string]bool{}
	for _, e := range list {
		it := &ChecklistItem{}
		if e.object(func(o *object) { it.read(o, seen) }) {
			p.UserChecklist = append(p.UserChecklist, it)
		}
	}
}

// read reads one item of a user checklist; seen holds the ids of the items before it.
func (it *ChecklistItem) read(o *object, seen map[string]bool) {
	// An item without an id cannot be reattached to an answer.
	if v, ok := o.required("id"); ok {
		it.ID, _ = v.nonEmpty()
		if seen[it.ID] {
			v.fail("duplicate item id %q", it.ID)
		}
		seen[it.ID] = true
	}
	set(o, "description", &it.Description, value.str)
	set(o, "expr", &it.Expr, value.nonEmpty)
	it.Kind = "expr"
	if v, ok := o.get("kind"); ok {
		if s, ok := v.str(); ok {
			if s != "expr" && s != "confirm" {
				v.fail("unknown kind %q (want expr or confirm)", s)
			}
			it.Kind = s
		}
	}
	switch expr, _ := o.get("expr"); {
	case it.Kind != "expr":
	case it.Expr == "":
		expr.fail("required for kind expr")
	default:
		it.AST, it.Reads, it.CompileErr = expr.expression(it.Expr)
	}
}

// serverID is what can stand as one part of "server/tool" keys, action keys
// (principal:action:server/tool) and the gateway's "<server>.<tool>" names without being read
// as two parts.
var serverID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
