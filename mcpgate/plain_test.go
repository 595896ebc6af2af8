package mcpgate_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/mcpgate"
)

// diffServer is an upstream whose tools answer with every kind of result a
// pass-through call carries, and which records every call it receives.
type diffServer struct {
	url string
	mu  sync.Mutex
	log []diffCall
	// hold, when set, is where flip waits: it signals entered and waits for release.
	hold chan chan struct{}
}

type diffCall struct{ tool, args string }

func (d *diffServer) calls() []diffCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]diffCall(nil), d.log...)
}

func newDiffServer(t *testing.T) *diffServer {
	t.Helper()
	d := &diffServer{hold: make(chan chan struct{}, 1)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "diff", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	add := func(tool *mcp.Tool, h func(req *mcp.CallToolRequest) *mcp.CallToolResult) {
		if tool.InputSchema == nil {
			tool.InputSchema = obj
		}
		srv.AddTool(tool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args bytes.Buffer
			_ = json.Compact(&args, req.Params.Arguments)
			d.mu.Lock()
			d.log = append(d.log, diffCall{req.Params.Name, args.String()})
			d.mu.Unlock()
			return h(req), nil
		})
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	add(&mcp.Tool{Name: "text"}, func(req *mcp.CallToolRequest) *mcp.CallToolResult {
		return text("args " + string(req.Params.Arguments))
	})
	add(&mcp.Tool{Name: "structured", OutputSchema: obj}, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}},
			StructuredContent: json.RawMessage(`{"balance":12.5,"tags":["a","<b>"]}`), Meta: mcp.Meta{"app/trace": "t1"}}
	})
	add(&mcp.Tool{Name: "failing"}, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such account"}}}
	})
	add(&mcp.Tool{Name: "empty"}, func(*mcp.CallToolRequest) *mcp.CallToolResult { return &mcp.CallToolResult{} })
	add(&mcp.Tool{Name: "large"}, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return text(strings.Repeat("línea <&>\n", 300<<10/12))
	})
	add(&mcp.Tool{Name: "asking"}, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{Message: "Which color?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}`)}},
			RequestState: "up-1"}
	})
	add(&mcp.Tool{Name: "pay"}, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("PAID") })
	add(&mcp.Tool{Name: "flip"}, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		select {
		case entered := <-d.hold:
			entered <- struct{}{}
			<-entered
		default:
		}
		return text("flipped")
	})
	add(&mcp.Tool{Name: "headed", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"account":{"type":"string","x-mcp-header":"Account"}}}`)},
		func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("headed") })
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	d.url = hs.URL
	return d
}

// plainGateway runs a gateway in the test process in front of the bank and a
// diffServer, and serves it twice: with its own handler (fast) and with every
// request left to the MCP library (slow). setPolicy rewrites the diff server's
// part of the policy and reloads.
type plainGateway struct {
	gw         *mcpgate.Gateway
	fast, slow string
	diff       *diffServer
	// setPolicy puts pins (a top-level pins section, or "") and the diff server's tools in force.
	setPolicy func(t *testing.T, pins, diffPart string)
}

const diffTools = "  diff/text:\n    class: read\n  diff/structured:\n    class: read\n  diff/failing:\n    class: read\n" +
	"  diff/empty:\n    class: read\n  diff/large:\n    class: reversible\n  diff/asking:\n    class: read\n" +
	"  diff/pay:\n    class: irreversible\n    actions: [\"pay\"]\n  diff/flip:\n    class: read\n  diff/headed:\n    class: read\n"

func newPlainGateway(t *testing.T) *plainGateway {
	t.Helper()
	s := bankStack(t)
	d := newDiffServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway-policy.yaml")
	version := 0
	write := func(t *testing.T, pins, tools string) {
		version++
		writeAtomic(t, path, s.policyText(t, fmt.Sprintf("plain.%d", version),
			"servers:\n", "servers:\n  diff:\n    audience: [\"executor-test\"]\n    tools_from: {url: \""+d.url+"\"}\n",
			"tools:\n", pins+"tools:\n"+tools))
	}
	write(t, "", diffTools)
	raw := s.gatewayConfig(dir)
	raw["policy"] = path
	raw["policy_poll"] = "1h"
	gw, _ := runGateway(t, dir, raw)
	fast, slow := httptest.NewServer(gw.Handler()), httptest.NewServer(mcpgate.LibraryHandler(gw))
	t.Cleanup(func() {
		fast.Close()
		slow.Close()
	})
	return &plainGateway{gw: gw, fast: fast.URL, slow: slow.URL, diff: d, setPolicy: func(t *testing.T, pins, tools string) {
		write(t, pins, tools)
		if err := gw.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}}
}

// hostCall is a 2026-07-28 host's tools/call as it goes over the wire.
type hostCall struct {
	body   string
	header map[string]string // set (or, with "", removed) over the usual ones
	path   string            // the endpoint; "" is /mcp
}

// callBody is the body a go-sdk 2026-07-28 host sends for a call of name.
func callBody(id, name, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"_meta":{` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"host","version":"1"},` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"` + name + `","arguments":` + args + `}}`
}

func call(name, args string) hostCall {
	return hostCall{body: callBody("1", name, args), header: map[string]string{"Mcp-Name": name}}
}

type answer struct {
	status int
	ctype  string
	cache  string
	body   string
}

// fataler is what post needs of a test: a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func (p *plainGateway) post(t fataler, base string, c hostCall) answer {
	t.Helper()
	a, err := p.send(base, c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// send is post for a goroutine other than the test's.
func (p *plainGateway) send(base string, c hostCall) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, base+cmp.Or(c.path, "/mcp"), strings.NewReader(c.body))
	if err != nil {
		return answer{}, err
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Authorization": "Bearer " + userToken} {
		req.Header.Set(k, v)
	}
	for k, v := range c.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), string(b)}, nil
}

func (p *plainGateway) plainCalls(t *testing.T) float64 {
	return (&gateway{url: p.fast}).metric(t, "mcpgate_plain_calls_total")
}

// requestState values are sealed with a fresh nonce on every answer.
var stateRE = regexp.MustCompile(`"requestState":"[^"]*"`)

func sameAnswer(a, b answer) bool {
	a.body, b.body = stateRE.ReplaceAllString(a.body, `"requestState":"…"`), stateRE.ReplaceAllString(b.body, `"requestState":"…"`)
	return a == b
}

func short(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// The host gets the same bytes from the gateway's own answer as from the
// library's, for text, structured, error, empty, large and input_required
// results and for number and string ids, at the aggregated endpoint and at
// the server's own; the server gets the same arguments.
func TestPlainAnswersAsTheLibrary(t *testing.T) {
	p := newPlainGateway(t)
	for _, at := range []struct{ path, prefix string }{{"/mcp", "diff."}, {"/mcp/diff", ""}} {
		for _, tool := range []string{"text", "structured", "failing", "empty", "large", "asking"} {
			for _, id := range []string{"7", `"req-1.a:b_c"`, "-3", "0"} {
				args := `{"account": "acc_1", "n": [1, 2.50e0, {"x": null}], "s": "\u00e9<"}`
				c := hostCall{body: callBody(id, at.prefix+tool, args), header: map[string]string{"Mcp-Name": at.prefix + tool}, path: at.path}
				class, result := "read", map[string]string{"failing": "error", "asking": "input_required"}[tool]
				if tool == "large" {
					class = "reversible"
				}
				if result == "" {
					result = "ok"
				}
				series := `mcpgate_calls_total{class="` + class + `",result="` + result + `"}`
				g := &gateway{url: p.fast}
				// A series is absent (-1) until its first count.
				before, counted := p.plainCalls(t), max(0, g.metric(t, series))
				fast := p.post(t, p.fast, c)
				if got := p.plainCalls(t) - before; got != 1 {
					t.Fatalf("%s id %s: served without the library %v times, want 1: %s", tool, id, got, short(fast.body))
				}
				if got := g.metric(t, series) - counted; got != 1 {
					t.Fatalf("%s: %s counted %v times, want 1", tool, series, got)
				}
				slow := p.post(t, p.slow, c)
				if !sameAnswer(fast, slow) {
					t.Fatalf("%s id %s:\nfast %d %q %q %s\nslow %d %q %q %s", tool, id, fast.status, fast.ctype, fast.cache, short(fast.body),
						slow.status, slow.ctype, slow.cache, short(slow.body))
				}
				calls := p.diff.calls()
				if n := len(calls); n < 2 || calls[n-1] != calls[n-2] || calls[n-1].tool != tool {
					t.Fatalf("%s: the server received %+v", tool, calls[max(0, n-2):])
				}
			}
		}
	}
	// A real 2026-07-28 host on the go-sdk is answered without the library too.
	before := p.plainCalls(t)
	sess, err := (&gateway{url: p.fast}).connectAs(t, userToken, "2026-07-28", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "diff.text", Arguments: map[string]any{"a": 1}})
	if err != nil || res.IsError || text(res) != `args {"a":1}` {
		t.Fatalf("result %+v, error %v", res, err)
	}
	if got := p.plainCalls(t) - before; got != 1 {
		t.Fatalf("a go-sdk host's call served without the library %v times, want 1", got)
	}
}

// No tools/call of an irreversible tool reaches its server through the
// gateway's own path, however it is written: its plain first round is gated
// there (here its preflight fails: verdictd has no diff server), and every
// smuggling trick falls back to the library, which gates or refuses it as
// before.
func TestPlainNeverForwardsAGatedTool(t *testing.T) {
	p := newPlainGateway(t)
	pay := callBody("1", "diff.pay", `{}`)
	// The cases that are diff.pay's first round as the library reads it too.
	gatedThere := map[string]bool{"plain": true, "unicode-escaped name": true, "unicode-escaped member name": true,
		"the server's own endpoint": true}
	for _, tc := range []struct {
		name string
		c    hostCall
	}{
		{"plain", call("diff.pay", `{}`)},
		{"duplicate name", hostCall{body: strings.Replace(pay, `"name":"diff.pay"`, `"name":"diff.text","name":"diff.pay"`, 1),
			header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"duplicate name, the other order", hostCall{body: strings.Replace(pay, `"name":"diff.pay"`, `"name":"diff.pay","name":"diff.text"`, 1),
			header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"case-mismatched Name", hostCall{body: strings.Replace(pay, `"name":"diff.pay"`, `"name":"diff.text","Name":"diff.pay"`, 1),
			header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"case-mismatched NAME alone", hostCall{body: strings.Replace(pay, `"name":"diff.pay"`, `"NAME":"diff.pay"`, 1),
			header: map[string]string{"Mcp-Name": "diff.pay"}}},
		{"unicode-escaped name", hostCall{body: strings.Replace(pay, `"diff.pay"`, `"diff.p\u0061y"`, 1),
			header: map[string]string{"Mcp-Name": "diff.pay"}}},
		{"unicode-escaped member name", hostCall{body: strings.Replace(pay, `"name":`, `"n\u0061me":`, 1),
			header: map[string]string{"Mcp-Name": "diff.pay"}}},
		{"header names a read tool", hostCall{body: pay, header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"batch", hostCall{body: "[" + pay + "]", header: map[string]string{"Mcp-Name": "diff.pay"}}},
		{"batch of read and gated", hostCall{body: "[" + callBody("2", "diff.text", `{}`) + "," + pay + "]",
			header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"another server's prefix", call("bank.pay", `{}`)},
		{"the gated tool under another server", call("diff.transfer", `{}`)},
		{"server prefix twice", call("diff.diff.pay", `{}`)},
		{"older revision", hostCall{body: strings.Replace(pay, "2026-07-28", "2025-11-25", 1),
			header: map[string]string{"Mcp-Name": "diff.pay", "Mcp-Protocol-Version": "2025-11-25"}}},
		{"meta smuggled key", hostCall{body: strings.Replace(pay, `"_meta":{`, `"_meta":{"io.verdict/refused":"x",`, 1),
			header: map[string]string{"Mcp-Name": "diff.pay"}}},
		{"requestState", hostCall{body: strings.Replace(pay, `"name":`, `"requestState":"relay.x","name":`, 1),
			header: map[string]string{"Mcp-Name": "diff.pay"}}},
		{"the server's own endpoint", hostCall{body: callBody("1", "pay", `{}`), header: map[string]string{"Mcp-Name": "pay"}, path: "/mcp/diff"}},
		{"the aggregated name at the server's endpoint", hostCall{body: pay, header: map[string]string{"Mcp-Name": "diff.pay"}, path: "/mcp/diff"}},
		{"the server's name at the aggregated endpoint", hostCall{body: callBody("1", "pay", `{}`), header: map[string]string{"Mcp-Name": "pay"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A first round of diff.pay, however legitimately spelled, is served (gated)
			// without the library; every other request is left to it.
			want := 0.0
			if gatedThere[tc.name] {
				want = 1
			}
			before := p.plainCalls(t)
			fast := p.post(t, p.fast, tc.c)
			if got := p.plainCalls(t) - before; got != want {
				t.Fatalf("served without the library %v times, want %v: %s", got, want, short(fast.body))
			}
			slow := p.post(t, p.slow, tc.c)
			if !sameGatedAnswer(fast, slow) {
				t.Fatalf("\nfast %d %s\nslow %d %s", fast.status, short(fast.body), slow.status, short(slow.body))
			}
			for _, c := range p.diff.calls() {
				if c.tool == "pay" {
					t.Fatalf("the gated tool reached its server: %+v (answer %s)", c, short(fast.body))
				}
			}
		})
	}
}

// A tool withdrawn from the listing, or reclassified irreversible by a
// reload, is not forwarded from then on; a call already forwarded under the
// read class finishes under it, as every call does.
func TestPlainFollowsThePolicyInForce(t *testing.T) {
	p := newPlainGateway(t)
	if a := p.post(t, p.fast, call("diff.flip", `{}`)); !strings.Contains(a.body, "flipped") {
		t.Fatalf("flip as read: %s", a.body)
	}
	// A call in flight when flip becomes irreversible.
	entered := make(chan struct{})
	p.diff.hold <- entered
	done := make(chan answer, 1)
	go func() {
		a, err := p.send(p.fast, call("diff.flip", `{}`))
		if err != nil {
			a.body = err.Error()
		}
		done <- a
	}()
	<-entered
	p.setPolicy(t, "", strings.Replace(diffTools, "  diff/flip:\n    class: read\n", "  diff/flip:\n    class: irreversible\n    actions: [\"flip\"]\n", 1))
	entered <- struct{}{}
	if a := <-done; !strings.Contains(a.body, "flipped") {
		t.Fatalf("the call in flight: %s", a.body)
	}
	// From then on its first round is gated (here its preflight fails: verdictd has no diff
	// server), still without the library.
	n := len(p.diff.calls())
	before := p.plainCalls(t)
	a := p.post(t, p.fast, call("diff.flip", `{}`))
	if got := len(p.diff.calls()); got != n || strings.Contains(a.body, "flipped") || p.plainCalls(t) != before+1 {
		t.Fatalf("flip reached its server after the reload (%d calls, was %d): %s", got, n, short(a.body))
	}
	before++
	// A pin that the listed definition does not match withholds the tool.
	p.setPolicy(t, "pins:\n  diff:\n    tools: {text: \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"}\n", diffTools)
	n = len(p.diff.calls())
	if a := p.post(t, p.fast, call("diff.text", `{}`)); len(p.diff.calls()) != n || p.plainCalls(t) != before {
		t.Fatalf("an unpinned tool reached its server: %s", short(a.body))
	}
	// The policy drops the server's tools: each is irreversible by default, gated (its
	// first round without the library) and not called.
	p.setPolicy(t, "", "")
	n = len(p.diff.calls())
	for _, tool := range []string{"diff.text", "diff.flip"} {
		a := p.post(t, p.fast, call(tool, `{}`))
		if got := len(p.diff.calls()); got != n || p.plainCalls(t) != before+1 {
			t.Fatalf("%s reached its server after its class was dropped: %s", tool, short(a.body))
		}
		before++
	}
}

// Requests the gateway does not serve itself are left to the library, which
// answers them as it always has: a tool binding arguments to headers, a
// header missing or naming another tool, another method, a session, a
// request without a principal.
func TestPlainLeavesTheRestToTheLibrary(t *testing.T) {
	p := newPlainGateway(t)
	for _, tc := range []struct {
		name string
		c    hostCall
	}{
		{"x-mcp-header", hostCall{body: callBody("1", "diff.headed", `{"account":"a1"}`),
			header: map[string]string{"Mcp-Name": "diff.headed", "Mcp-Param-Account": "a1"}}},
		{"no Mcp-Name", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": ""}}},
		{"Mcp-Method mismatch", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text", "Mcp-Method": "tools/list"}}},
		{"no protocol header", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text", "Mcp-Protocol-Version": ""}}},
		{"no principal", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text", "Authorization": ""}}},
		{"wrong principal", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text", "Authorization": "Bearer nope"}}},
		{"session id", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text", "Mcp-Session-Id": "s1"}}},
		{"Accept without event streams", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text", "Accept": "application/json"}}},
		{"Content-Type", hostCall{body: callBody("1", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text", "Content-Type": "text/plain"}}},
		{"arguments not an object", call("diff.text", `[1]`)},
		{"arguments null", call("diff.text", `null`)},
		{"fractional id", hostCall{body: callBody("1.5", "diff.text", `{}`), header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"no id", hostCall{body: strings.Replace(callBody("1", "diff.text", `{}`), `"id":1,`, ``, 1), header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"unknown tool", call("diff.nothing", `{}`)},
		{"capabilities of the wrong type", hostCall{body: strings.Replace(callBody("1", "diff.text", `{}`), `{"elicitation":{"form":{}}}`, `{"elicitation":true}`, 1),
			header: map[string]string{"Mcp-Name": "diff.text"}}},
		{"no capabilities", hostCall{body: strings.Replace(callBody("1", "diff.text", `{}`), `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},`, ``, 1),
			header: map[string]string{"Mcp-Name": "diff.text"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := p.plainCalls(t)
			fast := p.post(t, p.fast, tc.c)
			if got := p.plainCalls(t) - before; got != 0 {
				t.Fatalf("served without the library: %s", short(fast.body))
			}
			if slow := p.post(t, p.slow, tc.c); !sameAnswer(fast, slow) {
				t.Fatalf("\nfast %d %s\nslow %d %s", fast.status, short(fast.body), slow.status, short(slow.body))
			}
		})
	}
}

// For any params a host may send, the gateway's own path and the library
// decide alike (forwarded or not) and the server receives the same call.
func TestPlainDecidesAsTheLibrary(t *testing.T) {
	p := newPlainGateway(t)
	names := []string{"diff.text", "diff.pay", "diff.failing", "diff.nothing", "bank.get_balance", "diff.p\\u0061y", "diff.t\\u0065xt", "DIFF.TEXT"}
	members := []string{`"name"`, `"Name"`, `"n\u0061me"`}
	argsOpts := []string{``, `,"arguments":{}`, `,"arguments":{"a":1,"a":2}`, `,"arguments":{"b":[1,{"c":"d"}]}`, `,"arguments":[]`, `,"arguments":"x"`}
	metas := []string{
		`"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
		`"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"h","version":"2"}}`,
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
		`"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.verdict/conversation_id":"c1"}`,
		`"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":1}}`,
	}
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.SampledFrom(names).Draw(rt, "name")
		member := rapid.SampledFrom(members).Draw(rt, "member")
		second := rapid.SampledFrom(append([]string{""}, names...)).Draw(rt, "second")
		args := rapid.SampledFrom(argsOpts).Draw(rt, "args")
		meta := rapid.SampledFrom(metas).Draw(rt, "meta")
		header := rapid.SampledFrom(names).Draw(rt, "header")
		params := `{` + meta + `,` + member + `:"` + name + `"`
		if second != "" {
			params += `,"name":"` + second + `"`
		}
		params += args + `}`
		c := hostCall{body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + params + `}`,
			header: map[string]string{"Mcp-Name": strings.ReplaceAll(header, `\u0061`, "a")}}
		n := len(p.diff.calls())
		fast := p.post(rt, p.fast, c)
		fastCalls := p.diff.calls()[n:]
		slow := p.post(rt, p.slow, c)
		slowCalls := p.diff.calls()[n+len(fastCalls):]
		if fmt.Sprint(fastCalls) != fmt.Sprint(slowCalls) {
			rt.Fatalf("the server received %v through the gateway's path, %v through the library's", fastCalls, slowCalls)
		}
		if fast.status != slow.status {
			rt.Fatalf("status %d, the library's %d: %s / %s", fast.status, slow.status, short(fast.body), short(slow.body))
		}
		for _, c := range fastCalls {
			if c.tool == "pay" {
				rt.Fatalf("the gated tool reached its server")
			}
		}
	})
}
