package upstream

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"
)

// plainServer is a go-sdk server with a tool for every kind of answer a
// pass-through call can get.
func plainServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	srv.AddTool(&mcp.Tool{Name: "text", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("args " + string(req.Params.Arguments)), nil
	})
	srv.AddTool(&mcp.Tool{Name: "structured", InputSchema: obj, OutputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}},
				StructuredContent: json.RawMessage(`{"balance":12.5,"id":9007199254740993,"tags":["a","b"]}`),
				Meta:              mcp.Meta{"app/trace": "t1"}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "failing", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such account"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "large", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(strings.Repeat("línea\n", 200<<10/7)), nil
	})
	srv.AddTool(&mcp.Tool{Name: "asking", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{Message: "Which color?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"color":{"type":"string"}}}`)}}, RequestState: "st-1"}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "broken", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("tool crashed")
	})
	srv.AddTool(&mcp.Tool{Name: "headed", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"account":{"type":"string","x-mcp-header":"Account"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("args " + string(req.Params.Arguments)), nil
		})
	return srv
}

// callLedger is an HTTP transport that records, for every tools/call it
// carries, whether it was a plain call (an id a plain call numbers) and the
// arguments sent.
type callLedger struct {
	mu    sync.Mutex
	calls []ledgerCall
}

type ledgerCall struct {
	plain  bool
	header http.Header
	args   string
	// answers and state are the inputResponses and requestState of a retry.
	answers, state string
}

func (l *callLedger) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.GetBody != nil {
		if b, err := r.GetBody(); err == nil {
			sent, _ := io.ReadAll(b)
			var m struct {
				ID     int64  `json:"id"`
				Method string `json:"method"`
				Params struct {
					Arguments      json.RawMessage `json:"arguments"`
					InputResponses json.RawMessage `json:"inputResponses"`
					RequestState   string          `json:"requestState"`
				} `json:"params"`
			}
			if json.Unmarshal(sent, &m) == nil && m.Method == methodCallTool {
				var args bytes.Buffer
				_ = json.Compact(&args, m.Params.Arguments)
				l.mu.Lock()
				l.calls = append(l.calls, ledgerCall{plain: m.ID > plainIDBase, header: r.Header.Clone(), args: args.String(),
					answers: string(m.Params.InputResponses), state: m.Params.RequestState})
				l.mu.Unlock()
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (l *callLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

func (l *callLedger) at(i int) ledgerCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[i]
}

func (l *callLedger) last(t *testing.T) ledgerCall {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) == 0 {
		t.Fatal("no tools/call sent")
	}
	return l.calls[len(l.calls)-1]
}

// dialPlain dials srv over streamable HTTP with opts and lists its tools, so
// that the client has the SDK's own request to copy.
func dialPlain(t *testing.T, srv *mcp.Server, opts *mcp.StreamableHTTPOptions) (*Client, *callLedger, map[string]Tool) {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
	t.Cleanup(hs.Close)
	ledger := &callLedger{}
	o := testOptions(t)
	o.HTTPClient = &http.Client{Transport: ledger}
	c, err := Dial(testContext(t), "plain", Config{URL: hs.URL}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tools, err := c.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]Tool{}
	for _, tl := range tools {
		defs[tl.Name] = tl
	}
	return c, ledger, defs
}

func kindOf(err error) error {
	for _, k := range []error{ErrOutcomeUnknown, ErrInputRequired, ErrRejected, ErrUnavailable, ErrClosed} {
		if errors.Is(err, k) {
			return k
		}
	}
	return err
}

// A call given the tool's definition returns what a call through the SDK
// returns, result bytes and failure kind alike, for every kind of answer, on
// every way a server may answer over HTTP; it is a plain call exactly when
// the server speaks without a session.
func TestPlainCallAnswersAsSDKCall(t *testing.T) {
	for _, mode := range []struct {
		name  string
		opts  *mcp.StreamableHTTPOptions
		plain bool
	}{
		{"stateless event stream", &mcp.StreamableHTTPOptions{Stateless: true}, true},
		{"stateless json", &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, true},
		{"session event stream", nil, false},
		{"session json", &mcp.StreamableHTTPOptions{JSONResponse: true}, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c, ledger, defs := dialPlain(t, plainServer(), mode.opts)
			if got := c.plain.Load() != nil; got != mode.plain {
				t.Fatalf("plain calls possible = %v, want %v", got, mode.plain)
			}
			for _, tc := range []struct {
				tool, args string
			}{
				{"text", `{"account": "acc_1", "n": [1, 2.50, {"x": null}]}`},
				{"text", ``},
				{"structured", `{}`},
				{"failing", `{}`},
				{"large", `{}`},
				{"asking", `{}`},
				{"broken", `{}`},
				{"missing", `{}`},
				{"text", `[1]`},
			} {
				ctx := testContext(t)
				n0 := ledger.count()
				want, wantErr := callTool(ctx, c, tc.tool, json.RawMessage(tc.args))
				n1 := ledger.count()
				got, _, gotErr := c.Call(ctx, ToolCall{Tool: tc.tool, Args: json.RawMessage(tc.args), Definition: defs[tc.tool].Raw})
				if kindOf(gotErr) != kindOf(wantErr) {
					t.Fatalf("%s %s: error %v, want the kind of %v", tc.tool, tc.args, gotErr, wantErr)
				}
				wb, _ := json.Marshal(want)
				gb, _ := json.Marshal(got)
				if !bytes.Equal(wb, gb) {
					t.Fatalf("%s: result\n%s\nwant\n%s", tc.tool, trim(gb), trim(wb))
				}
				// A pass-through call: the same result, but for the result type.
				n2 := ledger.count()
				pt, _, ptErr := c.Call(ctx, ToolCall{Tool: tc.tool, Args: json.RawMessage(tc.args), Definition: defs[tc.tool].Raw, PassThrough: true})
				if kindOf(ptErr) != kindOf(wantErr) || withoutResultType(t, pt) != withoutResultType(t, want) {
					t.Fatalf("%s: pass-through result %s (%v), want %s (%v)", tc.tool, trim([]byte(withoutResultType(t, pt))), ptErr,
						trim([]byte(withoutResultType(t, want))), wantErr)
				}
				if ledger.count() != n2+(n1-n0) {
					t.Fatalf("%s: the pass-through call sent %d requests, the SDK %d", tc.tool, ledger.count()-n2, n1-n0)
				}
				n1 = n2 // compare the plain call sent before the pass-through one with the SDK's
				if n1 == n0 {
					if ledger.count() != n1 {
						t.Fatalf("%s %s: sent, where the SDK sent nothing", tc.tool, tc.args)
					}
					continue
				}
				sdk, sent := ledger.at(n0), ledger.at(n0+1)
				if ledger.count() != n0+3 {
					t.Fatalf("%s: %d requests sent, want 3", tc.tool, ledger.count()-n0)
				}
				if wantPlain := mode.plain && defs[tc.tool].Raw != nil; sent.plain != wantPlain {
					t.Fatalf("%s: sent plainly = %v, want %v", tc.tool, sent.plain, wantPlain)
				}
				if sent.args != sdk.args {
					t.Fatalf("%s: arguments sent %s, the SDK sent %s", tc.tool, sent.args, sdk.args)
				}
			}
		})
	}
}

// withoutResultType is res as JSON without its resultType member.
func withoutResultType(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil {
		return "null"
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "resultType")
	out, _ := json.Marshal(m)
	return string(out)
}

func trim(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// A plain call carries the SDK's own headers: revision, method and name, and
// the configured ones.
func TestPlainCallSendsTheSDKHeaders(t *testing.T) {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plainServer() },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	ledger := &callLedger{}
	o := testOptions(t)
	o.HTTPClient = &http.Client{Transport: ledger}
	c, err := Dial(testContext(t), "plain", Config{URL: hs.URL, Headers: map[string]string{"X-Api-Key": "k1"}}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tools, err := c.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var def json.RawMessage
	for _, tl := range tools {
		if tl.Name == "text" {
			def = tl.Raw
		}
	}
	if _, err := callTool(testContext(t), c, "text", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	sdk := ledger.last(t).header
	if _, _, err := c.Call(testContext(t), ToolCall{Tool: "text", Args: json.RawMessage(`{}`), Definition: def}); err != nil {
		t.Fatal(err)
	}
	plain := ledger.last(t)
	if !plain.plain {
		t.Fatal("the call was not plain")
	}
	for _, h := range []string{"Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "X-Api-Key", "Content-Type", "Accept"} {
		if plain.header.Get(h) != sdk.Get(h) || sdk.Get(h) == "" {
			t.Errorf("%s: plain %q, SDK %q", h, plain.header.Get(h), sdk.Get(h))
		}
	}
	// Each tool's calls name that tool, call after call, and only it.
	for _, tool := range []string{"failing", "text", "failing"} {
		var def json.RawMessage
		for _, tl := range tools {
			if tl.Name == tool {
				def = tl.Raw
			}
		}
		_, _, _ = c.Call(testContext(t), ToolCall{Tool: tool, Args: json.RawMessage(`{}`), Definition: def})
		got := ledger.last(t)
		if !got.plain || got.header.Values("Mcp-Name")[0] != tool || len(got.header.Values("Mcp-Name")) != 1 ||
			len(got.header.Values("Mcp-Method")) != 1 || got.header.Get("X-Api-Key") != "k1" {
			t.Errorf("%s: plain %v, headers %v", tool, got.plain, got.header)
		}
	}
}

// Calls the SDK would send differently go through the SDK: a tool binding an
// argument to a header, a name that is no plain token, a call carrying trace
// context.
func TestPlainCallLeavesTheRestToTheSDK(t *testing.T) {
	c, ledger, defs := dialPlain(t, plainServer(), &mcp.StreamableHTTPOptions{Stateless: true})
	if _, _, err := c.Call(testContext(t), ToolCall{Tool: "headed", Args: json.RawMessage(`{"account":"acc_1"}`), Definition: defs["headed"].Raw}); err != nil {
		t.Fatal(err)
	}
	if sent := ledger.last(t); sent.plain || sent.header.Get("Mcp-Param-Account") != "acc_1" {
		t.Fatalf("a tool with x-mcp-header: plain %v, Mcp-Param-Account %q", sent.plain, sent.header.Get("Mcp-Param-Account"))
	}
	for _, tc := range []struct {
		name string
		def  string
		want bool
	}{
		{"text", `{"name":"text","inputSchema":{"type":"object"}}`, true},
		{"text", `{"name":"text","inputSchema":{"type":"object","properties":{"a":{"x-mcp-header":"A"}}}}`, false},
		{"text", `{"name":"text","inputSchema":{"type":"object","properties":{"a":{"x-mcp-h\u0065ader":"A"}}}}`, false},
		{"text", `{"name":"text","description":"say \"hi\""}`, false},
		{"text", ``, false},
		{"", `{}`, false},
		{"te xt", `{}`, false},
		{`te"xt`, `{}`, false},
		{"tëxt", `{}`, false},
		{"get_balance.v2/x-y", `{}`, true},
	} {
		if got := plainTool(tc.name, json.RawMessage(tc.def)); got != tc.want {
			t.Errorf("plainTool(%q, %s) = %v, want %v", tc.name, tc.def, got, tc.want)
		}
	}
}

// Whatever is no answer to the call is a failure of the kind a call through
// the SDK reports; a request on the call's stream is not left unanswered.
func TestPlainCallFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answer writes the response to a plain tools/call
		answer func(w http.ResponseWriter)
		want   error
	}{
		{"503", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }, ErrOutcomeUnknown},
		{"500 text", func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) }, ErrOutcomeUnknown},
		{"400 json-rpc error", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad params"}}`)
		}, ErrRejected},
		{"error with the transport's code", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":4503599627370497,"error":{"code":-32005,"message":"x"}}`)
		}, ErrOutcomeUnknown},
		{"another id", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`)
		}, ErrOutcomeUnknown},
		{"stream ends first", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
		}, ErrOutcomeUnknown},
		{"request on the stream", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\",\"params\":{}}\n\n"+
				"data: {\"jsonrpc\":\"2.0\",\"id\":4503599627370497,\"result\":{\"content\":[]}}\n\n")
		}, ErrOutcomeUnknown},
		{"other content type", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, `{"jsonrpc":"2.0","id":4503599627370497,"result":{"content":[]}}`)
		}, ErrOutcomeUnknown},
		{"notification then result", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n"+
				"data: {\"jsonrpc\":\"2.0\",\"id\":4503599627370497,\n"+"data: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n")
		}, nil},
		{"informational responses first", func(w http.ResponseWriter) {
			w.Header().Set("Link", "</x>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusProcessing)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":4503599627370497,"result":{"content":[{"type":"text","text":"ok"}]}}`)
		}, nil},
		{"gzip", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, `{"jsonrpc":"2.0","id":4503599627370497,"result":{"content":[{"type":"text","text":"ok"}]}}`)
			zw.Close()
		}, nil},
		{"connection close", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			io.WriteString(w, `{"jsonrpc":"2.0","id":4503599627370497,"result":{"content":[{"type":"text","text":"ok"}]}}`)
		}, nil},
		{"redirect", func(w http.ResponseWriter) {
			w.Header().Set("Location", "/moved")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}, nil},
		{"broken chunk", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			conn, bw, _ := w.(http.Hijacker).Hijack()
			bw.WriteString("zz\r\n")
			bw.Flush()
			conn.Close()
		}, ErrOutcomeUnknown},
		{"connection dropped", func(w http.ResponseWriter) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, ErrOutcomeUnknown},
	} {
		for _, transport := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/transport=%v", tc.name, transport), func(t *testing.T) {
				plainFailureCase(t, tc.answer, tc.want, transport)
			})
		}
	}
}

// plainFailureCase is one case of TestPlainCallFailures: a pass-through call
// sent by plainConns, or (transport) an executor's call through net/http's
// Transport.
func plainFailureCase(t *testing.T, answer func(http.ResponseWriter), want error, transport bool) {
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plainServer() },
		&mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"id":4503599627370497`)) && r.URL.Path != "/moved" {
			answer(w)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	o := testOptions(t)
	if transport {
		o.HTTPClient = &http.Client{}
	}
	c, def := dialPlainConns(t, hs.URL, o)
	if (c.plainAddr == "") != transport {
		t.Fatalf("plain calls sent by plainConns: %v", c.plainAddr != "")
	}
	// Only a pass-through call is sent by plainConns; the executor's (not
	// pass-through) keeps the Transport.
	res, _, err := c.Call(testContext(t), ToolCall{Tool: "text", Args: json.RawMessage(`{}`), Definition: def, PassThrough: !transport})
	if want == nil {
		if err != nil || len(res.Content) != 1 {
			t.Fatalf("result %+v, error %v", res, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

// jsonValue draws a JSON value as text: nested objects and arrays, numbers
// written every way JSON allows, strings with escapes and non-ASCII text,
// and now and then a repeated member name or an invalid sequence.
func jsonValue(t *rapid.T, depth int) string {
	kinds := []string{"number", "string", "literal"}
	if depth < 3 {
		kinds = append(kinds, "object", "array")
	}
	switch rapid.SampledFrom(kinds).Draw(t, "kind") {
	case "number":
		return rapid.SampledFrom([]string{"0", "-0", "1", "-17", "12.5", "2.50e0", "1e21", "9007199254740993", "1E-7",
			"123456789012345678901234567890", "1e400", "0.1", "-0.0"}).Draw(t, "number")
	case "string":
		return rapid.SampledFrom([]string{`""`, `"a"`, `"<b>&"`, `"\u00e9"`, `"é"`, `"\n\t\""`, `"\ud83d\ude00"`, `"\ud800"`,
			`"` + "\u2028" + `"`, `"\/"`, "\"\xff\""}).Draw(t, "string")
	case "literal":
		return rapid.SampledFrom([]string{"true", "false", "null"}).Draw(t, "literal")
	case "array":
		n := rapid.IntRange(0, 3).Draw(t, "n")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = jsonValue(t, depth+1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	n := rapid.IntRange(0, 3).Draw(t, "n")
	parts := make([]string, n)
	for i := range parts {
		key := rapid.SampledFrom([]string{"a", "b", "Zz", "é", "a"}).Draw(t, "key")
		parts[i] = `"` + key + `":` + jsonValue(t, depth+1)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// For any result, decodeCommon either declines it or gives what the SDK's
// decoder gives, but for the result type.
func TestDecodeCommonIsTheSDKDecoding(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		members := []string{`"content":[{"type":"text","text":` + rapid.SampledFrom([]string{`"ok"`, `"\u00e9<>"`, `null`}).Draw(rt, "text") + `}]`}
		if rapid.Bool().Draw(rt, "structured") {
			members = append(members, `"structuredContent":`+jsonValue(rt, 0))
		}
		if rapid.Bool().Draw(rt, "meta") {
			members = append(members, `"_meta":`+jsonValue(rt, 1))
		}
		if rapid.Bool().Draw(rt, "isError") {
			members = append(members, `"isError":`+rapid.SampledFrom([]string{"true", "false", "null", "1"}).Draw(rt, "isErrorValue"))
		}
		if rapid.Bool().Draw(rt, "resultType") {
			members = append(members, `"resultType":`+rapid.SampledFrom([]string{`"complete"`, `"input_required"`, `""`}).Draw(rt, "rt"))
		}
		if rapid.Bool().Draw(rt, "other") {
			members = append(members, rapid.SampledFrom([]string{`"requestState":"s"`, `"Content":[]`, `"content":[]`, `"x":1`}).Draw(rt, "extra"))
		}
		body := "{" + strings.Join(members, ",") + "}"
		got := decodeCommon([]byte(body))
		if got == nil {
			return
		}
		var want mcp.CallToolResult
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			rt.Fatalf("decodeCommon took %s, which the SDK refuses: %v", body, err)
		}
		gb, err := json.Marshal(got)
		if err != nil {
			rt.Fatal(err)
		}
		var gm, wm map[string]json.RawMessage
		wb, _ := json.Marshal(&want)
		_ = json.Unmarshal(gb, &gm)
		_ = json.Unmarshal(wb, &wm)
		delete(wm, "resultType")
		if g, w := fmt.Sprint(gm), fmt.Sprint(wm); g != w {
			rt.Fatalf("%s:\ndecodeCommon %s\nSDK          %s", body, gb, wb)
		}
	})
}

// The common shape is taken; anything else is left to the SDK's decoder.
func TestDecodeCommonTakesOnlyTheCommonShape(t *testing.T) {
	for _, tc := range []struct {
		body string
		take bool
	}{
		{`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1.5,"b":[true,null,"x"]},"_meta":{"k":"v"},"isError":true,"resultType":"complete"}`, true},
		{`{"content":[{"type":"text","text":"ok"},{"type":"text","text":""}]}`, true},
		{`{"content":[]}`, false},
		{`{"content":null}`, false},
		{`{"content":[{"type":"image","data":"x","mimeType":"image/png"}]}`, false},
		{`{"content":[{"type":"text","text":"ok","annotations":{}}]}`, false},
		{`{"content":[{"type":"text","text":"ok"}],"resultType":"input_required"}`, false},
		{`{"content":[{"type":"text","text":"ok"}],"inputRequests":{}}`, false},
		{`{"content":[{"type":"text","text":"ok"}],"Content":[]}`, false},
		{`{"content":[{"type":"text","text":"ok"}],"isError":false,"isError":true}`, false},
		{`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1,"a":2}}`, false},
		{`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1e400}}`, false},
		{"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}", false},
	} {
		got := decodeCommon([]byte(tc.body))
		if (got != nil) != tc.take {
			t.Errorf("%s: taken %v, want %v", tc.body, got != nil, tc.take)
			continue
		}
		if got == nil {
			continue
		}
		var want mcp.CallToolResult
		if err := json.Unmarshal([]byte(tc.body), &want); err != nil {
			t.Fatal(err)
		}
		if g, w := withoutResultType(t, got), withoutResultType(t, &want); g != w {
			t.Errorf("%s:\n%s\nSDK %s", tc.body, g, w)
		}
	}
}

// v1Exact says a value is what encoding/json writes back only when it is:
// the SDK's decoding of it, encoded again, is the same bytes. And what
// encoding/json writes is taken as it is.
func TestV1ExactOnlyForWhatEncodingJSONWrites(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		text := jsonValue(rt, 0)
		switch rapid.IntRange(0, 3).Draw(rt, "form") {
		case 1: // as encoding/json writes it, when it decodes (taken unless it escapes a character)
			var v any
			if json.Unmarshal([]byte(text), &v) == nil {
				b, err := json.Marshal(v)
				if err != nil {
					rt.Fatal(err)
				}
				if !v1Exact(b) && !bytes.Contains(b, []byte(`\`)) {
					rt.Fatalf("%s, as encoding/json writes it, is not taken", b)
				}
				text = string(b)
			}
		case 2: // with white space somewhere
			i := rapid.IntRange(0, len(text)).Draw(rt, "at")
			text = text[:i] + rapid.SampledFrom([]string{" ", "\n", "\t", "\r"}).Draw(rt, "space") + text[i:]
		}
		if !v1Exact([]byte(text)) {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			rt.Fatalf("%s is taken, but does not decode: %v", text, err)
		}
		b, err := json.Marshal(v)
		if err != nil || string(b) != text {
			rt.Fatalf("%s is taken, but encoding/json writes %s (%v)", text, b, err)
		}
	})
	// Numbers: every float64 as encoding/json writes it is taken; any other
	// spelling only when it is that.
	rapid.Check(t, func(rt *rapid.T) {
		f := rapid.Float64().Draw(rt, "f")
		b, err := json.Marshal(f)
		if err != nil {
			return
		}
		if !v1Exact(b) {
			rt.Fatalf("%s, as encoding/json writes it, is not taken", b)
		}
		for _, format := range []byte{'e', 'E', 'f', 'g', 'G'} {
			n := strconv.FormatFloat(f, format, -1, 64)
			if v1Exact([]byte(n)) != (n == string(b)) {
				rt.Fatalf("%s taken %v; encoding/json writes %s", n, v1Exact([]byte(n)), b)
			}
		}
	})
	for _, tc := range []struct {
		text string
		take bool
	}{
		{`{"account":"220-555-010","balance":12345}`, true},
		{`{"balance":12345,"account":"220-555-010"}`, false},
		{`{"a":1,"a":1}`, false},
		{`{"a": 1}`, false},
		{`{"a":1} `, false},
		{`[1,2.5,-0,1e+21,1e-7,0.000001,true,false,null,"x",{},[]]`, true},
		{`[1.0]`, false},
		{`[1e21]`, false},
		{`[1E+21]`, false},
		{`[1e-07]`, false},
		{`[9007199254740993]`, false},
		{`[1e400]`, false},
		{`["<"]`, false},
		{`["\u003c"]`, false},
		{`["` + "\u2028" + `"]`, false},
		{`["` + "\u2027\u202a" + `"]`, true},
		{`["a/b"]`, true},
		{"[\"\x7f\"]", true},
		{"[\"\xff\"]", false},
		{`{"<":1}`, false},
		{`{"B":1,"a":2}`, true},
		{`{"a":2,"B":1}`, false},
		{`{"":1,"a":2}`, true},
	} {
		if got := v1Exact([]byte(tc.text)); got != tc.take {
			t.Errorf("v1Exact(%s) = %v, want %v", tc.text, got, tc.take)
		}
	}
}
