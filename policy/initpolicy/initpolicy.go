// Package initpolicy writes a first policy for a set of servers from their tools as listed: every
// tool, gated until a person classes it; each of its arguments under fields with the source
// cascade a field gets by default; pins for the definitions as listed. What a server says of its
// own tools — its description, its annotations (readOnlyHint, destructiveHint, …), arguments its
// schema leaves free text — is written as comments for the person who decides, and never as a
// decision: a server's self-description cannot relax a gate (docs/design.md, "Fail closed").
//
// `verdictd policy init` is its command: it lists the servers (List) or reads their saved
// tools/list answers (ReadSaved), writes the policy (Write), and on a second run shows what
// changed (Diff) rather than overwriting the first.
package initpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/yamlpos"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

// shortString is the longest maxLength of a string argument that is a name, an identifier or
// an account number rather than text someone writes: such an argument is not proposed as
// drafted.
const shortString = 64

// wrapAt is the width comments are wrapped to.
const wrapAt = 100

// Write returns a complete policy for the servers of p, which keep their audience, tools_from or
// inline tools and withhold as p gives them, and the tools listed for each (listed, by server
// id; every server of p must have its listing). source names where the servers came from in the
// policy's heading. The rest of p (its tools, pins and principals) is not read: the policy is
// written from the listings alone.
//
// Tools whose definition every preflight would repair (unusable, or a schema or label the gate
// cannot read) are written too, gated like the others, and come back as problems at their
// place in the written policy: check-policy reports them until the server fixes them, and an
// unusable definition has no digest to pin.
func Write(p *policy.Policy, listed map[string][]upstream.Tool, source string) ([]byte, []policy.Problem, error) {
	eng, err := gates.New(gates.Config{State: gates.NewMemState()})
	if err != nil {
		return nil, nil, err
	}
	ids := slices.Sorted(maps.Keys(p.Servers))
	for _, id := range ids {
		if _, ok := listed[id]; !ok {
			return nil, nil, fmt.Errorf("server %s has no listing", id)
		}
	}
	w := &writer{}
	w.heading(source)
	w.line(0, "policy_version: "+quote(p.Version))
	w.comment(0, "Change it with every change of the file: records and verdicts name the policy by its version.")
	w.line(0, "servers:")
	for _, id := range ids {
		if err := w.server(id, p.Servers[id]); err != nil {
			return nil, nil, err
		}
	}
	if len(ids) == 0 {
		w.appendTo(" {}")
	}
	var problems []policy.Problem
	pins := map[string][]upstream.Tool{}
	w.line(0, "tools:")
	empty := true
	for _, id := range ids {
		tools := slices.Clone(listed[id])
		slices.SortStableFunc(tools, func(a, b upstream.Tool) int { return strings.Compare(a.Name, b.Name) })
		for i, t := range tools {
			if i > 0 && t.Name == tools[i-1].Name && t.Name != "" {
				continue // a name listed twice has one entry; both copies are unusable
			}
			if t.Name == "" {
				problems = append(problems, policy.Problem{Path: yamlpos.Key("servers", id),
					Msg: fmt.Sprintf("the server lists a tool with no name (%v): it is left out", t.Err)})
				continue
			}
			if t.Err == nil {
				pins[id] = append(pins[id], t)
			}
			why, err := w.tool(eng, id, t)
			if err != nil {
				return nil, nil, err
			}
			if why != "" {
				problems = append(problems, policy.Problem{Path: yamlpos.Key("tools", id+"/"+t.Name), Msg: why})
			}
			empty = false
		}
	}
	if empty {
		w.appendTo(" {}")
	}
	w.pins(ids, pins)
	out := w.b.Bytes()
	return out, policy.Locate(out, problems), nil
}

// writer builds the policy text line by line.
type writer struct{ b bytes.Buffer }

func (w *writer) line(indent int, s string) {
	w.b.WriteString(strings.Repeat("  ", indent))
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// appendTo adds s to the end of the last line.
func (w *writer) appendTo(s string) {
	w.b.Truncate(w.b.Len() - 1)
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// comment writes text as comment lines, wrapped, each of its own lines starting a new one. The
// text is the servers' as often as not: everything a person would not see is escaped, so that no
// character of it can end the comment or hide what the line says.
func (w *writer) comment(indent int, text string) {
	for l := range strings.Lines(text) {
		for _, part := range wrap(visibleText(strings.TrimRight(l, "\r\n")), wrapAt-2*indent-2) {
			w.line(indent, strings.TrimRight("# "+part, " "))
		}
	}
}

func (w *writer) heading(source string) {
	w.comment(0, "A first policy, written by `verdictd policy init` for the servers of "+source+" from their tool listings.")
	w.comment(0, "Nothing in it is decided yet. Every tool is irreversible, the class a tool gets when nothing is "+
		"decided: each call is gated, and with no actions and no approver none can be approved. For each tool, "+
		"read what its server says of it (the comments above its class) and class it read, reversible or "+
		"irreversible; give an irreversible one the actions a user's words must name, and narrow its fields' "+
		"sources. A server's annotations are its own hints: they decide nothing here.")
	w.comment(0, "The pins hold every tool to its definition as listed, and each server is pinned whole, so a tool "+
		"it adds later is held back until it is pinned too (verdictd catalog pin).")
	w.comment(0, "Check the file with `verdictd check-policy FILE`; docs/operations.md, \"The policy file\", says what each key does.")
}

func (w *writer) server(id string, s *policy.Server) error {
	w.line(1, yamlKey(id)+":")
	w.line(2, "audience: "+flowList(s.Audience))
	switch {
	case s.ToolsFrom != nil && s.ToolsFrom.Command != nil:
		w.line(2, "tools_from: {command: "+flowList(s.ToolsFrom.Command)+"}")
	case s.ToolsFrom != nil:
		w.line(2, "tools_from: {url: "+quote(s.ToolsFrom.URL)+"}")
	default:
		w.line(2, "tools:")
		for _, raw := range s.Tools {
			var c bytes.Buffer
			if err := json.Compact(&c, raw); err != nil {
				return fmt.Errorf("server %s: inline tool: %w", id, err)
			}
			w.line(3, "- "+c.String())
		}
		if len(s.Tools) == 0 {
			w.appendTo(" []")
		}
	}
	if wh := s.Withhold; wh.Resources != nil || wh.Prompts != nil {
		var parts []string
		if wh.Resources != nil {
			parts = append(parts, "resources: "+flowList(wh.Resources))
		}
		if wh.Prompts != nil {
			parts = append(parts, "prompts: "+flowList(wh.Prompts))
		}
		w.line(2, "withhold: {"+strings.Join(parts, ", ")+"}")
	}
	return nil
}

// tool writes the policy entry of one listed tool and returns, for a definition every preflight
// would repair, why.
func (w *writer) tool(eng *gates.Engine, server string, t upstream.Tool) (string, error) {
	w.line(1, yamlKey(server+"/"+t.Name)+":")
	if t.Description != "" {
		w.comment(2, t.Description)
	} else {
		w.comment(2, "(The server gives no description.)")
	}
	if len(t.Annotations) > 0 {
		w.comment(2, "The server's annotations, its own hints (they decide nothing here):")
		for _, a := range annotations(t.Annotations) {
			w.comment(2, "  "+a)
		}
	}
	var why string
	var args []gates.Argument
	if t.Err != nil {
		why = "unusable definition: " + t.Err.Error() + "; every preflight on it ends in " + api.OutcomeDefinitionRepair + ", and it has no digest to pin"
	} else {
		gt := gates.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations}
		g, err := eng.Inspect(gt, nil)
		if err != nil {
			return "", fmt.Errorf("tool %s/%s: %w", server, t.Name, err)
		}
		if g != nil {
			why = "every preflight would end in " + api.OutcomeDefinitionRepair + ": " + g.Kind + ": " + g.Detail
		}
		if args, err = eng.Arguments(gt); err != nil {
			return "", fmt.Errorf("tool %s/%s: %w", server, t.Name, err)
		}
	}
	if why != "" {
		w.comment(2, "As listed, "+why+".")
	}
	w.line(2, "class: "+string(policy.Irreversible)+"   # not classed yet: gated until a person classes it")
	if len(args) == 0 {
		return why, nil
	}
	cascade := make([]string, 0, len(policy.Cascade()))
	for _, s := range policy.Cascade() {
		cascade = append(cascade, string(s))
	}
	w.line(2, "fields:")
	var free []string
	for _, a := range args {
		desc, ok := freeText(a.Schema)
		if a.RequiredLabel {
			// The gate takes user_answer away from it whatever the policy says.
			desc = strings.TrimSpace(desc + " [Required] by the tool: never the user's bare answer.")
		} else if ok {
			free = append(free, a.Name)
		}
		if desc != "" {
			w.comment(3, desc)
		}
		w.line(3, yamlKey(a.Name)+": {allowed_sources: ["+strings.Join(cascade, ", ")+"]}")
	}
	if len(free) > 0 {
		w.comment(2, "Free text: if the model writes it on purpose (a message, a memo, a file's contents), "+
			"draft it, and the user reviews it in full and approves exactly that text. To draft a field, list it "+
			"here and take away its allowed_sources above.")
		names := make([]string, len(free))
		for i, n := range free {
			names[i] = yamlKey(n)
		}
		w.comment(2, "drafted: ["+strings.Join(names, ", ")+"]")
	}
	return why, nil
}

func (w *writer) pins(ids []string, pins map[string][]upstream.Tool) {
	w.line(0, "pins:")
	for _, id := range ids {
		w.line(1, yamlKey(id)+":")
		w.line(2, "all: true")
		w.line(2, "tools:")
		for _, t := range pins[id] {
			w.line(3, yamlKey(t.Name)+": "+quote(t.Digest))
		}
		if len(pins[id]) == 0 {
			w.appendTo(" {}")
		}
	}
	if len(ids) == 0 {
		w.appendTo(" {}")
	}
}

// annotations renders a tool's annotations one per line, "name: value" by name, the values as
// compact JSON; anything other than an object is shown as it is.
func annotations(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return []string{compact(raw)}
	}
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+": "+compact(m[k]))
	}
	return out
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// freeText returns the description an argument's schema gives it, and whether the argument is
// free text: a string with no enum, const, format or pattern, and not bounded to the length of a
// name or an identifier. Such text is what a model may draft; whether it does is a person's
// decision, so it is only ever proposed.
func freeText(schema json.RawMessage) (string, bool) {
	var s struct {
		Type        any             `json:"type"`
		Description string          `json:"description"`
		Enum        json.RawMessage `json:"enum"`
		Const       json.RawMessage `json:"const"`
		Format      json.RawMessage `json:"format"`
		Pattern     json.RawMessage `json:"pattern"`
		MaxLength   *float64        `json:"maxLength"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return "", false
	}
	switch {
	case s.Type != "string", s.Enum != nil, s.Const != nil, s.Format != nil, s.Pattern != nil:
		return s.Description, false
	case s.MaxLength != nil && *s.MaxLength <= shortString:
		return s.Description, false
	}
	return s.Description, true
}

// visibleText escapes every character of s a person would not see as itself — controls,
// format characters (the bidirectional overrides among them), unassigned and private-use code
// points, line and paragraph separators — as \u{…}, and invalid UTF-8 as \x…; the tab is
// kept.
func visibleText(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t' || r == ' ' || (unicode.IsGraphic(r) && !unicode.Is(unicode.Zl, r) && !unicode.Is(unicode.Zp, r) &&
			!unicode.Is(unicode.Co, r)):
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, `\u{%x}`, r)
		}
	}
	return b.String()
}

// wrap breaks s at spaces into lines of at most width bytes where it can; a word longer than
// width stands on a line of its own.
func wrap(s string, width int) []string {
	width = max(width, 20)
	if len(s) <= width {
		return []string{s}
	}
	var out []string
	indent := s[:len(s)-len(strings.TrimLeft(s, " "))]
	cur := ""
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = indent + word
		case len(cur)+1+len(word) > width:
			out = append(out, cur)
			cur = indent + word
		default:
			cur += " " + word
		}
	}
	return append(out, cur)
}

// plainKey is what is written as a bare YAML key: the policy loader refuses keys YAML reads as
// booleans or numbers, and none of these is one unless it is one of yamlWords.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(/[A-Za-z_][A-Za-z0-9_-]*)?$`)

// yamlWords are the keys YAML 1.1 reads as booleans or null.
var yamlWords = []string{"y", "yes", "n", "no", "on", "off", "true", "false", "null"}

// yamlKey writes k as a mapping key: bare when that reads back as the same string, quoted
// otherwise.
func yamlKey(k string) string {
	if plainKey.MatchString(k) && !slices.Contains(yamlWords, strings.ToLower(k)) {
		return k
	}
	return quote(k)
}

// quote writes s as a double-quoted scalar: a JSON string, which YAML reads as the same string.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes (invalid UTF-8 as U+FFFD)
	return strings.TrimSuffix(b.String(), "\n")
}

func flowList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
