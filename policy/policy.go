// Package policy loads and validates the verdictd policy file: the policy version every decision
// record carries, the servers and their audiences, the per-tool classification, approver phrases,
// field source rules, measurements and conditions, and the per-principal user checklists.
//
// Loading is strict: unknown keys, wrong types and bad values are errors, and every error names
// the path of the offending value. All problems are collected, not only the first, so an operator
// sees the whole list at once. Problems with tool definitions or expressions never stop a load;
// they are reported as [Issue]s and turn the affected preflights into definition-repair cases.
// Sizes are another matter: an expression longer than [MaxExprBytes], or more conditions or
// checklist items than [MaxConditions] and [MaxChecklistItems], is refused like any bad value.
package policy

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/verdictgate/verdict/api"

	"github.com/google/cel-go/cel"
)

// Class is a tool's effect classification. Only irreversible tools are gated.
type Class string

// The tool classes. A tool without a class is irreversible.
const (
	Irreversible Class = "irreversible"
	Reversible   Class = "reversible"
	Read         Class = "read"
)

// Cascade is the search order of value sources. It is also the default allowed set of a field
// the policy says nothing about.
var cascade = [...]api.Source{api.SourceUserAnswer, api.SourceInstruction, api.SourcePreSetData, api.SourceMeasuredData, api.SourcePriorState}

// Cascade returns the value sources in search order.
func Cascade() []api.Source { s := cascade; return s[:] }

// WhenCases are the four values of the fixed checklist's timing item C1, in canonical order.
var whenCases = [...]string{"immediate", "scheduled", "conditional", "recurring"}

// WhenCases returns the four C1 values.
func WhenCases() []string { s := whenCases; return s[:] }

// Recurring is the C1 value of an intent that runs more than once.
const Recurring = "recurring"

// AllowedWhenCases returns the C1 values t accepts: its when_cases, or else all four but
// recurring when t has no recurrence. A recurring intent runs again and again on one
// instruction, so it needs the policy to bound it; a tool without a recurrence (or with no
// policy entry at all) refuses the timing at instruction time, where the user can still be
// asked again. The loader refuses when_cases naming recurring without a recurrence.
func AllowedWhenCases(t *Tool) []string {
	if t != nil && t.WhenCases != nil {
		return t.WhenCases
	}
	s := whenCases
	if t != nil && t.Recurrence != nil {
		return s[:]
	}
	return s[:3]
}

// Recurrence bounds a recurring intent of a tool: at most Count verdicts per deferred record
// (0: the count is not bounded) and at least Interval between two of them (0: none). The
// loader requires at least one of the two.
type Recurrence struct {
	Count    int
	Interval time.Duration
}

// MaxRecurrenceCount bounds recurrence.count.
const MaxRecurrenceCount = 1_000_000

// Policy is a loaded, validated policy file.
type Policy struct {
	Version    string
	Servers    map[string]*Server
	Tools      map[string]*Tool // keyed "server/tool"
	Principals map[string]*Principal
	// Pins hold servers' tools to reviewed definitions, by server id (see CheckPin).
	Pins map[string]*Pin

	// Issues are definition problems that do not stop the load (a condition that does not
	// compile, an inline tool with a malformed label). check-policy reports them.
	Issues []Issue
}

// Tool returns the policy entry of server/tool, or nil when the policy has none.
func (p *Policy) Tool(server, tool string) *Tool {
	if p == nil {
		return nil
	}
	return p.Tools[server+"/"+tool]
}

// Principal returns the policy entry of a principal, or nil.
func (p *Policy) Principal(id string) *Principal {
	if p == nil {
		return nil
	}
	return p.Principals[id]
}

// Server is one upstream MCP server.
type Server struct {
	Audience  []string
	ToolsFrom *ToolsFrom
	// Tools is the inline tool list (MCP Tool JSON objects), used instead of ToolsFrom.
	Tools []json.RawMessage
	// Withhold keeps resources and prompts of the server from the gateway's hosts.
	Withhold Withhold
}

// Withhold names, by pattern, the resources and prompts of a server the
// gateway does not pass on to its hosts. In a pattern '*' stands for any
// run of characters, '/' included; every other character stands for
// itself. "*" withholds them all.
type Withhold struct {
	// Resources match resource URIs and resource templates' URI templates;
	// a URI a pattern matches is not read, whichever template it fits.
	Resources []string
	// Prompts match prompt names as the server gives them.
	Prompts []string
}

// Resource reports whether uri (a URI, or a template's URI template) is withheld.
func (w Withhold) Resource(uri string) bool { return matchAny(w.Resources, uri) }

// Prompt reports whether the prompt named name is withheld.
func (w Withhold) Prompt(name string) bool { return matchAny(w.Prompts, name) }

func matchAny(patterns []string, s string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return wildcard(p, s) })
}

// wildcard reports whether s matches pattern, in which '*' stands for any
// run of characters and every other character for itself.
func wildcard(pattern, s string) bool {
	prefix, rest, star := strings.Cut(pattern, "*")
	if !star {
		return s == pattern
	}
	if !strings.HasPrefix(s, prefix) {
		return false
	}
	s = s[len(prefix):]
	for i := 0; i <= len(s); i++ {
		if wildcard(rest, s[i:]) {
			return true
		}
	}
	return false
}

// ToolsFrom says where to list a server's tools: a stdio command or a streamable HTTP URL.
type ToolsFrom struct {
	Command []string
	URL     string
}

// Tool is the policy entry of one tool.
type Tool struct {
	Key   string // "server/tool"
	Class Class
	// Actions are the C3 approver phrases, stored as written; compare them after normalization.
	Actions  []string
	Approver *Approver
	// WhenCases are the C1 values this tool accepts; nil means all four.
	WhenCases        []string
	Fields           map[string]*Field
	Measurements     map[string]*Measurement
	Conditions       []*Condition
	PendingAtTrigger []string
	Notices          []string
	// Recurrence bounds recurring intents; nil means the tool accepts none.
	Recurrence *Recurrence
	// Drafted are the arguments whose value is content the model drafts on purpose (a message
	// body, a memo): settled only by the user's approval of exactly the proposed draft
	// (reviewed_draft), never grounded from another source, and never grounding another field.
	Drafted []string
	// Approval says where the call's approvals may be given and by whom; nil means the
	// default, the host only (see ApprovalRule).
	Approval *ApprovalRule
	// Relay says how the MCP gateway relays the questions a read or reversible tool's server
	// asks the user during a call; nil means the default (see RelayRule).
	Relay *RelayRule
}

// RelayRule is a pass-through tool's rule for the questions its server asks the user during
// a call, which the MCP gateway relays. By default a question that asks for a secret (a PIN,
// a password, a one-time code, ...) is refused and the user never sees it: the gateway is not
// the server, and an untrusted read-only server should have no way to collect credentials
// through it. AllowSecrets lets such questions through for a tool the operator trusts with
// them. The loader accepts a rule only on read and reversible tools: a gated tool's server
// never asks the user.
type RelayRule struct {
	AllowSecrets bool
}

// String describes the rule on one line, as check-policy prints it.
func (r RelayRule) String() string {
	if r.AllowSecrets {
		return "questions asking for secrets are relayed"
	}
	return "questions asking for secrets are refused (the default)"
}

// AllowsSecretQuestions reports whether the gateway may relay a question of the tool's server
// that asks for a secret.
func (t *Tool) AllowsSecretQuestions() bool {
	return t != nil && t.Relay != nil && t.Relay.AllowSecrets
}

// IsDrafted reports whether the policy marks the tool's argument name as drafted.
func (t *Tool) IsDrafted(name string) bool { return t != nil && slices.Contains(t.Drafted, name) }

// EffectiveClass is the class with the default applied: a tool without one is irreversible.
func (t *Tool) EffectiveClass() Class {
	if t == nil || t.Class == "" {
		return Irreversible
	}
	return t.Class
}

// Field returns the field rule for name, or nil.
func (t *Tool) Field(name string) *Field {
	if t == nil {
		return nil
	}
	return t.Fields[name]
}

// Approver configures a C3 webhook approver.
type Approver struct {
	Webhook string
}

// Field is the per-argument rule of a tool.
type Field struct {
	// AllowedSources restricts the cascade; nil means every value source.
	AllowedSources []api.Source
	// Confirm adds an approval slot "confirm:<field>" bound to the field's current value.
	Confirm bool
	// Question is how the user is asked for the value ("Which account should the money go
	// to?"); empty means it is phrased from the argument's title or description.
	Question string
	// AllowHiddenCharacters lets a drafted field's draft be reviewed although it holds
	// characters a person does not see (visible.Concealed): they are shown marked. Without
	// it such a draft is refused, draft_hidden_characters.
	AllowHiddenCharacters bool
}

// Allows reports whether the field may be settled from s. A nil field allows every value source.
func (f *Field) Allows(s api.Source) bool {
	if f == nil || f.AllowedSources == nil {
		return s != api.SourceEvaluation
	}
	return slices.Contains(f.AllowedSources, s)
}

// Measurement is a live lookup verdictd performs itself.
type Measurement struct {
	Name    string
	HTTP    *HTTPMeasurement
	MCP     *MCPMeasurement
	Timeout time.Duration
	// Inputs are the names its templates read ({{name}}), sorted: argument values or other
	// measurements, which must be known before it can run.
	Inputs []string
	// Err is set when the measurement can never run as declared (an MCP tool on an unknown
	// server, or one the policy does not classify read). Preflights treat it as a failed
	// lookup; check-policy lists it.
	Err error
}

// Via names the kind of lookup: "http" or "mcp".
func (m *Measurement) Via() string {
	switch {
	case m.HTTP != nil:
		return "http"
	case m.MCP != nil:
		return "mcp"
	}
	return ""
}

// HTTPMeasurement is a GET whose URL template is filled from known values.
type HTTPMeasurement struct {
	URL     string
	Pointer string
}

// MCPMeasurement calls a read-only tool on a configured server.
type MCPMeasurement struct {
	Server  string
	Tool    string
	Args    map[string]any
	Pointer string
}

// Bounds of a policy's expression lists; expression texts are bounded by [MaxExprBytes]. Every
// condition and checklist item may be evaluated on every preflight of its tool or principal.
const (
	MaxConditions     = 64 // per tool
	MaxChecklistItems = 64 // per principal
)

// Condition is a provider condition evaluated over the settled arguments and measurements.
type Condition struct {
	ID          string
	Expr        string
	Description string
	// AST is the checked expression, nil when it did not compile (then CompileErr is set).
	AST        *cel.Ast
	Reads      Reads
	CompileErr error
}

// Principal is the per-principal policy.
type Principal struct {
	UserChecklist []*ChecklistItem
}

// ChecklistItem is one user-checklist item.
type ChecklistItem struct {
	ID          string
	Description string
	Kind        string // "expr" (default when Expr is set) or "confirm"
	Expr        string
	AST         *cel.Ast
	Reads       Reads
	CompileErr  error
}
