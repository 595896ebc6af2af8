package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"sigs.k8s.io/yaml"
	goyaml "sigs.k8s.io/yaml/goyaml.v2"

	"github.com/verdictgate/verdict/internal/jsonptr"
	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/internal/suggest"
	"github.com/verdictgate/verdict/internal/yamlpos"
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
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "invalid policy (%d problem", len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	b.WriteString(")")
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.In(e.File))
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
func Parse(data []byte) (*Policy, error) {
	root, err := yamlpos.Parse(data)
	if se, ok := errors.AsType[*yamlpos.SyntaxError](err); ok {
		return nil, &Error{Problems: []Problem{{Msg: se.Msg, Line: se.Line}}}
	}
	if ps := duplicateKeys(root); len(ps) > 0 {
		return nil, &Error{Problems: ps}
	}
	if ps := plainKeys(data); len(ps) > 0 {
		return nil, &Error{Problems: locate(root, ps)}
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Msg: err.Error()}}}
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &Error{Problems: []Problem{{Msg: "yaml: " + err.Error()}}}
	}
	l := &loader{}
	p := l.policy(doc)
	if len(l.problems) > 0 {
		return nil, &Error{Problems: locate(root, l.problems)}
	}
	p.Issues = locate(root, l.issues)
	return p, nil
}

// plainKeys lists the mapping keys that YAML reads as something other than a string. YAML 1.1
// reads an unquoted 007 as the number 7, on as true and 1e3 as 1000, and the conversion to JSON
// then names them "7", "true" and "1000": a principal 007 would silently get no checklist, a
// field named on no source rule. Such a key is refused, to be quoted, rather than renamed.
func plainKeys(data []byte) []Problem {
	var doc any
	if err := goyaml.Unmarshal(data, &doc); err != nil {
		return nil // the strict conversion reports the syntax error
	}
	var out []Problem
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[any]any:
			for k, e := range x {
				s, ok := k.(string)
				if !ok {
					out = append(out, Problem{Path: key(path, fmt.Sprint(k)),
						Msg: fmt.Sprintf("key reads as %T %v, not as text: quote it", k, k)})
					continue
				}
				walk(key(path, s), e)
			}
		case []any:
			for i, e := range x {
				walk(index(path, i), e)
			}
		}
	}
	walk("", doc)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

type loader struct {
	problems []Problem
	issues   []Issue
	compiler *Compiler
}

func (l *loader) fail(path, format string, args ...any) {
	l.problems = append(l.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// key appends a map key to a path: .name for identifiers, ["name"] otherwise — the notation
// yamlpos reads back to place a problem in the file.
func key(path, k string) string { return yamlpos.Key(path, k) }

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	return fmt.Sprintf("%T", v)
}

// object checks that v is a mapping with only the allowed keys and returns it.
func (l *loader) object(path string, v any, allowed ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		l.fail(path, "want a mapping, got %s", typeName(v))
		return nil, false
	}
	for _, k := range sortedKeys(m) {
		if !contains(allowed, k) {
			l.fail(key(path, k), "unknown key%s", suggest.DidYouMean(k, allowed))
		}
	}
	return m, true
}

// mapping checks that v is a mapping with arbitrary keys.
func (l *loader) mapping(path string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		l.fail(path, "want a mapping, got %s", typeName(v))
	}
	return m, ok
}

func (l *loader) str(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		l.fail(path, "want a string, got %s", typeName(v))
	}
	return s, ok
}

func (l *loader) nonEmpty(path string, v any) (string, bool) {
	s, ok := l.str(path, v)
	if ok && strings.TrimSpace(s) == "" {
		l.fail(path, "must not be empty")
		return "", false
	}
	return s, ok
}

func (l *loader) strList(path string, v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok {
		l.fail(path, "want a list, got %s", typeName(v))
		return nil, false
	}
	out := make([]string, 0, len(a))
	good := true
	for i, e := range a {
		s, ok := l.nonEmpty(index(path, i), e)
		good = good && ok
		out = append(out, s)
	}
	return out, good
}

func (l *loader) boolean(path string, v any) bool {
	b, ok := v.(bool)
	if !ok {
		l.fail(path, "want a boolean, got %s", typeName(v))
	}
	return b
}

func (l *loader) policy(doc any) *Policy {
	p := &Policy{
		Servers:    map[string]*Server{},
		Tools:      map[string]*Tool{},
		Principals: map[string]*Principal{},
	}
	m, ok := l.object("", doc, "policy_version", "servers", "tools", "principals", "pins")
	if !ok {
		return p
	}
	if v, ok := m["policy_version"]; ok {
		p.Version, _ = l.nonEmpty("policy_version", v)
	} else {
		l.fail("policy_version", "required")
	}
	if v, ok := m["servers"]; ok {
		if sm, ok := l.mapping("servers", v); ok {
			for _, id := range sortedKeys(sm) {
				if !validServerID(id) {
					l.fail(key("servers", id), "a server id is letters, digits, '_' and '-' only (at most 128): it is one part of tool keys, action keys and the gateway's <server>.<tool> names")
				}
				p.Servers[id] = l.server(key("servers", id), sm[id])
			}
		}
	}
	if v, ok := m["pins"]; ok {
		p.Pins = l.pins(v, p.Servers)
	}
	if v, ok := m["tools"]; ok {
		if tm, ok := l.mapping("tools", v); ok {
			for _, k := range sortedKeys(tm) {
				path := key("tools", k)
				srv, name, found := strings.Cut(k, "/")
				if !found || srv == "" || name == "" {
					l.fail(path, `tool key must be "server/tool"`)
				} else if _, ok := p.Servers[srv]; !ok {
					l.fail(path, "unknown server %q", srv)
				}
				t := l.tool(path, tm[k])
				t.Key = k
				p.Tools[k] = t
			}
		}
	}
	l.checkMeasurements(p)
	if v, ok := m["principals"]; ok {
		if pm, ok := l.mapping("principals", v); ok {
			for _, id := range sortedKeys(pm) {
				p.Principals[id] = l.principal(key("principals", id), pm[id])
			}
		}
	}
	return p
}

func (l *loader) server(path string, v any) *Server {
	s := &Server{}
	m, ok := l.object(path, v, "audience", "tools_from", "tools", "withhold")
	if !ok {
		return s
	}
	if v, ok := m["withhold"]; ok {
		wp := key(path, "withhold")
		if wm, ok := l.object(wp, v, "resources", "prompts"); ok {
			if r, ok := wm["resources"]; ok {
				s.Withhold.Resources, _ = l.strList(key(wp, "resources"), r)
			}
			if p, ok := wm["prompts"]; ok {
				s.Withhold.Prompts, _ = l.strList(key(wp, "prompts"), p)
			}
		}
	}
	if v, ok := m["audience"]; ok {
		s.Audience, _ = l.strList(key(path, "audience"), v)
		if len(s.Audience) == 0 {
			l.fail(key(path, "audience"), "must name at least one executor")
		}
	} else {
		l.fail(key(path, "audience"), "required")
	}
	_, hasFrom := m["tools_from"]
	_, hasTools := m["tools"]
	if hasFrom == hasTools {
		l.fail(path, "exactly one of tools_from and tools is required")
	}
	if v, ok := m["tools_from"]; ok {
		fp := key(path, "tools_from")
		if fm, ok := l.object(fp, v, "command", "url"); ok {
			s.ToolsFrom = &ToolsFrom{}
			_, hc := fm["command"]
			_, hu := fm["url"]
			if hc == hu {
				l.fail(fp, "exactly one of command and url is required")
			}
			if c, ok := fm["command"]; ok {
				s.ToolsFrom.Command, _ = l.strList(key(fp, "command"), c)
				if len(s.ToolsFrom.Command) == 0 {
					l.fail(key(fp, "command"), "must not be empty")
				}
			}
			if u, ok := fm["url"]; ok {
				s.ToolsFrom.URL, _ = l.nonEmpty(key(fp, "url"), u)
			}
		}
	}
	if v, ok := m["tools"]; ok {
		tp := key(path, "tools")
		a, ok := v.([]any)
		if !ok {
			l.fail(tp, "want a list, got %s", typeName(v))
			return s
		}
		for i, e := range a {
			ep := index(tp, i)
			tm, ok := l.object(ep, e, "name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta")
			if !ok {
				continue
			}
			if n, ok := tm["name"]; ok {
				l.nonEmpty(key(ep, "name"), n)
			} else {
				l.fail(key(ep, "name"), "required")
			}
			if d, ok := tm["description"]; ok {
				if ds, ok := l.str(key(ep, "description"), d); ok {
					if _, err := ParseLabels(ds); err != nil {
						l.issues = append(l.issues, Issue{Path: key(ep, "description"), Msg: err.Error()})
					}
				}
			}
			if _, ok := tm["inputSchema"]; !ok {
				l.issues = append(l.issues, Issue{Path: key(ep, "inputSchema"), Msg: "missing: preflights on this tool end in definition repair"})
			}
			raw, _ := json.Marshal(e)
			s.Tools = append(s.Tools, raw)
		}
	}
	return s
}

func (l *loader) tool(path string, v any) *Tool {
	t := &Tool{}
	m, ok := l.object(path, v, "class", "actions", "approver", "when_cases", "fields",
		"measurements", "conditions", "pending_at_trigger", "notices", "recurrence", "drafted", "approval", "relay")
	if !ok {
		return t
	}
	if v, ok := m["class"]; ok {
		if s, ok := l.str(key(path, "class"), v); ok {
			switch c := Class(s); c {
			case Irreversible, Reversible, Read:
				t.Class = c
			default:
				l.fail(key(path, "class"), "unknown class %q (want irreversible, reversible or read)", s)
			}
		}
	}
	if v, ok := m["actions"]; ok {
		t.Actions, _ = l.strList(key(path, "actions"), v)
	}
	if v, ok := m["approver"]; ok {
		ap := key(path, "approver")
		if am, ok := l.object(ap, v, "webhook"); ok {
			t.Approver = &Approver{}
			if w, ok := am["webhook"]; ok {
				t.Approver.Webhook, _ = l.nonEmpty(key(ap, "webhook"), w)
			} else {
				l.fail(key(ap, "webhook"), "required")
			}
		}
	}
	if v, ok := m["when_cases"]; ok {
		wp := key(path, "when_cases")
		if list, ok := l.strList(wp, v); ok {
			if len(list) == 0 {
				l.fail(wp, "must not be empty (omit it to allow all four)")
			}
			for i, w := range list {
				if !contains(whenCases[:], w) {
					l.fail(index(wp, i), "unknown when_case %q", w)
				}
			}
			t.WhenCases = list
		}
	}
	if v, ok := m["fields"]; ok {
		fp := key(path, "fields")
		if fm, ok := l.mapping(fp, v); ok {
			t.Fields = map[string]*Field{}
			for _, name := range sortedKeys(fm) {
				t.Fields[name] = l.field(key(fp, name), fm[name])
			}
		}
	}
	if v, ok := m["measurements"]; ok {
		mp := key(path, "measurements")
		if mm, ok := l.mapping(mp, v); ok {
			t.Measurements = map[string]*Measurement{}
			for _, name := range sortedKeys(mm) {
				ms := l.measurement(key(mp, name), mm[name])
				ms.Name = name
				t.Measurements[name] = ms
			}
		}
	}
	if v, ok := m["conditions"]; ok {
		cp := key(path, "conditions")
		if a, ok := v.([]any); !ok {
			l.fail(cp, "want a list, got %s", typeName(v))
		} else {
			if len(a) > MaxConditions {
				l.fail(cp, "%d conditions, at most %d", len(a), MaxConditions)
			}
			seen := map[string]bool{}
			for i, e := range a {
				c := l.condition(index(cp, i), e)
				if c.ID != "" {
					if seen[c.ID] {
						l.fail(key(index(cp, i), "id"), "duplicate condition id %q", c.ID)
					}
					seen[c.ID] = true
				}
				t.Conditions = append(t.Conditions, c)
			}
		}
	}
	if v, ok := m["pending_at_trigger"]; ok {
		pp := key(path, "pending_at_trigger")
		if list, ok := l.strList(pp, v); ok {
			t.PendingAtTrigger = list
		}
	}
	if v, ok := m["notices"]; ok {
		t.Notices, _ = l.strList(key(path, "notices"), v)
	}
	if v, ok := m["recurrence"]; ok {
		rp := key(path, "recurrence")
		t.Recurrence = l.recurrence(rp, v)
		if t.WhenCases != nil && !contains(t.WhenCases, Recurring) {
			l.fail(rp, "names nothing: when_cases does not allow recurring")
		}
	}
	if t.WhenCases != nil && t.Recurrence == nil {
		if i := slices.Index(t.WhenCases, Recurring); i >= 0 {
			l.fail(index(key(path, "when_cases"), i), "recurring needs a recurrence (count and/or interval) to bound it")
		}
	}
	if v, ok := m["drafted"]; ok {
		l.drafted(path, v, t)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Fields)) {
		if t.Fields[name].AllowHiddenCharacters && !contains(t.Drafted, name) {
			l.fail(key(key(key(path, "fields"), name), "allow_hidden_characters"),
				"names nothing: only a drafted field's review is refused for characters a person does not see")
		}
	}
	if v, ok := m["approval"]; ok {
		t.Approval = l.approval(key(path, "approval"), v)
	}
	if v, ok := m["relay"]; ok {
		t.Relay = l.relay(key(path, "relay"), v, t.EffectiveClass())
	}
	return t
}

// relay reads a tool's relay rule: allow_secrets, required, on a read or reversible tool only.
// On a gated tool it would name nothing, since a gated call's server never asks the user, and
// a rule that does nothing is an error rather than a rule silently ignored.
func (l *loader) relay(path string, v any, class Class) *RelayRule {
	r := &RelayRule{}
	m, ok := l.object(path, v, "allow_secrets")
	if !ok {
		return r
	}
	if v, ok := m["allow_secrets"]; ok {
		r.AllowSecrets = l.boolean(key(path, "allow_secrets"), v)
	} else {
		l.fail(key(path, "allow_secrets"), "required")
	}
	if class != Read && class != Reversible {
		l.fail(path, "names nothing: only read and reversible tools relay their server's questions, and this tool is %s", class)
	}
	return r
}

// recurrence reads a tool's recurrence: count and/or interval.
func (l *loader) recurrence(path string, v any) *Recurrence {
	r := &Recurrence{}
	m, ok := l.object(path, v, "count", "interval")
	if !ok {
		return r
	}
	if len(m) == 0 {
		l.fail(path, "needs count, interval or both")
	}
	if v, ok := m["count"]; ok {
		cp := key(path, "count")
		n, isNum := v.(json.Number)
		i, err := n.Int64()
		switch {
		case !isNum:
			l.fail(cp, "want an integer, got %s", typeName(v))
		case err != nil || i < 1 || i > MaxRecurrenceCount:
			l.fail(cp, "%s: want an integer from 1 to %d", n, MaxRecurrenceCount)
		default:
			r.Count = int(i)
		}
	}
	if v, ok := m["interval"]; ok {
		ip := key(path, "interval")
		if s, ok := l.str(ip, v); ok {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				l.fail(ip, "invalid duration %q", s)
			case d < time.Second:
				l.fail(ip, "%s: want at least 1s", d)
			default:
				r.Interval = d
			}
		}
	}
	return r
}

// drafted reads a tool's drafted fields: content the model drafts on purpose, settled only by
// the user's review of exactly that draft. A drafted field has no other source, so any rule
// that would give it one (allowed_sources, a confirmation, a measurement, a deferral to the
// trigger) is an error rather than a rule silently ignored.
func (l *loader) drafted(toolPath string, v any, t *Tool) {
	path := key(toolPath, "drafted")
	list, _ := l.strList(path, v) // an empty name is reported there and skipped here
	if list == nil {
		return
	}
	if len(list) == 0 {
		l.fail(path, "must not be empty (omit it when no field is drafted)")
	}
	for i, name := range list {
		ip := index(path, i)
		switch {
		case name == "":
			continue
		case contains(t.Drafted, name):
			l.fail(ip, "duplicate drafted field %q", name)
			continue
		}
		if f := t.Fields[name]; f != nil {
			if f.AllowedSources != nil {
				l.fail(key(key(key(toolPath, "fields"), name), "allowed_sources"),
					"a drafted field is settled only by the user's review of the draft")
			}
			if f.Confirm {
				l.fail(key(key(key(toolPath, "fields"), name), "confirm"),
					"a drafted field is already approved by its review")
			}
		}
		if t.Measurements[name] != nil {
			l.fail(key(key(toolPath, "measurements"), name), "a drafted field is never measured")
		}
		if contains(t.PendingAtTrigger, name) {
			l.fail(ip, "a drafted field cannot be pending_at_trigger: it is reviewed before the request is deferred")
		}
		t.Drafted = append(t.Drafted, name)
	}
}

func (l *loader) field(path string, v any) *Field {
	f := &Field{}
	m, ok := l.object(path, v, "allowed_sources", "confirm", "question", "allow_hidden_characters")
	if !ok {
		return f
	}
	if v, ok := m["allow_hidden_characters"]; ok {
		f.AllowHiddenCharacters = l.boolean(key(path, "allow_hidden_characters"), v)
	}
	if v, ok := m["question"]; ok {
		f.Question, _ = l.nonEmpty(key(path, "question"), v)
	}
	if v, ok := m["allowed_sources"]; ok {
		ap := key(path, "allowed_sources")
		if list, ok := l.strList(ap, v); ok {
			if len(list) == 0 {
				l.fail(ap, "must not be empty")
			}
			f.AllowedSources = []Source{}
			for i, s := range list {
				if !contains(sourceNames(), s) {
					l.fail(index(ap, i), "unknown source %q", s)
					continue
				}
				f.AllowedSources = append(f.AllowedSources, Source(s))
			}
		}
	}
	if v, ok := m["confirm"]; ok {
		f.Confirm = l.boolean(key(path, "confirm"), v)
	}
	return f
}

func sourceNames() []string {
	out := make([]string, len(cascade))
	for i, s := range cascade {
		out[i] = string(s)
	}
	return out
}

func (l *loader) measurement(path string, v any) *Measurement {
	ms := &Measurement{}
	m, ok := l.object(path, v, "http", "mcp", "timeout")
	if !ok {
		return ms
	}
	_, hh := m["http"]
	_, hm := m["mcp"]
	if hh == hm {
		l.fail(path, "exactly one of http and mcp is required")
	}
	if v, ok := m["http"]; ok {
		hp := key(path, "http")
		if hmap, ok := l.object(hp, v, "url", "pointer"); ok {
			ms.HTTP = &HTTPMeasurement{}
			if u, ok := hmap["url"]; ok {
				ms.HTTP.URL, _ = l.nonEmpty(key(hp, "url"), u)
			} else {
				l.fail(key(hp, "url"), "required")
			}
			if p, ok := hmap["pointer"]; ok {
				ms.HTTP.Pointer = l.pointer(key(hp, "pointer"), p)
			}
		}
	}
	if v, ok := m["mcp"]; ok {
		mp := key(path, "mcp")
		if mm, ok := l.object(mp, v, "server", "tool", "args", "pointer"); ok {
			ms.MCP = &MCPMeasurement{}
			if s, ok := mm["server"]; ok {
				ms.MCP.Server, _ = l.nonEmpty(key(mp, "server"), s)
			} else {
				l.fail(key(mp, "server"), "required")
			}
			if s, ok := mm["tool"]; ok {
				ms.MCP.Tool, _ = l.nonEmpty(key(mp, "tool"), s)
			} else {
				l.fail(key(mp, "tool"), "required")
			}
			if a, ok := mm["args"]; ok {
				ms.MCP.Args, _ = l.mapping(key(mp, "args"), a)
			}
			if p, ok := mm["pointer"]; ok {
				ms.MCP.Pointer = l.pointer(key(mp, "pointer"), p)
			}
		}
	}
	ms.Inputs = templateNames(ms)
	if v, ok := m["timeout"]; ok {
		tp := key(path, "timeout")
		if s, ok := l.str(tp, v); ok {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				l.fail(tp, "invalid duration %q", s)
			case d <= 0:
				l.fail(tp, "must be positive")
			default:
				ms.Timeout = d
			}
		}
	}
	return ms
}

var templateRE = regexp.MustCompile(`\{\{\s*([^{}\s]+)\s*\}\}`)

// templateNames lists the names a measurement's templates read: the URL of an HTTP
// measurement, the string arguments of an MCP one.
func templateNames(m *Measurement) []string {
	var texts []string
	if m.HTTP != nil {
		texts = append(texts, m.HTTP.URL)
	}
	if m.MCP != nil {
		for _, k := range sortedKeys(m.MCP.Args) {
			if s, ok := m.MCP.Args[k].(string); ok {
				texts = append(texts, s)
			}
		}
	}
	var out []string
	for _, t := range texts {
		for _, mm := range templateRE.FindAllStringSubmatch(t, -1) {
			if !contains(out, mm[1]) {
				out = append(out, mm[1])
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkMeasurements marks MCP measurements that must never run: a measurement calls its tool
// without a verdict, so the tool must be on a declared server and classified read by this
// policy. Server self-description (readOnlyHint) does not count.
func (l *loader) checkMeasurements(p *Policy) {
	for _, tk := range sortedToolKeys(p.Tools) {
		t := p.Tools[tk]
		names := make([]string, 0, len(t.Measurements))
		for n := range t.Measurements {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			ms := t.Measurements[n]
			if ms.MCP == nil || ms.MCP.Server == "" || ms.MCP.Tool == "" {
				continue
			}
			path := key(key(key("tools", tk), "measurements"), n) + ".mcp"
			switch {
			case p.Servers[ms.MCP.Server] == nil:
				ms.Err = fmt.Errorf("server %q is not declared", ms.MCP.Server)
			case p.Tool(ms.MCP.Server, ms.MCP.Tool).EffectiveClass() != Read:
				ms.Err = fmt.Errorf("tool %s/%s is not classified read by the policy", ms.MCP.Server, ms.MCP.Tool)
			default:
				continue
			}
			l.issues = append(l.issues, Issue{Path: path, Msg: ms.Err.Error() + ": the measurement never runs"})
		}
	}
}

func sortedToolKeys(m map[string]*Tool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (l *loader) pointer(path string, v any) string {
	s, ok := l.str(path, v)
	if _, err := jsonptr.Split(s); ok && err != nil {
		l.fail(path, "%v", err)
	}
	return s
}

func (l *loader) condition(path string, v any) *Condition {
	c := &Condition{}
	m, ok := l.object(path, v, "id", "expr", "description")
	if !ok {
		return c
	}
	if v, ok := m["id"]; ok {
		c.ID, _ = l.nonEmpty(key(path, "id"), v)
	} else {
		l.fail(key(path, "id"), "required")
	}
	if v, ok := m["expr"]; ok {
		c.Expr, _ = l.nonEmpty(key(path, "expr"), v)
	} else {
		l.fail(key(path, "expr"), "required")
	}
	if v, ok := m["description"]; ok {
		c.Description, _ = l.str(key(path, "description"), v)
	}
	if c.Expr != "" && l.exprFits(key(path, "expr"), c.Expr) {
		c.AST, c.Reads, c.CompileErr = l.compile(c.Expr)
		if c.CompileErr != nil {
			l.issues = append(l.issues, Issue{Path: key(path, "expr"), Msg: c.CompileErr.Error()})
		}
	}
	return c
}

func (l *loader) principal(path string, v any) *Principal {
	p := &Principal{}
	m, ok := l.object(path, v, "user_checklist")
	if !ok {
		return p
	}
	if v, ok := m["user_checklist"]; ok {
		cp := key(path, "user_checklist")
		a, ok := v.([]any)
		if !ok {
			l.fail(cp, "want a list, got %s", typeName(v))
			return p
		}
		if len(a) > MaxChecklistItems {
			l.fail(cp, "%d items, at most %d", len(a), MaxChecklistItems)
		}
		seen := map[string]bool{}
		for i, e := range a {
			ip := index(cp, i)
			im, ok := l.object(ip, e, "id", "description", "kind", "expr")
			if !ok {
				continue
			}
			it := &ChecklistItem{}
			if v, ok := im["id"]; ok {
				it.ID, _ = l.nonEmpty(key(ip, "id"), v)
				if seen[it.ID] {
					l.fail(key(ip, "id"), "duplicate item id %q", it.ID)
				}
				seen[it.ID] = true
			} else {
				// An item without an id cannot be reattached to an answer.
				l.fail(key(ip, "id"), "required")
			}
			if v, ok := im["description"]; ok {
				it.Description, _ = l.str(key(ip, "description"), v)
			}
			if v, ok := im["expr"]; ok {
				it.Expr, _ = l.nonEmpty(key(ip, "expr"), v)
			}
			it.Kind = "expr"
			if v, ok := im["kind"]; ok {
				if s, ok := l.str(key(ip, "kind"), v); ok {
					if s != "expr" && s != "confirm" {
						l.fail(key(ip, "kind"), "unknown kind %q (want expr or confirm)", s)
					}
					it.Kind = s
				}
			}
			if it.Kind == "expr" {
				if it.Expr == "" {
					l.fail(key(ip, "expr"), "required for kind expr")
				} else if l.exprFits(key(ip, "expr"), it.Expr) {
					it.AST, it.Reads, it.CompileErr = l.compile(it.Expr)
					if it.CompileErr != nil {
						l.issues = append(l.issues, Issue{Path: key(ip, "expr"), Msg: it.CompileErr.Error()})
					}
				}
			}
			p.UserChecklist = append(p.UserChecklist, it)
		}
	}
	return p
}

// exprFits reports whether expr is within MaxExprBytes, and fails path when it is not. An
// expression that large is a load error rather than an issue: it is never compiled, so that a
// policy file cannot make every reload expensive.
func (l *loader) exprFits(path, expr string) bool {
	if len(expr) <= MaxExprBytes {
		return true
	}
	l.fail(path, "%d bytes, at most %d", len(expr), MaxExprBytes)
	return false
}

// compile type-checks a CEL expression over the variables every condition may read.
func (l *loader) compile(expr string) (*cel.Ast, Reads, error) {
	if l.compiler == nil {
		c, err := NewCompiler()
		if err != nil {
			return nil, Reads{}, err
		}
		l.compiler = c
	}
	return l.compiler.Compile(expr)
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// validServerID reports whether id can stand as one part of "server/tool" keys, action keys
// (principal:action:server/tool) and the gateway's "<server>.<tool>" names without being read
// as two parts.
func validServerID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
