package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/upstream"
)

func mustPolicy(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustRequest(t testing.TB, body string) *api.Request {
	t.Helper()
	r, err := DecodeRequest([]byte(body), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type approverFunc func(context.Context, ApprovalRequest) (Approval, error)

func (f approverFunc) Approve(ctx context.Context, r ApprovalRequest) (Approval, error) {
	return f(ctx, r)
}

// A webhook approver passes C3 only with an explicit approval; an error is never one.
func TestWebhookApprover(t *testing.T) {
	pol := mustPolicy(t, `
policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [b]}}}
tools:
  bank/transfer: {actions: ["send money"], approver: {webhook: "https://approver.example/c3"}}
`)
	tool := Tool{Name: "transfer", InputSchema: json.RawMessage(`{"type":"object"}`)}
	body := `{"principal":"u","server":"bank","tool":"transfer","new_request":true,
		"instruction":[{"text":"move my savings","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,15]}}}`
	tests := []struct {
		name     string
		webhook  Approver
		approved bool
		by       string
	}{
		{"none configured", nil, false, ""},
		{"error", approverFunc(func(context.Context, ApprovalRequest) (Approval, error) {
			return Approval{Approved: true}, errors.New("timeout")
		}), false, ""},
		{"silence", approverFunc(func(context.Context, ApprovalRequest) (Approval, error) { return Approval{}, nil }), false, ""},
		{"approved", approverFunc(func(_ context.Context, r ApprovalRequest) (Approval, error) {
			return Approval{Approved: r.Normalized == "move my savings", Reason: "ok"}, nil
		}), true, "webhook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng, err := New(Config{State: NewMemState(), Webhook: tt.webhook})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := eng.Run(context.Background(), Input{Tool: tool, Policy: pol, Request: mustRequest(t, body)})
			if err != nil {
				t.Fatal(err)
			}
			m := rec.Fixed.C3Match
			if m.Approved != tt.approved || m.By != tt.by {
				t.Fatalf("c3_match = %+v", m)
			}
			if !tt.approved && (rec.Gate.Kind != api.GateToolUndetermined || strings.Contains(rec.Gate.UserMessage, "transfer")) {
				t.Fatalf("gate = %+v", rec.Gate)
			}
		})
	}
}

type measurerFunc func(context.Context, *policy.Measurement, map[string]any) (any, error)

func (f measurerFunc) Measure(ctx context.Context, m *policy.Measurement, in map[string]any) (any, error) {
	return f(ctx, m, in)
}

// A failed measurement is a definition gap, never a question; one waiting on an unknown input
// is not run.
func TestMeasuredSlots(t *testing.T) {
	pol := mustPolicy(t, `
policy_version: v1
servers: {bank: {audience: [x], tools_from: {command: [b]}}}
tools:
  bank/pay:
    actions: ["pay"]
    fields: {fee: {allowed_sources: [measured_data]}}
    measurements: {fee: {http: {url: "http://127.0.0.1:9/fee?to={{to}}"}}}
`)
	tool := Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"fee":{"type":"integer"}},"required":["to","fee"]}`)}
	located := `{"principal":"u","server":"bank","tool":"pay","instruction":[{"text":"pay bob","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,3]}},
		"candidates":[{"field":"to","segment":0,"span":[4,7],"value":"bob"}]}`
	unlocated := `{"principal":"u","server":"bank","tool":"pay","instruction":[{"text":"pay bob","trust":"user"}],
		"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,3]}}}`
	tests := []struct {
		name    string
		body    string
		measure func(map[string]any) (any, error)
		outcome string
		route   any
		calls   int
	}{
		{"measured", located, func(in map[string]any) (any, error) {
			if in["to"] != "bob" {
				return nil, errors.New("wrong input")
			}
			return json.Number("3"), nil
		}, api.OutcomeVerdictIssued, nil, 1},
		{"failed", located, func(map[string]any) (any, error) { return nil, errors.New("connection refused") },
			api.OutcomeDefinitionRepair, api.RouteDefinitionRepair, 1},
		{"waiting", unlocated, func(map[string]any) (any, error) { return json.Number("3"), nil },
			api.OutcomeSystemLookup, api.RouteSystemLookup, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			eng, _ := New(Config{State: NewMemState(), Measurer: measurerFunc(func(_ context.Context, m *policy.Measurement, in map[string]any) (any, error) {
				calls++
				return tt.measure(in)
			})})
			rec, err := eng.Run(context.Background(), Input{Tool: tool, Policy: pol, Request: mustRequest(t, tt.body)})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Outcome != tt.outcome || calls != tt.calls {
				t.Fatalf("outcome %s after %d calls", rec.Outcome, calls)
			}
			for _, s := range rec.Slots {
				if s.SlotID != "fee" {
					continue
				}
				if (tt.route == nil) != (s.Route == nil) || (s.Route != nil && *s.Route != tt.route) {
					t.Fatalf("fee slot = %+v", s)
				}
				if tt.name == "failed" && (!s.LookupFailed || len(rec.MeasurementErrs) != 1) {
					t.Fatalf("lookup failure not recorded: %+v", rec.MeasurementErrs)
				}
			}
			// The value only the system can give is never asked; the argument it waits on is.
			var asked []string
			for _, q := range rec.Questions {
				asked = append(asked, q.SlotID)
			}
			if want := map[string]string{"waiting": "to"}[tt.name]; strings.Join(asked, ",") != want {
				t.Fatalf("asked %q, want %q", asked, want)
			}
		})
	}
}

func TestInspect(t *testing.T) {
	eng, _ := New(Config{State: NewMemState()})
	tests := []struct {
		tool Tool
		want string
	}{
		{Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object","required":["x"]}`)}, ""},
		{Tool{Name: "a"}, "schema_unsupported: inputSchema missing"},
		{Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object","allOf":[{"required":["x"]}]}`)}, "schema_unsupported: unsupported keyword on a required path: allOf"},
		{Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string","pattern":"(?<=a)b"}}}`)}, "schema_unsupported: inputSchema does not compile"},
		{Tool{Name: "a", InputSchema: json.RawMessage(`{"$schema":"https://example.com/my-meta","type":"object"}`)}, "schema_unsupported: inputSchema does not compile"},
		// A "~" that is not "~0" or "~1" makes no pointer (RFC 6901), whatever it would name.
		{Tool{Name: "a", InputSchema: json.RawMessage(`{"$defs":{"a~2":{"type":"object","required":["x"]}},"$ref":"#/$defs/a~2"}`)}, "schema_unsupported: "},
		{Tool{Name: "a", Description: "[Verify] nope", InputSchema: json.RawMessage(`{"type":"object"}`)}, "label_invalid: "},
	}
	for _, tt := range tests {
		g, err := eng.Inspect(tt.tool, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if g != nil {
			got = g.Kind + ": " + g.Detail
		}
		if (tt.want == "") != (got == "") || !strings.HasPrefix(got, tt.want) {
			t.Errorf("Inspect(%s) = %q, want %q", tt.tool.InputSchema, got, tt.want)
		}
	}
}

// Arguments are the names a policy's fields may use: those of the object the root schema is,
// $refs followed, with the [Required] labels the description gives them; a schema the gate
// cannot read has none.
func TestArguments(t *testing.T) {
	eng, _ := New(Config{State: NewMemState()})
	tests := []struct {
		name string
		tool Tool
		want string // name:schema:required, comma-separated
	}{
		{"plain", Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}}`)},
			`a:{"type":"string"}:false,b:{"type":"integer"}:false`},
		{"root ref", Tool{Name: "a", InputSchema: json.RawMessage(`{"$defs":{"o":{"type":"object","properties":{"x":{"$ref":"#/$defs/s"}}},"s":{"type":"string","maxLength":3}},"$ref":"#/$defs/o"}`)},
			`x:{"maxLength":3,"type":"string"}:false`},
		{"required label", Tool{Name: "a", Description: "Pay.\n[Required] from", InputSchema: json.RawMessage(`{"type":"object","properties":{"from":{},"to":{}}}`)},
			`from:{}:true,to:{}:false`},
		{"no properties", Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}, ``},
		{"unsupported", Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{}},"allOf":[{"required":["x"]}]}`)}, ``},
		{"missing schema", Tool{Name: "a"}, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := eng.Arguments(tt.tool)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range args {
				got = append(got, fmt.Sprintf("%s:%s:%t", a.Name, a.Schema, a.RequiredLabel))
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("Arguments = %q, want %q", strings.Join(got, ","), tt.want)
			}
		})
	}
}

func TestToolDigest(t *testing.T) {
	a := Tool{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{},"a":{}}}`)}
	b := Tool{Name: "t", Description: "d", InputSchema: json.RawMessage(`{ "properties": {"a":{}, "b":{}}, "type": "object" }`),
		Annotations: json.RawMessage(`{"readOnlyHint":true}`)}
	da, _ := ToolDigest(a)
	db, _ := ToolDigest(b)
	if da != db || !strings.HasPrefix(da, "sha256:") {
		t.Fatalf("digests differ for the same definition: %s %s", da, db)
	}
	c := a
	c.Description = "d\n[Notice] new"
	if dc, _ := ToolDigest(c); dc == da {
		t.Fatal("a changed description must change the digest")
	}
}

// One engine serves concurrent runs over one definition cache.
func TestConcurrentRuns(t *testing.T) {
	pol := mustPolicy(t, `
policy_version: v1
servers: {docs: {audience: [x], tools_from: {command: [d]}}}
tools:
  docs/search: {actions: ["search the docs"]}
`)
	eng, _ := New(Config{State: NewMemState(), Clock: func() time.Time { return fixedNow }})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool := Tool{Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
			if i%2 == 0 {
				tool.Description = "variant"
			}
			req := mustRequest(t, `{"principal":"u","server":"docs","tool":"search","instruction":[{"text":"search the docs for x","trust":"user"}],
				"intent":{"when_case":"immediate","action_name":{"segment":0,"span":[0,15]}},
				"candidates":[{"field":"q","segment":0,"span":[20,21],"value":"x"}]}`)
			for range 20 {
				rec, err := eng.Run(context.Background(), Input{Tool: tool, Policy: pol, Request: req})
				if err != nil || rec.Outcome != api.OutcomeVerdictIssued {
					t.Errorf("run: %v %+v", err, rec)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestRunRejectsMismatchedTool(t *testing.T) {
	eng, _ := New(Config{State: NewMemState()})
	_, err := eng.Run(context.Background(), Input{Tool: Tool{Name: "other"}, Policy: &policy.Policy{},
		Request: mustRequest(t, `{"principal":"u","server":"s","tool":"t"}`)})
	if err == nil {
		t.Fatal("a definition of another tool must not be gated in its place")
	}
}

// A run uses its Input's State when it has one, the engine's otherwise, and fails with neither:
// nothing is read from or written to a state no commit covers.
func TestRunState(t *testing.T) {
	pol := mustPolicy(t, `
policy_version: v1
servers: {docs: {audience: [x], tools_from: {command: [d]}}}
tools:
  docs/search: {actions: ["search the docs"]}
`)
	tool := Tool{Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
	// No intent: api.Gate 1 asks, and counts the ask in the run's state.
	req := mustRequest(t, `{"principal":"u","conversation_id":"c","server":"docs","tool":"search",
		"instruction":[{"text":"search the docs for x","trust":"user"}]}`)
	conv := Conversation{Principal: "u", ID: "c"}
	asked := func(st *MemState) int {
		n, _ := st.Gate1Counts(context.Background(), conv)
		return n.Intent + n.Tool
	}
	tests := []struct {
		name            string
		engine, input   *MemState
		wantErr         bool
		engineN, inputN int
	}{
		{"input", NewMemState(), NewMemState(), false, 0, 1},
		{"engine", NewMemState(), nil, false, 1, 0},
		{"input only", nil, NewMemState(), false, 0, 1},
		{"neither", nil, nil, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			if tt.engine != nil {
				cfg.State = tt.engine
			}
			eng, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			in := Input{Tool: tool, Policy: pol, Request: req}
			if tt.input != nil {
				in.State = tt.input
			}
			_, err = eng.Run(context.Background(), in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("run: %v, want error %v", err, tt.wantErr)
			}
			if tt.engine != nil && asked(tt.engine) != tt.engineN {
				t.Errorf("engine's state counted %d asks, want %d", asked(tt.engine), tt.engineN)
			}
			if tt.input != nil && asked(tt.input) != tt.inputN {
				t.Errorf("input's state counted %d asks, want %d", asked(tt.input), tt.inputN)
			}
		})
	}
}

// The gate's tsd and the executor's, computed from the upstream listing, agree for every
// definition shape, including a tool without inputSchema and one without description.
func TestToolDigestMatchesUpstream(t *testing.T) {
	tests := []struct {
		name string
		raw  string
	}{
		{"full", `{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"b":{},"a":{"maximum":1.0}}}}`},
		{"no inputSchema", `{"name":"t","description":"d"}`},
		{"null inputSchema", `{"name":"t","description":"d","inputSchema":null}`},
		{"no description", `{"name":"t","inputSchema":{"type":"object"}}`},
		{"neither", `{"name":"t"}`},
		{"annotations", `{"name":"t","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`},
		{"unicode", `{"name":"t","description":"\u00e9\ud83d\ude00","inputSchema":{"type":"object","required":[]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tool Tool
			if err := json.Unmarshal([]byte(tt.raw), &tool); err != nil {
				t.Fatal(err)
			}
			got, err := ToolDigest(tool)
			if err != nil {
				t.Fatal(err)
			}
			want, err := upstream.DefinitionDigest(tool.Name, tool.Description, tool.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("gates %s, upstream %s", got, want)
			}
		})
	}
	// The absent schema is digested as null, never as an omitted member or an empty schema.
	none, _ := ToolDigest(Tool{Name: "t"})
	empty, _ := ToolDigest(Tool{Name: "t", InputSchema: json.RawMessage(`{}`)})
	pinned, _ := canonical.DigestJSON([]byte(`{"name":"t","description":"","inputSchema":null}`))
	if none != pinned || none == empty {
		t.Fatalf("absent schema digest %s, want %s (empty schema %s)", none, pinned, empty)
	}
}
