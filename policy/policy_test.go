package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"pgregory.net/rapid"
)

func TestLoadExample(t *testing.T) {
	p, err := Load(filepath.Join("testdata", "bank.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != "2026-11-30.1" {
		t.Errorf("version = %q", p.Version)
	}
	tr := p.Tool("bank", "transfer")
	if tr == nil {
		t.Fatal("bank/transfer missing")
	}
	if tr.EffectiveClass() != Irreversible || p.Tool("docs", "lookup").EffectiveClass() != Read {
		t.Errorf("classes wrong")
	}
	if p.Tool("bank", "nope").EffectiveClass() != Irreversible {
		t.Errorf("an unlisted tool must be irreversible")
	}
	if !tr.Field("to_account").Confirm || tr.Field("to_account").Allows(api.SourceMeasuredData) {
		t.Errorf("to_account rule wrong: %+v", tr.Field("to_account"))
	}
	if !tr.Field("amount").Allows(api.SourceUserAnswer) || tr.Field("amount").Allows(api.SourceEvaluation) {
		t.Errorf("an undeclared field allows every value source and only those")
	}
	if got := tr.Measurements["balance"]; got.HTTP == nil || got.Timeout != 2*time.Second || got.HTTP.Pointer != "/balance" {
		t.Errorf("balance measurement = %+v", got)
	}
	if got := tr.Measurements["limit"]; got.MCP == nil || got.MCP.Args["account"] != "{{from_account}}" || got.Err != nil || got.Via() != "mcp" {
		t.Errorf("limit measurement = %+v", got)
	}
	if got := tr.Measurements["balance"].Inputs; strings.Join(got, ",") != "from_account" {
		t.Errorf("balance inputs = %q", got)
	}
	if r := tr.Conditions[0].Reads; strings.Join(r.Args, ",") != "amount" || strings.Join(r.Measured, ",") != "balance" ||
		strings.Join(r.Inputs(), ",") != "amount,balance" {
		t.Errorf("balance condition reads %+v", r)
	}
	if tr.Conditions[0].AST == nil || tr.Conditions[0].CompileErr != nil {
		t.Errorf("balance condition should compile: %v", tr.Conditions[0].CompileErr)
	}
	if tr.Conditions[1].CompileErr == nil {
		t.Errorf("broken condition should carry its compile error")
	}
	if len(p.Servers["docs"].Tools) != 2 {
		t.Errorf("inline tools = %d", len(p.Servers["docs"].Tools))
	}
	// The broken expression and the mis-cased label are issues, not load errors.
	var paths []string
	for _, is := range p.Issues {
		paths = append(paths, is.Path)
	}
	want := []string{
		`servers.docs.tools[1].description`,
		`tools["bank/transfer"].conditions[1].expr`,
	}
	if strings.Join(paths, "|") != strings.Join(want, "|") {
		t.Errorf("issues = %q, want %q", paths, want)
	}
	if it := p.Principal("u_01").UserChecklist; len(it) != 2 || it[1].Kind != "confirm" || it[0].AST == nil {
		t.Errorf("checklist = %+v", it)
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // every problem, in order
	}{
		{
			name: "unknown source names its path",
			doc: `policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [a]}}}
tools:
  bank/transfer:
    fields:
      to_account: {allowed_sources: [user_answer, instruction, foo]}
`,
			want: []string{`tools["bank/transfer"].fields.to_account.allowed_sources[2]: unknown source "foo"`},
		},
		{
			name: "withhold",
			doc: `policy_version: "1"
servers: {bank: {audience: [e], tools_from: {url: "u"}, withhold: {resources: ["a", ""], prompt: ["b"]}}}
`,
			want: []string{`servers.bank.withhold.prompt: unknown key (did you mean "prompts"?)`, `servers.bank.withhold.resources[1]: must not be empty`},
		},
		{
			name: "every problem is collected",
			doc: `servers: {bank: {audience: [], tools_from: {command: [a], url: "u"}, extra: 1}}
tools:
  bank/transfer: {class: destructive, when_cases: [now], measurements: {m: {timeout: soon}}}
  nope: {}
  other/x: {}
principals: {u: {user_checklist: [{description: d, expr: "true"}]}}
`,
			want: []string{
				`policy_version: required`,
				`servers.bank.extra: unknown key`,
				`servers.bank.audience: must name at least one executor`,
				`servers.bank.tools_from: exactly one of command and url is required`,
				`tools["bank/transfer"].class: unknown class "destructive" (want irreversible, reversible or read)`,
				`tools["bank/transfer"].when_cases[0]: unknown when_case "now"`,
				`tools["bank/transfer"].measurements.m: exactly one of http and mcp is required`,
				`tools["bank/transfer"].measurements.m.timeout: invalid duration "soon"`,
				`tools.nope: tool key must be "server/tool"`,
				`tools["other/x"]: unknown server "other"`,
				`principals.u.user_checklist[0].id: required`,
			},
		},
		{
			name: "a drafted field has no other source",
			doc: `policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [a]}}}
tools:
  bank/transfer:
    fields:
      memo: {allowed_sources: [instruction], confirm: true}
    measurements: {memo: {http: {url: "http://m"}}}
    pending_at_trigger: [memo]
    drafted: [memo, memo, ""]
`,
			want: []string{
				`tools["bank/transfer"].drafted[2]: must not be empty`,
				`tools["bank/transfer"].fields.memo.allowed_sources: a drafted field is settled only by the user's review of the draft`,
				`tools["bank/transfer"].fields.memo.confirm: a drafted field is already approved by its review`,
				`tools["bank/transfer"].measurements.memo: a drafted field is never measured`,
				`tools["bank/transfer"].drafted[0]: a drafted field cannot be pending_at_trigger`,
				`tools["bank/transfer"].drafted[1]: duplicate drafted field "memo"`,
			},
		},
		{
			name: "only a drafted field's review allows hidden characters",
			doc: `policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [a]}}}
tools:
  bank/transfer:
    fields:
      memo: {allow_hidden_characters: true}
      note: {allow_hidden_characters: "sure"}
      to_account: {allow_hidden_characters: true}
    drafted: [memo]
`,
			want: []string{
				`tools["bank/transfer"].fields.note.allow_hidden_characters: want a boolean`,
				`tools["bank/transfer"].fields.to_account.allow_hidden_characters: names nothing: only a drafted field's review is refused for characters a person does not see`,
			},
		},
		{
			name: "drafted is a non-empty list",
			doc: `policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [a]}}}
tools:
  bank/transfer: {drafted: []}
  bank/other: {drafted: memo}
`,
			want: []string{
				`tools["bank/other"].drafted: want a list`,
				`tools["bank/transfer"].drafted: must not be empty`,
			},
		},
		{
			name: "wrong types",
			doc: `policy_version: 3
servers: []
`,
			want: []string{`policy_version: want a string, got number`, `servers: want a mapping, got list`},
		},
		{
			name: "yaml syntax",
			doc:  "policy_version: [\n",
			want: []string{"did not find expected node content"},
		},
		{
			// YAML 1.1 reads these keys as numbers and booleans; converted to JSON they would
			// silently name another principal, server or field.
			name: "keys that do not read as text",
			doc: `policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [a]}}, 0x1F: {audience: [x], tools_from: {command: [a]}}}
tools:
  bank/transfer:
    fields: {on: {allowed_sources: [pre_set_data]}, 1e3: {confirm: true}}
principals:
  007: {user_checklist: [{id: limit, expr: "args.amount <= 100"}]}
  "008": {}
`,
			want: []string{
				`principals["7"]: key reads as int 7, not as text: quote it`,
				`servers["31"]: key reads as int 31, not as text: quote it`,
				`tools["bank/transfer"].fields.true: key reads as bool true, not as text: quote it`,
				`tools["bank/transfer"].fields["1000"]: key reads as float64 1000, not as text: quote it`,
			},
		},
		{
			// A server id is one part of "server/tool", of action keys and of the gateway's
			// "<server>.<tool>": with a separator in it, a/b's tool c and a's tool b/c would
			// share the key a/b/c, and the class meant for one would apply to the other.
			name: "server ids with separators",
			doc: `policy_version: v1
servers:
  a: {audience: [x], tools_from: {command: [a]}}
  a/b: {audience: [x], tools_from: {command: [a]}}
  c.d: {audience: [x], tools_from: {command: [a]}}
  "e:f": {audience: [x], tools_from: {command: [a]}}
  "g h": {audience: [x], tools_from: {command: [a]}}
tools:
  a/b/c: {class: read}
`,
			want: []string{
				`servers["a/b"]: a server id is letters, digits, '_' and '-' only (at most 128): it is one part of tool keys, action keys and the gateway's <server>.<tool> names`,
				`servers["c.d"]: a server id is letters, digits, '_' and '-' only (at most 128): it is one part of tool keys, action keys and the gateway's <server>.<tool> names`,
				`servers["e:f"]: a server id is letters, digits, '_' and '-' only (at most 128): it is one part of tool keys, action keys and the gateway's <server>.<tool> names`,
				`servers["g h"]: a server id is letters, digits, '_' and '-' only (at most 128): it is one part of tool keys, action keys and the gateway's <server>.<tool> names`,
			},
		},
		{
			// Every expression may be compiled on a reload and evaluated on every preflight:
			// over-long ones and over-long lists are refused, never truncated.
			name: "expression bounds",
			doc: `policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [a]}}}
tools:
  bank/transfer:
    conditions: [` + listOf(MaxConditions, `{id: c%d, expr: "true"}, `) + `{id: big, expr: "` + strings.Repeat("1 < 2 && ", MaxExprBytes/9) + `true"}]
principals:
  u:
    user_checklist: [` + listOf(MaxChecklistItems, `{id: i%d, expr: "true"}, `) + `{id: big, expr: "` + strings.Repeat("x", MaxExprBytes+1) + `"}]
`,
			want: []string{
				`tools["bank/transfer"].conditions: 65 conditions, at most 64`,
				`tools["bank/transfer"].conditions[64].expr: 4099 bytes, at most 4096`,
				`principals.u.user_checklist: 65 items, at most 64`,
				`principals.u.user_checklist[64].expr: 4097 bytes, at most 4096`,
			},
		},
		{
			name: "duplicate keys",
			doc:  "policy_version: a\npolicy_version: b\n",
			want: []string{"policy_version: key already set at line 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if len(pe.Problems) != len(tt.want) {
				t.Fatalf("problems:\n%s\nwant %d", err, len(tt.want))
			}
			for i, w := range tt.want {
				if got := pe.Problems[i].String(); !strings.HasPrefix(got, w) {
					t.Errorf("problem %d = %q, want %q", i, got, w)
				}
			}
		})
	}
}

// listOf repeats format n times, each with its index.
func listOf(n int, format string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

// TestProblemsArePlaced: every problem of a policy file is reported at its file:line:col (a
// missing key at the nearest key that is there), an unknown key close to an allowed one says
// which, and a syntax error names its line without a doubled "yaml:" prefix.
func TestProblemsArePlaced(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // the error's problem lines, after "<file>:"
	}{
		{"placed", `policy_version: v1
servers:
  bank: {audience: [x], tools_from: {command: [a]}}
tools:
  bank/transfer:
    clas: irreversible
    fields:
      to_account: {allowed_sources: [user_answer, foo], confrim: true}
    measurements:
      m: {http: {pointer: /b}}
`, []string{
			`6:5: tools["bank/transfer"].clas: unknown key (did you mean "class"?)`,
			`8:57: tools["bank/transfer"].fields.to_account.confrim: unknown key (did you mean "confirm"?)`,
			`8:51: tools["bank/transfer"].fields.to_account.allowed_sources[1]: unknown source "foo"`,
			`10:11: tools["bank/transfer"].measurements.m.http.url: required`,
		}},
		{"duplicate", "policy_version: v1\nservers: {}\npolicy_version: v2\n", []string{
			`3:1: policy_version: key already set at line 1`}},
		{"pointer", `policy_version: v1
servers:
  bank: {audience: [x], tools_from: {command: [a]}}
tools:
  bank/transfer:
    class: irreversible
    measurements:
      m: {http: {url: "http://127.0.0.1/x", pointer: /a~2b}}
`, []string{
			`8:45: tools["bank/transfer"].measurements.m.http.pointer: JSON pointer "/a~2b" holds a "~" that is not "~0" or "~1"`,
		}},
		{"syntax", "policy_version: v1\nservers:\n\tbank: {}\n", []string{`3: found character that cannot start any token`}},
		{"top level", "servers: {}\n", []string{` policy_version: required`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *Error", err)
			}
			lines := strings.Split(err.Error(), "\n  ")[1:]
			var want []string
			for _, w := range tt.want {
				want = append(want, path+":"+w)
			}
			if strings.Join(lines, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseLabels(t *testing.T) {
	tests := []struct {
		desc     string
		required []string
		verify   []VerifyLabel
		notices  []string
		advisory string
		bad      bool
	}{
		{desc: "", advisory: ""},
		{desc: "Transfers money.\nUse carefully.", advisory: "Transfers money.\nUse carefully."},
		{
			desc:     "Transfers money.\n[Required] to_account\n[Verify] confirm_recipient: the recipient is right\n[Notice] Transfers are final.\r\n[Note] just prose",
			required: []string{"to_account"},
			verify:   []VerifyLabel{{ID: "confirm_recipient", Text: "the recipient is right"}},
			notices:  []string{"Transfers are final."},
			advisory: "Transfers money.\n[Note] just prose",
		},
		{desc: "  [Notice]   indented ok  ", notices: []string{"indented ok"}},
		{desc: "[required] to_account", bad: true},
		{desc: "[Required]", bad: true},
		{desc: "[Required] two words", bad: true},
		{desc: "[Required]to_account", bad: true},
		{desc: "[Verify] no colon here", bad: true},
		{desc: "[Verify] id:", bad: true},
		{desc: "[Verify] a: x\n[Verify] a: y", bad: true},
		{desc: "[Notice]", bad: true},
		{desc: "[ NOTICE ] shouting", bad: true},
	}
	for _, tt := range tests {
		ls, err := ParseLabels(tt.desc)
		if tt.bad {
			var le *LabelError
			if !errors.As(err, &le) {
				t.Errorf("ParseLabels(%q) err = %v, want *LabelError", tt.desc, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLabels(%q): %v", tt.desc, err)
			continue
		}
		if strings.Join(ls.Required, ",") != strings.Join(tt.required, ",") ||
			len(ls.Verify) != len(tt.verify) || strings.Join(ls.Notices, ",") != strings.Join(tt.notices, ",") ||
			ls.Advisory != tt.advisory {
			t.Errorf("ParseLabels(%q) = %+v", tt.desc, ls)
		}
		for i := range tt.verify {
			if ls.Verify[i] != tt.verify[i] {
				t.Errorf("verify[%d] = %+v", i, ls.Verify[i])
			}
		}
	}
}

func FuzzParseLabels(f *testing.F) {
	f.Add("[Required] a\n[Verify] x: y\n[Notice] z\nprose")
	f.Add("[required]")
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := ParseLabels(s)
		if err != nil {
			return
		}
		for _, r := range ls.Required {
			if !fieldRE.MatchString(r) {
				t.Fatalf("bad required %q", r)
			}
		}
	})
}

// FuzzParse: whatever loads has a version, and round-trips: written back in the policy language
// (policyDocument) and parsed again, it loads as the same policy.
func FuzzParse(f *testing.F) {
	for _, file := range policyFiles(f) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("policy_version: x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err == nil && p.Version == "" {
			t.Fatal("loaded a policy without a version")
		}
		checkRoundTrip(t, b)
	})
}

// A measurement calls its tool without a verdict: only a tool the policy classifies read, on a
// declared server, may be one. Anything else is marked, listed, and never run.
func TestMeasurementToolMustBeRead(t *testing.T) {
	p, err := Parse([]byte(`
policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [b]}}}
tools:
  bank/transfer:
    measurements:
      ok: {mcp: {server: bank, tool: get_balance, args: {account: "{{from}}", "n": 1}}}
      unclassified: {mcp: {server: bank, tool: peek}}
      irreversible: {mcp: {server: bank, tool: transfer}}
      elsewhere: {mcp: {server: other, tool: get_balance}}
  bank/get_balance: {class: read}
`))
	if err != nil {
		t.Fatal(err)
	}
	ms := p.Tool("bank", "transfer").Measurements
	if ms["ok"].Err != nil || strings.Join(ms["ok"].Inputs, ",") != "from" {
		t.Errorf("ok = %+v", ms["ok"])
	}
	for _, n := range []string{"unclassified", "irreversible", "elsewhere"} {
		if ms[n].Err == nil {
			t.Errorf("%s may run", n)
		}
	}
	if len(p.Issues) != 3 {
		t.Errorf("issues = %v", p.Issues)
	}
}

func TestExprReads(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		expr                  string
		args, measured, tests string
		bad                   bool
	}{
		{expr: "measured.balance >= args.amount", args: "amount", measured: "balance"},
		{expr: `args["amount"] < 10 && has(args.memo) && args.to.startsWith("1")`, args: "amount,to", tests: "args.memo"},
		{expr: "now > timestamp('2020-01-01T00:00:00Z') && principal == 'u'"},
		{expr: "[1, 2].all(x, x < args.n)", args: "n"},
		{expr: "size(args) > 0", bad: true},
		{expr: "'x' in args", bad: true},
		{expr: "args[principal] == 1", bad: true},
		{expr: "[1].exists(args, args > 0)", bad: true},
		{expr: "args.amount + 1", bad: true},
		{expr: "args.amount <", bad: true},
	}
	for _, tt := range tests {
		_, r, err := c.Compile(tt.expr)
		if (err != nil) != tt.bad {
			t.Errorf("%s: err %v", tt.expr, err)
			continue
		}
		if tt.bad {
			continue
		}
		if strings.Join(r.Args, ",") != tt.args || strings.Join(r.Measured, ",") != tt.measured || strings.Join(r.Tested, ",") != tt.tests {
			t.Errorf("%s: reads %+v", tt.expr, r)
		}
	}
}

// An expression's text and nesting are bounded before the type check, whose cost grows far
// faster than either.
func TestCompileBounds(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	nested := func(depth int) string {
		return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + " != []"
	}
	atSize := strings.Repeat("1 < 2 && ", (MaxExprBytes-4)/9)
	atSize += strings.Repeat(" ", MaxExprBytes-4-len(atSize)) + "true"
	tests := []struct {
		name  string
		expr  string
		ok    bool
		large bool
	}{
		{"at the size bound", atSize, true, false},
		{"one byte over", atSize + " ", false, true},
		{"nested within the depth bound", nested(MaxExprDepth - 2), true, false},
		{"nested past the depth bound", nested(MaxExprDepth), false, false},
		{"nested 200 deep", nested(200), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := c.Compile(tt.expr)
			if (err == nil) != tt.ok || errors.Is(err, ErrExprTooLarge) != tt.large {
				t.Fatalf("len %d: err %v", len(tt.expr), err)
			}
		})
	}
}

// A compile error quotes the first problem and counts the rest: quoting them all repeats the
// source once per problem.
func TestCompileErrorShowsTheFirst(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	expr := "[[1]] != null" + strings.Repeat(" || [[1]] != null", 99)
	_, _, err = c.Compile(expr)
	if err == nil {
		t.Fatal("compiled")
	}
	msg := err.Error()
	if !strings.Contains(msg, "found no matching overload for '_!=_'") || !strings.HasSuffix(msg, "(99 more not shown)") ||
		strings.Count(msg, "no matching overload") != 1 {
		t.Fatalf("error %q", msg)
	}
}

// Whatever compiles has its reads listed or is refused; nothing panics, and a listed read is
// never both required and only tested.
func FuzzCompile(f *testing.F) {
	f.Add("measured.balance >= args.amount")
	f.Add(`has(args.memo) && args["to"].startsWith("1")`)
	f.Add("[1, 2].exists(x, x == args.n) || {'a': args.b}.a == 1")
	f.Add("size(args) > 0")
	c, err := NewCompiler()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		ast, r, err := c.Compile(expr)
		if err != nil {
			return
		}
		if ast == nil {
			t.Fatal("no AST without an error")
		}
		again, err := ExprReads(ast)
		if err != nil || strings.Join(again.Inputs(), ",") != strings.Join(r.Inputs(), ",") {
			t.Fatalf("reads not reproducible: %v", err)
		}
	})
}

// TestRecurrence: a recurrence bounds recurring intents by count and/or interval; recurring is
// an allowed timing only with one; every mistake is placed in the file.
func TestRecurrence(t *testing.T) {
	const head = "policy_version: v1\nservers:\n  bank: {audience: [x], tools_from: {command: [a]}}\ntools:\n  bank/transfer:\n"
	tests := []struct {
		name, tool string
		want       []string // problems after "<file>:"; nil = loads
		rec        *Recurrence
		allowed    []string
	}{
		{"none", "    class: irreversible\n", nil, nil, []string{"immediate", "scheduled", "conditional"}},
		{"count and interval", "    recurrence: {count: 12, interval: 720h}\n", nil,
			&Recurrence{Count: 12, Interval: 720 * time.Hour}, WhenCases()},
		{"interval only", "    recurrence: {interval: 24h}\n    when_cases: [recurring]\n", nil,
			&Recurrence{Interval: 24 * time.Hour}, []string{"recurring"}},
		{"recurring without one", "    when_cases: [immediate, recurring]\n",
			[]string{`6:29: tools["bank/transfer"].when_cases[1]: recurring needs a recurrence (count and/or interval) to bound it`}, nil, nil},
		{"one naming nothing", "    when_cases: [scheduled]\n    recurrence: {count: 2}\n",
			[]string{`7:5: tools["bank/transfer"].recurrence: names nothing: when_cases does not allow recurring`}, nil, nil},
		{"bad values", "    recurrence: {count: 0, interval: 10ms, every: 1}\n", []string{
			`6:44: tools["bank/transfer"].recurrence.every: unknown key`,
			`6:18: tools["bank/transfer"].recurrence.count: 0: want an integer from 1 to 1000000`,
			`6:28: tools["bank/transfer"].recurrence.interval: 10ms: want at least 1s`,
		}, nil, nil},
		{"empty", "    recurrence: {}\n", []string{`6:5: tools["bank/transfer"].recurrence: needs count, interval or both`}, nil, nil},
		{"not a number", "    recurrence: {count: many}\n", []string{`6:18: tools["bank/transfer"].recurrence.count: want an integer, got string`}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadOrProblems(t, head+tt.tool, tt.want)
			if p == nil {
				return
			}
			tool := p.Tool("bank", "transfer")
			if !reflect.DeepEqual(tool.Recurrence, tt.rec) {
				t.Fatalf("recurrence %+v, want %+v", tool.Recurrence, tt.rec)
			}
			if got := AllowedWhenCases(tool); !reflect.DeepEqual(got, tt.allowed) {
				t.Fatalf("allowed %v, want %v", got, tt.allowed)
			}
		})
	}
	if got := AllowedWhenCases(nil); slices.Contains(got, Recurring) {
		t.Fatalf("a tool the policy does not name allows recurring: %v", got)
	}
}

// loadOrProblems writes doc to a policy file and loads it. With want set, the load must fail
// with exactly those problems, each "line:col: message" at the file, and it returns nil;
// without, it must succeed.
func loadOrProblems(t *testing.T, doc string, want []string) *Policy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if want == nil {
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *Error", err)
	}
	got := strings.Split(err.Error(), "\n  ")[1:]
	at := make([]string, len(want))
	for i, w := range want {
		at[i] = path + ":" + w
	}
	if strings.Join(got, "\n") != strings.Join(at, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(at, "\n"))
	}
	return nil
}

// TestWithhold: '*' is any run of characters, '/' included; everything else is itself.
func TestWithhold(t *testing.T) {
	w := Withhold{Resources: []string{"file:///private/*", "docs://*/notes", "exact://a"}, Prompts: []string{"admin_*", "*"}}
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"file:///private/a/b.txt", true},
		{"file:///private/", true},
		{"file:///privateer", false},
		{"docs://x/y/notes", true},
		{"docs://notes", false},
		{"docs://x/notes/more", false},
		{"exact://a", true},
		{"exact://ab", false},
		{"", false},
	} {
		if got := w.Resource(tc.uri); got != tc.want {
			t.Errorf("Resource(%q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
	if !w.Prompt("anything") || (Withhold{}).Prompt("x") || (Withhold{Prompts: []string{"admin_*"}}).Prompt("user_x") {
		t.Error("prompt patterns")
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if !wildcard("*", s) || !wildcard(s+"*", s) || !wildcard("*"+s, s) {
			t.Fatalf("%q does not match its own wildcards", s)
		}
		if strings.Contains(s, "*") {
			return
		}
		if !wildcard(s, s) || wildcard(s, s+"x") {
			t.Fatalf("%q as a literal pattern", s)
		}
	})
}
